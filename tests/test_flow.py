"""End to end through the real Prefect flow: 10 tickers x 2 draws x 2 nights on both paths."""

import asyncio
import os

import pytest

from dualpath.sim.fleet import SimFleet
from tests.helpers import make_project
from warehouse.db import reader


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory):
    os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "90"
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.testing.utilities import prefect_test_harness
    with prefect_test_harness(server_startup_timeout=90):
        yield


def test_small_demo_end_to_end(tmp_path, prefect_harness):
    from flows.nightly import nightly

    cfg_path, cfg, nights = make_project(tmp_path, tickers=10, draws=2, nights=2)
    with SimFleet(cfg) as fleet:
        async def go():
            return [await nightly(str(cfg_path), n, endpoints=fleet.urls) for n in nights]
        results = asyncio.run(go())
        # a rerun of a finished night schedules nothing and duplicates nothing
        again = asyncio.run(nightly(str(cfg_path), nights[0], endpoints=fleet.urls))
    assert [r["night"] for r in results] == [n.isoformat() for n in nights]
    for r in results + [again]:
        assert {row["path"]: row["status"] for row in r["runs"]} == {"main": "complete",
                                                                      "backup": "complete"}
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        q = lambda s: con.execute(s).fetchall()
        # scheduled: 2 nights x 2 paths x 10 tickers x 2 draws units, 17 calls each
        assert q("SELECT count(*) FROM units") == [(2 * 2 * 10 * 2,)]
        assert q("SELECT count(*) FROM calls") == [(2 * 2 * 10 * 2 * 17,)]
        assert q("SELECT count(*) FROM runs WHERE status = 'complete'") == [(4,)]
        # every call carries client clocks and the server's timings
        assert q("""SELECT count(*) FROM calls WHERE latency_s IS NULL OR latency_s <= 0
                    OR prompt_n IS NULL OR predicted_n IS NULL OR prompt_ms IS NULL
                    OR predicted_ms IS NULL OR system_fingerprint IS NULL""") == [(0,)]
        assert q("SELECT count(*) FROM calls WHERE contaminated IS NOT NULL") == [(0,)]
        per_unit = q("SELECT DISTINCT n FROM (SELECT count(*) n FROM calls "
                     "GROUP BY run_id, ticker, draw)")
        assert per_unit == [(17,)]
        sessions = q("SELECT DISTINCT path, how, model, slots FROM server_sessions ORDER BY path")
        assert sessions == [("backup", "simulated", "qwen3.6-35b-a3b", 4),
                            ("main", "simulated", "qwen-27b-dense", 8)]
        assert q("SELECT count(*) FROM run_segments") == [(4,)]


def test_identity_mismatch_stops_that_path_only(tmp_path, prefect_harness):
    from flows.nightly import nightly

    cfg_path, cfg, nights = make_project(tmp_path, tickers=3, draws=1, nights=1)
    text = cfg_path.read_text().replace('[paths.backup.sim]',
                                        '[paths.backup.expect]\nslots = 6\nmodel = "other"\n\n'
                                        '[paths.backup.sim]')
    cfg_path.write_text(text)
    with SimFleet(cfg) as fleet:
        result = asyncio.run(nightly(str(cfg_path), nights[0], endpoints=fleet.urls))
    status = {r["path"]: r["status"] for r in result["runs"]}
    assert status == {"main": "complete", "backup": "failed"}
    problems = " ".join(result["identity_problems"]["backup"])
    assert "slots: expected 6, server reports 4" in problems
    assert "model: expected 'other'" in problems


def test_unreachable_server_fails_its_path_and_a_rerun_resumes(tmp_path, prefect_harness):
    from flows.nightly import nightly

    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        down = {"main": fleet.urls["main"], "backup": "http://127.0.0.1:9"}   # nothing there
        first = asyncio.run(nightly(str(cfg_path), nights[0], endpoints=down))
        again = asyncio.run(nightly(str(cfg_path), nights[0], endpoints=fleet.urls))
    assert {r["path"]: r["status"] for r in first["runs"]} == {"main": "complete",
                                                                "backup": "failed"}
    assert "server unreachable" in first["identity_problems"]["backup"][0]
    assert {r["path"]: r["status"] for r in again["runs"]} == {"main": "complete",
                                                                "backup": "complete"}
