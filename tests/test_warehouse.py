"""Journal -> warehouse: idempotence, resume, abandoned calls, concurrent readers."""

import subprocess
import sys
import time

import duckdb

from dualpath.sim.fleet import SimFleet
from dualpath.flows import runner
from tests.helpers import ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader, writer
from dualpath.warehouse.migrations import MIGRATIONS, migrate


def counts(cfg):
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        return {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("runs", "calls", "units", "texts", "server_sessions", "search_docs",
                          "search_postings")}


def test_migrations_are_recorded_and_run_once(tmp_path):
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    assert migrate(con) == [name for name, _ in MIGRATIONS]
    assert migrate(con) == []
    names = [r[0] for r in con.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()]
    assert names == sorted(n for n, _ in MIGRATIONS)


def test_ingest_twice_changes_nothing(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=4, draws=2, nights=1)
    with SimFleet(cfg) as fleet:
        plans = score_night_plain(cfg, nights[0], fleet.urls)
    first = ingest(cfg, plans)
    c1 = counts(cfg)
    second = ingest(cfg, plans)
    assert counts(cfg) == c1
    assert [s.new_calls for s in first] == [4 * 2 * 17] * 2
    assert [s.new_calls for s in second] == [0, 0] and [s.new_units for s in second] == [0, 0]
    assert c1["calls"] == 2 * 4 * 2 * 17 and c1["units"] == 2 * 8 and c1["runs"] == 2
    assert c1["server_sessions"] == 2
    assert 0 < c1["search_docs"] <= c1["texts"]    # the answers indexed, none twice
    # prompts repeat (system prompts, the same ticker's data across draws and paths): stored once
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        distinct_prompts = con.execute("SELECT count(DISTINCT prompt_hash) FROM calls").fetchone()[0]
        status = con.execute("SELECT DISTINCT status FROM runs").fetchall()
    assert distinct_prompts < c1["calls"] and status == [("complete",)]


def test_resume_a_half_finished_night(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1)
    night = nights[0]
    with SimFleet(cfg) as fleet:
        plans = score_night_plain(cfg, night, fleet.urls, stop_after_units=4)
        ingest(cfg, plans)
        with reader(cfg.resolve(cfg.warehouse.path)) as con:
            st = dict(con.execute("SELECT path, status FROM runs").fetchall())
            abandoned = con.execute("SELECT count(*) FROM v_calls WHERE abandoned").fetchone()[0]
        assert set(st.values()) == {"partial"}      # never reported as a result
        assert abandoned > 0                         # in-flight units' calls kept, flagged
        # a crash mid-write leaves a torn line; the rerun must cope with it too
        j = plans[0].journal
        j.write_bytes(j.read_bytes() + b'{"k":"call","call_id":"tor')
        replans = runner.plan_night(cfg, night)
        assert all(0 < len(p.units) < 12 for p in replans)
        assert all(p.segment == 2 for p in replans)
        plans2 = score_night_plain(cfg, night, fleet.urls)
    ingest(cfg, plans2)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        # every unit measured exactly once; the attempts cut off by the stop stay, abandoned
        units = con.execute("SELECT path, count(*) FILTER (WHERE measured), "
                            "count(DISTINCT (ticker, draw)) FROM v_units WHERE is_final "
                            "GROUP BY path").fetchall()
        cut = con.execute("SELECT DISTINCT outcome FROM v_units WHERE NOT is_final").fetchall()
        st = dict(con.execute("SELECT path, status FROM runs").fetchall())
        live = con.execute("SELECT count(*) FROM v_calls WHERE NOT abandoned").fetchone()[0]
        segs = con.execute("SELECT count(*) FROM run_segments").fetchone()[0]
    assert sorted(units) == [("backup", 12, 12), ("main", 12, 12)]
    assert cut == [("abandoned",)]
    assert set(st.values()) == {"complete"}
    assert live == 2 * 12 * 17 and segs == 4


def test_a_changed_config_does_not_mix_into_a_started_night(tmp_path):
    import pytest
    from dualpath.config import load_config
    from dualpath.errors import UserError
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        score_night_plain(cfg, nights[0], fleet.urls, stop_after_units=1)
    cfg_path.write_text(cfg_path.read_text().replace("temperature = 0.7", "temperature = 0.6"))
    with pytest.raises(UserError, match="different config"):
        runner.plan_night(load_config(cfg_path), nights[0])


HOLD_WRITER = """
import sys, time
from pathlib import Path
from dualpath.warehouse.db import writer
with writer(Path(sys.argv[1])) as con:
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_sql_from_another_process_waits_out_a_writer(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    db = cfg.resolve(cfg.warehouse.path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITER, str(db), "1.5"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "dualpath", "sql", "--config", str(cfg_path),
                        "--format", "csv", "SELECT count(*) AS n FROM prices"],
                       capture_output=True, text=True, timeout=60)
    holder.wait()
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == "168" or int(r.stdout.splitlines()[1]) > 0
    assert time.monotonic() - t0 > 0.5     # it really had to wait for the writer


def test_writer_waits_out_readers(tmp_path):
    """A reader held open by another process keeps the writer out (a short wait gives up
    with WarehouseBusy, a long one is still waiting); once that reader closes, the waiting
    writer proceeds."""
    import threading

    import pytest

    from dualpath.errors import WarehouseBusy

    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    db = cfg.resolve(cfg.warehouse.path)
    hold = ("import sys; from pathlib import Path; from dualpath.warehouse.db import reader\n"
            "with reader(Path(sys.argv[1])) as con:\n"
            "    print(con.execute('SELECT count(*) FROM prices').fetchone()[0], flush=True)\n"
            "    sys.stdin.readline()\n")
    other = subprocess.Popen([sys.executable, "-c", hold, str(db)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert int(other.stdout.readline()) > 0          # the other process holds a reader
        with pytest.raises(WarehouseBusy):
            with writer(db, wait_s=0.5):
                pass
        entered, failed = threading.Event(), []

        def write():
            try:
                with writer(db, wait_s=120) as con:
                    con.execute("SELECT 1")
                    entered.set()
            except Exception as e:   # surfaced below
                failed.append(e)

        t = threading.Thread(target=write)
        t.start()
        assert not entered.wait(1.0) and not failed      # waiting while the reader is open
        other.stdin.write("\n")
        other.stdin.flush()
        assert other.wait(30) == 0                       # the reader closed
        t.join(120)
        assert entered.is_set() and not failed           # and the writer went ahead
    finally:
        if other.poll() is None:
            other.kill()
