"""Paths on other hosts: each path's share of a night scored by a Prefect worker of its own
work pool, in its own folder standing for a host, its journal shipped through a store.

The end-to-end test uses a real `prefect server`, two real `prefect worker` processes (pools
`dp-host-a`, `dp-host-b`, each worker in its own folder with `DUALPATH_HOST_DIR` set there),
the real `dualpath` console script, simulated servers over loopback HTTP and real DuckDB
files. The others check the store, the kit and the user mistakes without a server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import pytest

from dualpath.config import dump_toml, load_config
from dualpath.demo import demo_config_data, demo_market
from dualpath.errors import ConfigError
from dualpath.night import PriceHistory
from dualpath.flows import remote
from dualpath.flows.store import JournalStore
from tests.helpers import SimFleet, make_project, score_night_plain
from dualpath.warehouse.db import reader, writer
from dualpath.warehouse.prices import import_prices, validate_prices

BIN = Path(sys.executable).parent
# backup: 4 slots, 8 tickers, about 1 s per unit here: two waves, so a kill can fall between
BACKUP_SCALE = 0.004
TICKERS = 8


def project(root: Path, **warehouse) -> tuple[Path, object, list[date]]:
    """A small simulated two-path project under `root`, prices imported."""
    root.mkdir(parents=True, exist_ok=True)
    data = demo_config_data(root, TICKERS, 1, 1.0)
    data["paths"]["backup"]["sim"]["time_scale"] = BACKUP_SCALE
    pools = warehouse.pop("pools", None)
    if pools:
        for name, pool in pools.items():
            data["paths"][name]["work_pool"] = pool
    data["warehouse"].update(warehouse)
    cfg_path = root / "dualpath.toml"
    cfg_path.write_text(dump_toml(data) + "\n")
    cfg = load_config(cfg_path)
    market = demo_market(cfg, 2)
    raw = market.prices()
    raw = raw[raw["ticker"].isin(cfg.tickers())]
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        import_prices(con, validate_prices(raw, cfg.tickers())[0])
    return cfg_path, cfg, market.nights(2)


def env_for(api: str, home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "DUALPATH_"))}
    env.update(PREFECT_API_URL=api, PREFECT_HOME=str(home / "prefect-client"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false",
               # flow-run heartbeats every 30 s (Prefect's minimum): a dead host is crashed
               # by the zombie automation after two missed ones
               PREFECT_FLOWS_HEARTBEAT_FREQUENCY="30", PREFECT_WORKER_QUERY_SECONDS="1",
               PREFECT_WORKER_HEARTBEAT_SECONDS="5", **extra)
    return env


def start_worker(pool: str, host: Path, env: dict) -> subprocess.Popen:
    host.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [str(BIN / "prefect"), "worker", "start", "--pool", pool, "--name", host.name],
        env={**env, "DUALPATH_HOST_DIR": str(host)}, cwd=host, start_new_session=True,
        stdout=open(host / "worker.log", "ab"), stderr=subprocess.STDOUT)


def kill_host(host: Path) -> int:
    """SIGKILL every process of the host folder (worker, flow run, simulated server): what
    a machine that loses power leaves behind."""
    needle = f"DUALPATH_HOST_DIR={host}".encode()
    killed = 0
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        except (OSError, ProcessLookupError):
            pass
    return killed


def dualpath(*args, env, timeout=400) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "dualpath"), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def rows(cfg, sql: str) -> list[tuple]:
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        return con.execute(sql).fetchall()


RUNS = ("SELECT path, status, units_planned, units_measured, config_hash FROM runs "
        "WHERE night = ? ORDER BY ALL")
UNITS = ("SELECT path, ticker, draw, unit_attempt, outcome, grade FROM units WHERE night = ? "
         "ORDER BY ALL")
# call_seq is left out: it numbers a unit's calls in the order they were sent, and agents
# that run concurrently are sent in whichever order the event loop reaches them
CALLS = ("SELECT path, ticker, draw, unit_attempt, agent, prompt_hash, output_hash, "
         "prompt_tokens, completion_tokens, finish_reason, error_kind FROM calls "
         "WHERE night = ? ORDER BY ALL")


def night_rows(cfg, night: date) -> dict:
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        return {q: con.execute(q, [night]).fetchall() for q in (RUNS, UNITS, CALLS)}


def register_shares(env: dict, pools: list[str]) -> None:
    """The share deployments, shipping every second (a night here lasts seconds)."""
    code = ("import asyncio, sys; from dualpath.flows.remote import ensure_share_deployment as e\n"
            "async def go():\n"
            "    for p in sys.argv[1:]: await e(p, 1.0, replace_existing=True)\n"
            "asyncio.run(go())")
    r = subprocess.run([sys.executable, "-c", code, *pools], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]


def test_two_hosts_score_a_night_like_one_and_a_dead_host_resumes(tmp_path, prefect_api):
    store = tmp_path / "store"
    local_cfg_path, local_cfg, nights = project(tmp_path / "local")
    cfg_path, cfg, _ = project(tmp_path / "parent", journal_store=str(store),
                               pools={"main": "dp-host-a", "backup": "dp-host-b"})
    assert cfg.fingerprint() == local_cfg.fingerprint()     # pools and stores measure nothing
    env = env_for(prefect_api, tmp_path)
    for pool in ("dp-host-a", "dp-host-b"):
        r = subprocess.run([str(BIN / "prefect"), "work-pool", "create", pool, "--type",
                            "process"], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    register_shares(env, ["dp-host-a", "dp-host-b"])
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    workers = [start_worker("dp-host-a", host_a, env), start_worker("dp-host-b", host_b, env)]
    try:
        # the same night on one machine, and on two hosts: the same rows
        local = dualpath("nightly", "-c", str(local_cfg_path), "--date", nights[0].isoformat(),
                         env=env)
        assert local.returncode == 0, local.stdout + local.stderr
        two = dualpath("nightly", "-c", str(cfg_path), "--date", nights[0].isoformat(), env=env)
        assert two.returncode == 0, two.stdout + two.stderr
        want, got = night_rows(local_cfg, nights[0]), night_rows(cfg, nights[0])
        assert got[RUNS] == want[RUNS] and [r[1] for r in got[RUNS]] == ["complete"] * 2
        assert got[UNITS] == want[UNITS] and len(got[UNITS]) == 2 * TICKERS
        assert got[CALLS] == want[CALLS] and len(got[CALLS]) == 2 * TICKERS * 17
        # each path's journal was written on its own host, shipped, and fetched here
        for host, path in ((host_a, "main"), (host_b, "backup")):
            assert (host / "runs" / "demo" / nights[0].isoformat() / path / "journal.jsonl").exists()
            assert (store / "demo" / nights[0].isoformat() / path / "journal.jsonl").exists()
        assert rows(cfg, "SELECT path, worker FROM server_sessions ORDER BY 1") == [
            ("backup", "host-b"), ("main", "host-a")]
        evidence = dualpath("runs", "-c", str(cfg_path), "--evidence", "-f", "csv", env=env)
        assert evidence.returncode == 0, evidence.stderr
        assert f"{nights[0].isoformat()},backup,1," in evidence.stdout
        assert ",host-b,simulated," in evidence.stdout and ",host-a,simulated," in evidence.stdout

        # host b dies once its first units are shipped: a partial run, the flow Failed, exit 1
        night = nights[1].isoformat()
        shipped = store / "demo" / night / "backup" / "journal.jsonl"
        parent = subprocess.Popen([str(BIN / "dualpath"), "nightly", "-c", str(cfg_path),
                                   "--date", night], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while not (shipped.exists() and b'{"k":"unit"' in shipped.read_bytes()):
            assert time.monotonic() < deadline and parent.poll() is None, parent.communicate()
            time.sleep(0.1)
        assert kill_host(host_b) >= 2
        out, err = parent.communicate(timeout=400)
        assert parent.returncode == 1, out + err
        assert "backup partial" in err, err
        (status, measured), = rows(cfg, f"SELECT status, units_measured FROM runs WHERE "
                                        f"night = '{night}' AND path = 'backup'")
        assert status == "partial" and 0 < measured < TICKERS, (status, measured)
        assert rows(cfg, f"SELECT status FROM runs WHERE night = '{night}' AND path = 'main'"
                    ) == [("complete",)]

        # the host comes back; the rerun resumes from its journal and completes, no duplicates
        workers[1] = start_worker("dp-host-b", host_b, env)
        again = dualpath("nightly", "-c", str(cfg_path), "--date", night, env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        (status, measured, segments), = rows(
            cfg, f"SELECT status, units_measured, segments FROM runs WHERE night = '{night}' "
            "AND path = 'backup'")
        assert (status, measured, segments) == ("complete", TICKERS, 2)
        assert rows(cfg, "SELECT count(*) - count(DISTINCT call_id) FROM calls") == [(0,)]
        assert rows(cfg, f"SELECT ticker, count(*) FROM units WHERE night = '{night}' AND "
                    "path = 'backup' AND outcome IN ('graded', 'parse_failed') GROUP BY 1 "
                    "HAVING count(*) <> 1") == []
        assert rows(cfg, f"SELECT DISTINCT worker FROM server_sessions WHERE run_id = "
                    f"'demo/{night}/backup'") == [("host-b",)]
    finally:
        for w in workers:
            with_suppress_kill(w)


def with_suppress_kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass


def test_a_folder_store_ships_atomically_and_a_journal_shipped_twice_is_ingested_once(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, nights[0], fleet.urls)
    store = JournalStore("store", tmp_path)          # relative: to the config's folder
    key = JournalStore.key("demo", nights[0].isoformat(), "main")
    journal = [w.journal for w in works if w.path == "main"][0]
    store.put(journal, key)
    store.put(journal, key)                           # a retried shipment
    assert (tmp_path / "store" / key).read_bytes() == journal.read_bytes()
    assert [p.name for p in (tmp_path / "store" / key).parent.iterdir()] == ["journal.jsonl"]
    fetched = tmp_path / "parent" / "journal.jsonl"
    assert store.get(key, fetched) and store.get(key, fetched)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        from dualpath.warehouse.ingest import ingest_journals
        first = ingest_journals(con, [fetched])[0]
        second = ingest_journals(con, [fetched])[0]
    assert (first.new_calls, first.new_units) == (2 * 17, 2)
    assert (second.new_calls, second.new_units) == (0, 0)
    assert rows(cfg, "SELECT count(*) FROM calls") == [(2 * 17,)]
    assert store.get("demo/nothing/main/journal.jsonl", tmp_path / "x") is False


def test_an_fsspec_url_store_works_like_a_folder(tmp_path):
    pytest.importorskip("fsspec")
    store = JournalStore("memory://dualpath-test-store")
    store.check()
    src = tmp_path / "j.jsonl"
    src.write_bytes(b'{"k":"begin"}\n{"k":"ca')      # a torn tail is not shipped
    store.put(src, "e/n/p/journal.jsonl")
    assert store.read("e/n/p/journal.jsonl") == b'{"k":"begin"}\n'


def test_store_mistakes_say_how_to_fix_them(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match="cannot be written and read back"):
        JournalStore(str(blocker / "store")).check()
    with pytest.raises(ConfigError, match="fsspec package"):
        JournalStore("nosuchprotocol://bucket/prefix")
    # a pooled path without a store is a config mistake, caught when the config is read
    with pytest.raises(ConfigError, match="set \\[warehouse\\] journal_store"):
        project(tmp_path / "p", pools={"backup": "gpu-b"})


def test_the_kit_rebuilds_the_config_on_another_host_with_the_same_fingerprint(tmp_path):
    universe = tmp_path / "p" / "universe.txt"
    universe.parent.mkdir()
    universe.write_text("\n".join(f"SYN{i:03d}" for i in range(3)) + "\n")
    docs = tmp_path / "p" / "docs"
    docs.mkdir()
    (docs / "SYN001.md").write_text("a note")
    data = demo_config_data(tmp_path / "p", 3, 1, 1.0)
    data["experiment"].pop("universe")
    data["experiment"]["universe_file"] = "universe.txt"
    data["pipeline"] = {"documents_dir": "docs"}
    data["paths"]["backup"]["work_pool"] = "gpu-b"
    data["warehouse"]["journal_store"] = str(tmp_path / "store")
    (tmp_path / "p" / "dualpath.toml").write_text(dump_toml(data) + "\n")
    cfg = load_config(tmp_path / "p" / "dualpath.toml")
    nights = demo_market(cfg, 1).nights(1)
    raw = demo_market(cfg, 1).prices()
    history = PriceHistory(raw[raw["ticker"].isin(cfg.tickers())])
    kit = remote.make_kit(cfg, nights[0], "backup", history, {"SYN002": "no price"})
    kit = remote.ShareKit.model_validate_json(kit.model_dump_json())     # as Prefect ships it
    host = tmp_path / "host-b"
    shipped = remote.kit_config(kit, host)
    assert shipped.fingerprint() == cfg.fingerprint()
    assert shipped.tickers() == ["SYN000", "SYN001", "SYN002"]
    assert shipped.resolve(shipped.warehouse.runs_dir) == host / "runs"
    assert (shipped.resolve(shipped.pipeline.documents_dir) / "SYN001.md").read_text() == "a note"
    assert set(kit.closes) == {"SYN000", "SYN001"} and kit.missing == {"SYN002": "no price"}
    tampered = kit.model_copy(update={"config_hash": "0" * 16})
    with pytest.raises(ConfigError, match="same dualpath version"):
        remote.kit_config(tampered, host)


def test_an_unknown_pool_is_a_config_mistake_naming_the_fix(tmp_path, prefect_api):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    _, cfg, _ = project(tmp_path / "p", journal_store=str(tmp_path / "store"),
                        pools={"backup": "no-such-pool"})
    with temporary_settings({PREFECT_API_URL: prefect_api}):
        with pytest.raises(ConfigError, match="prefect work-pool create no-such-pool"):
            asyncio.run(remote.prepare_pools(cfg, ["backup"]))
