"""A damaged journal repaired exactly, a damaged warehouse diagnosed in one line and rebuilt
from the journals."""

from __future__ import annotations

import orjson
import pytest

from dualpath.errors import DataError, WarehouseDamaged
from dualpath.flows.doctor import _warehouse_checks
from tests.cli_run import run_cli
from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader, writer
from dualpath.warehouse.ingest import ingest_journals

def cli(*args):
    return run_cli(*args)      # in process, in the test's folder (the autouse fixture's)


def counts(cfg):
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        return con.execute("""SELECT count(*), count(DISTINCT call_id),
            (SELECT count(*) FROM v_units WHERE is_final AND measured),
            (SELECT count(*) FROM (SELECT 1 FROM v_units WHERE measured
                                   GROUP BY run_id, ticker, draw HAVING count(*) > 1))
            FROM calls""").fetchone()


def test_a_damaged_journal_is_repaired_and_the_rerun_is_exact(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=3, draws=2, nights=1)
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, nights[0], fleet.urls, stop_after_units=2)
        ingest(cfg, works)                 # some of its calls are in the warehouse already
        j = works[1].journal
        lines = j.read_bytes().splitlines(keepends=True)
        finished = {(u["ticker"], u["draw"], u["unit_attempt"]) for u in map(orjson.loads, lines)
                    if u["k"] == "unit"}
        calls = [i for i, ln in enumerate(lines) if ln.startswith(b'{"k":"call"') and
                 tuple(orjson.loads(ln)[k] for k in ("ticker", "draw", "unit_attempt"))
                 in finished]                      # a call of a unit that has finished
        lines[calls[len(calls) // 2]] = b'{"k":"call","call_id":"x\x00\n'     # a bad block
        j.write_bytes(b"".join(lines))
        with pytest.raises(DataError, match="dualpath repair"):
            ingest(cfg, works)
        r = cli("repair", str(j), "-c", str(cfg_path))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "quarantined the damaged journal as" in r.stdout and "left out: not JSON" in r.stderr
        assert list(j.parent.glob("journal.damaged-*.jsonl"))
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))      # the rerun
    total, distinct, measured, twice = counts(cfg)
    assert total == distinct and twice == 0
    docs, distinct_docs, _, missing = search_index(cfg)      # every answer indexed, once
    assert docs == distinct_docs and missing == 0
    assert measured == 2 * 3 * 2                       # every unit, once
    # the unit whose call was damaged is scored again, never kept with 16 of its 17 calls
    assert "calls are readable, so the rerun scores it again" in r.stderr
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        short = con.execute("""SELECT count(*) FROM units u WHERE u.n_calls > (
            SELECT count(*) FROM calls c WHERE c.run_id = u.run_id AND c.ticker = u.ticker
            AND c.draw = u.draw AND c.unit_attempt = u.unit_attempt)""").fetchone()[0]
    assert short == 0
    ids = {ln for ln in j.read_bytes().splitlines() if ln.startswith(b'{"k":"call"')}
    assert total == sum(len(w.journal.read_bytes().split(b'{"k":"call"')) - 1
                        for w in works)
    assert ids


def search_index(cfg):
    """The answers' index: answers, distinct answers, postings, and answers it lacks."""
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        return con.execute("""SELECT count(*), count(DISTINCT hash),
            (SELECT count(*) FROM search_postings),
            (SELECT count(DISTINCT output_hash) FROM calls WHERE output_hash NOT IN
                (SELECT hash FROM search_docs) AND output_hash IN (SELECT hash FROM texts))
            FROM search_docs""").fetchone()


def test_a_damaged_warehouse_is_one_line_everywhere_and_rebuilt_from_the_journals(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    before = counts(cfg)
    indexed = search_index(cfg)
    assert indexed[0] == indexed[1] > 0 and indexed[3] == 0
    wh = cfg.resolve(cfg.warehouse.path)
    for damage in (lambda b: b[:len(b) // 3], lambda b: b""):
        wh.write_bytes(damage(wh.read_bytes()))
        r = cli("runs", "-c", str(cfg_path))
        assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr, r.stderr
        assert f"warehouse {wh} is damaged" in r.stderr and "dualpath rebuild" in r.stderr
        assert len(r.stderr.strip().splitlines()) <= 3          # one message, wrapped
        with pytest.raises(WarehouseDamaged):          # what nightly's ingest meets
            with writer(wh) as con:
                ingest_journals(con, [w for w in cfg.resolve(cfg.warehouse.runs_dir)
                                      .rglob("journal.jsonl")])
        checks, _ = _warehouse_checks(cfg)                      # doctor diagnoses it
        bad = [c for c in checks if not c.ok]
        assert [c.name for c in bad] == ["warehouse"] and "rebuild" in bad[0].fix
        r = cli("rebuild", "-c", str(cfg_path))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "the old warehouse is kept as" in r.stdout
        assert counts(cfg) == before
        assert search_index(cfg) == indexed        # rebuilt by the ingest, copied from nowhere
        # prices are in no journal: copied when the old file still reads, else named
        if "not recovered: prices" in r.stderr:
            with writer(wh) as con:
                from dualpath.demo import demo_market
                from dualpath.warehouse.prices import import_prices, validate_prices
                raw = demo_market(cfg, 1).prices()
                raw = raw[raw["ticker"].isin(cfg.tickers())]
                import_prices(con, validate_prices(raw, cfg.tickers())[0])
        else:
            assert "prices" in r.stdout.split("copied from the old file:")[1]


def test_a_rebuilt_warehouse_keeps_its_preregistration(tmp_path):
    """No journal holds a plan: the freeze log beside the warehouse does, and a rebuild of a
    file that cannot be read restores the freeze (its time and hash), so the study stays
    what it was (a freeze after its nights would be exploratory)."""
    from dualpath.flows.prereg import freeze_plan
    from dualpath.warehouse.plans import current, freeze_log

    cfg_path, cfg, nights = make_project(tmp_path, tickers=5, draws=1, nights=2)
    from dualpath.prereg import draft_plan, plan_toml
    (tmp_path / "plan.toml").write_text(plan_toml(draft_plan(cfg, nights[0], len(nights))))
    frozen = freeze_plan(cfg, tmp_path / "plan.toml", force=True, reason="a test window")
    wh = cfg.resolve(cfg.warehouse.path)
    assert freeze_log(wh).exists()
    wh.write_bytes(b"")                                   # nothing of it can be read
    r = cli("rebuild", "-c", str(cfg_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"plans (from {freeze_log(wh).name})" in r.stdout
    with reader(wh) as con:
        back = current(con, cfg.experiment.name)
    assert (back.plan_hash, back.frozen_at, back.forced) == (frozen.plan_hash, frozen.frozen_at,
                                                            frozen.forced)
