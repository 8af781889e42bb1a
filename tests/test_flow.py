"""End to end through the real Prefect flow on simulated paths (main speaks vLLM's dialect)."""

import asyncio

from dualpath.sim.fleet import SimFleet
from tests.helpers import make_project
from dualpath.warehouse.db import reader


def run_night(cfg_path, night, endpoints=None):
    """The flow's final state and its result (the data even when the state is Failed)."""
    from dualpath.flows.nightly import nightly_local

    async def go():
        state = await nightly_local(str(cfg_path), night, endpoints=endpoints, return_state=True)
        return state, await state.result(raise_on_failure=False)
    return asyncio.run(go())


def statuses(result) -> dict:
    return {row["path"]: row["status"] for row in result["runs"]}


def test_small_demo_end_to_end(tmp_path, prefect_harness):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=10, draws=2, nights=2)
    with SimFleet(cfg) as fleet:
        results = [run_night(cfg_path, n, fleet.urls) for n in nights]
        # a rerun of a finished night schedules nothing and duplicates nothing
        again = run_night(cfg_path, nights[0], fleet.urls)
    for state, r in results + [again]:
        assert state.is_completed() and statuses(r) == {"main": "complete", "backup": "complete"}
    assert [r["night"] for _, r in results] == [n.isoformat() for n in nights]
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        q = lambda s: con.execute(s).fetchall()
        # scheduled: 2 nights x 2 paths x 10 tickers x 2 draws units, 17 calls each
        assert q("SELECT count(*) FROM units") == [(2 * 2 * 10 * 2,)]
        assert q("SELECT count(*) FROM calls") == [(2 * 2 * 10 * 2 * 17,)]
        # a call's latency splits into the server's own service time and the rest (queue,
        # HTTP, harness) where the server sends timings; vLLM-shaped replies carry none
        assert q("""SELECT path, count(service_s), count(*) FILTER (WHERE outside_service_s
                    < -0.02 * latency_s) FROM v_calls_real WHERE error_kind IS NULL
                    GROUP BY 1 ORDER BY 1""") == [("backup", 2 * 10 * 2 * 17, 0),
                                                 ("main", 2 * 10 * 2 * 17, 0)]
        # each unit's calls are numbered 1..17 once each, parallel stages included
        assert q("""SELECT count(*) FROM (SELECT run_id, ticker, draw, unit_attempt
                    FROM calls GROUP BY ALL
                    HAVING count(DISTINCT call_seq) <> 17 OR max(call_seq) <> 17)""") == [(0,)]
        assert q("SELECT count(*) FROM runs WHERE status = 'complete'") == [(4,)]
        # every call carries client clocks; llama-server's timings and build; vLLM its
        # fingerprint (vllm-<version>-<hash>) and, with --enable-per-request-metrics, its
        # prefill and decode ms; neither path contaminated
        assert q("SELECT count(*) FROM calls WHERE latency_s IS NULL OR latency_s <= 0 "
                 "OR prompt_tokens IS NULL OR completion_tokens IS NULL") == [(0,)]
        assert q("""SELECT count(*) FROM calls WHERE path = 'backup' AND (prompt_n IS NULL
                    OR predicted_ms IS NULL OR system_fingerprint IS NULL)""") == [(0,)]
        assert q("SELECT count(*), count(system_fingerprint), count(prompt_ms), "
                 "count(DISTINCT system_fingerprint) FROM calls WHERE path = 'main'") == [
            (680, 680, 680, 1)]
        assert q("SELECT path, count(contaminated) FROM calls GROUP BY 1 ORDER BY 1") == [
            ("backup", 0), ("main", 0)]
        per_unit = q("SELECT DISTINCT n FROM (SELECT count(*) n FROM calls "
                     "GROUP BY run_id, ticker, draw)")
        assert per_unit == [(17,)]
        sessions = q("SELECT DISTINCT path, dialect, how, model, slots, build "
                     "FROM server_sessions ORDER BY path")
        assert sessions == [
            ("backup", "llama.cpp", "simulated", "qwen3.6-35b-a3b", 4, "sim-b9251-e2b129e1b"),
            ("main", "vllm", "simulated", "qwen-27b-dense", None, "vllm-0.11.0")]
        assert q("SELECT count(*) FROM run_segments") == [(4,)]
        # speed is clocked on the main path too, from vLLM's usage and the client's clocks;
        # at this compressed clock (a call's service is ~60 µs) the harness, not the
        # server, sets the pace, and every run says so instead of being a speed result
        rows = q("SELECT path, count(*), count(*) FILTER (WHERE speed_measured), "
                 "count(*) FILTER (WHERE disturbed LIKE 'starved: slots busy %') FROM ("
                 + RUN_SUMMARY + ") WHERE wall_s > 0 AND segments = 1 GROUP BY 1 ORDER BY 1")
        assert rows == [("backup", 2, 0, 2), ("main", 2, 0, 2)]
        ev = server_evidence(con)
    # the servers' own counters in seconds as well as tokens; the simulated llama-server
    # counts exactly the timings it sent, vLLM's time sums stand alone (no per-call timings)
    b = ev[ev["path"] == "backup"]
    assert (b["server_prompt_tokens"] == b["calls_prompt_tokens"]).all()
    assert ((b["server_prompt_s"] - b["calls_prompt_s"]).abs() < 0.01).all()
    assert ((b["server_predicted_s"] - b["calls_predicted_s"]).abs() < 0.01).all()
    assert (b["server_decode_tps"] > 0).all() and (b["decode_tps_over_wall"] > 0).all()
    # (at this compressed time scale harness overhead dwarfs service: occupancy is low, and
    # the client-side figure, which counts in-flight time, is the one that over-reads)
    assert ((b["occupancy"] > 0) & (b["occupancy"] < b["occupancy_client"])).all()
    m = ev[ev["path"] == "main"]
    # vLLM's prompt counter counts cache hits: prefill on both sides is prompt - cached
    assert (m["server_prompt_tokens"] == m["calls_prompt_tokens"]).all()
    assert ((m["server_predicted_s"] - m["calls_predicted_s"]).abs() < 0.01).all()


from dualpath.warehouse.queries import RUN_SUMMARY, server_evidence  # noqa: E402


def test_flow_runs_are_named_and_publish_status_and_reason(tmp_path, prefect_harness):
    from prefect.client.orchestration import get_client

    cfg_path, cfg, nights = make_project(tmp_path, tickers=3, draws=1, nights=1)
    text = cfg_path.read_text().replace('[paths.backup.sim]',
                                        '[paths.backup.expect]\nslots = 6\nmodel = "other"\n\n'
                                        '[paths.backup.sim]')
    cfg_path.write_text(text)
    with SimFleet(cfg) as fleet:
        state, result = run_night(cfg_path, nights[0], fleet.urls)
    assert state.is_failed()
    assert statuses(result) == {"main": "complete", "backup": "failed"}
    detail = {r["path"]: r["status_detail"] for r in result["runs"]}["backup"]
    assert "slots: expected 6, server reports 4" in detail
    assert "model: expected 'other'" in detail

    async def look():
        async with get_client() as c:
            run = await c.read_flow_run(state.state_details.flow_run_id)
            arts = await c.read_artifacts()
            return run, [a for a in arts if a.flow_run_id == run.id]
    run, arts = asyncio.run(look())
    assert run.name == f"demo/{nights[0].isoformat()}"
    assert run.state.is_failed() and "backup failed" in run.state.message
    md = arts[0].data
    assert "| backup | **failed** |" in md and "| main | **complete** |" in md
    assert "slots: expected 6, server reports 4" in md


def test_unreachable_server_fails_its_path_and_a_rerun_resumes(tmp_path, prefect_harness):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        down = {"main": fleet.urls["main"], "backup": "http://127.0.0.1:9"}   # nothing there
        first_state, first = run_night(cfg_path, nights[0], down)
        again_state, again = run_night(cfg_path, nights[0], fleet.urls)
    assert first_state.is_failed() and statuses(first) == {"main": "complete",
                                                           "backup": "failed"}
    assert "server unreachable" in first["outcomes"]["backup"]["reason"]
    assert again_state.is_completed()
    assert statuses(again) == {"main": "complete", "backup": "complete"}


def test_a_night_without_prices_fails_and_a_rerun_after_import_completes(tmp_path,
                                                                          prefect_harness):
    """Every unit input_failed: a failed run (never 'complete'), no call made, no speed."""
    from dualpath.market import SyntheticMarket
    from dualpath.warehouse.db import writer
    from dualpath.warehouse.prices import import_prices, validate_prices

    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=1, nights=1)
    early = SyntheticMarket(7, start=cfg.market.synthetic_start.replace(year=2026), n_days=30)
    night = early.dates[-1]                      # before the imported market begins
    with SimFleet(cfg) as fleet:
        state, result = run_night(cfg_path, night, fleet.urls)
        assert state.is_failed() and set(statuses(result).values()) == {"failed"}
        assert sorted(result["missing_inputs"]) == cfg.tickers()
        with reader(cfg.resolve(cfg.warehouse.path)) as con:
            rows = con.execute("SELECT DISTINCT outcome FROM units").fetchall()
            calls = con.execute("SELECT count(*) FROM calls").fetchone()[0]
            speed = con.execute("SELECT count(*) FILTER (WHERE speed_measured) FROM (" + RUN_SUMMARY + ")").fetchone()
        assert rows == [("input_failed",)] and calls == 0 and speed == (0,)
        with writer(cfg.resolve(cfg.warehouse.path)) as con:
            raw = early.prices()
            import_prices(con, validate_prices(raw[raw.ticker.isin(cfg.tickers())],
                                               cfg.tickers())[0])
        state2, result2 = run_night(cfg_path, night, fleet.urls)
    assert state2.is_completed() and set(statuses(result2).values()) == {"complete"}
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        per_unit = con.execute("""SELECT outcome, count(*) FROM v_units GROUP BY 1
                                  ORDER BY 1""").fetchall()
    # the failed attempts stay, marked; each unit is measured exactly once, on attempt 2
    counts = dict(per_unit)
    assert counts.pop("input_failed") == 12 and sum(counts.values()) == 12
    assert set(counts) <= {"graded", "parse_failed"}


def test_a_launch_that_fails_is_recorded_and_the_other_path_still_runs(tmp_path,
                                                                        prefect_harness):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    text = cfg_path.read_text().replace(
        '[paths.backup]\nengine = "sim"',
        '[paths.backup]\nengine = "sim"\nbase_url = "http://127.0.0.1:9"\n'
        'launch = ["false"]\nready_timeout_s = 5')
    cfg_path.write_text(text)
    state, result = run_night(cfg_path, nights[0])          # main's server started by the flow
    assert state.is_failed()
    assert statuses(result) == {"main": "complete", "backup": "failed"}
    assert "ServerStartError" in result["outcomes"]["backup"]["reason"]


WATCHER = """
import sys, time, duckdb
seen = set()
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        with duckdb.connect(sys.argv[1], read_only=True) as con:
            for (s,) in con.execute("SELECT status FROM runs").fetchall():
                if s not in seen:
                    seen.add(s)
                    print(s, flush=True)
    except duckdb.Error:
        pass                                   # the writer holds it for a moment
    time.sleep(0.2)
"""


def test_a_night_in_progress_shows_as_running(tmp_path, prefect_harness):
    """The flow ingests as the journals grow: another process sees `running`, then the end."""
    import subprocess
    import sys

    from dualpath.flows import nightly as nightly_mod

    cfg_path, cfg, nights = make_project(tmp_path, tickers=8, draws=2, nights=1, clock=2.0)
    watcher = subprocess.Popen([sys.executable, "-c", WATCHER,
                                str(cfg.resolve(cfg.warehouse.path)), "60"],
                               stdout=subprocess.PIPE, text=True)
    original = nightly_mod._ingest_while_running.__defaults__
    nightly_mod._ingest_while_running.__defaults__ = (0.3, 0.5)   # look often in a short night
    try:
        with SimFleet(cfg) as fleet:
            state, result = run_night(cfg_path, nights[0], fleet.urls)
    finally:
        nightly_mod._ingest_while_running.__defaults__ = original
        watcher.terminate()
    seen = set(watcher.communicate()[0].split())
    assert state.is_completed()
    assert "running" in seen and set(statuses(result).values()) == {"complete"}


def test_a_scheduled_run_on_a_holiday_ends_cleanly_with_no_session(tmp_path, prefect_harness,
                                                                   monkeypatch):
    from datetime import datetime, timezone

    from dualpath.config import load_config
    from dualpath.flows import inputs
    from dualpath.flows.nightly import nightly

    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    krx = load_config(cfg_path).model_copy(update={"market": cfg.market.model_copy(
        update={"calendar": "XKRX", "synthetic_seed": None})})
    # 2027-09-15 is Chuseok in Seoul: 19:00 there is 10:00 UTC
    night, why = inputs.scheduled_night(krx, datetime(2027, 9, 15, 10, 0, tzinfo=timezone.utc))
    assert night is None and why.startswith("no session on 2027-09-15")
    assert inputs.scheduled_night(krx, datetime(2027, 9, 17, 10, 0, tzinfo=timezone.utc))[0] \
        .isoformat() == "2027-09-17"
    monkeypatch.setattr(inputs, "scheduled_night", lambda cfg, now: (None, why))
    state = asyncio.run(nightly(str(cfg_path), return_state=True))
    assert state.is_completed() and state.message == why
    assert not (tmp_path / "runs").exists()                    # nothing was scored


def test_the_cli_night_reads_its_config_once(tmp_path, prefect_harness, monkeypatch):
    """`dualpath nightly` read its config three times (the command, run_nightly, the flow's
    body) and a fourth for the run's name; now once, and the flow's run is still named."""
    import dualpath.cli.night as cli_night
    import dualpath.flows.nightly as fn
    from dualpath.config import load_config
    from prefect.client.orchestration import get_client
    from tests.cli_run import run_cli

    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    # what the command's prefect_env would set in this process, restored after the test
    for key, value in (("PREFECT_HOME", str(tmp_path / "prefect")),
                       ("PREFECT_SERVER_ANALYTICS_ENABLED", "false"),
                       ("PREFECT_UI_ENABLED", "false"),
                       ("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "240")):
        monkeypatch.setenv(key, value)
    reads = []

    def counted(path):
        reads.append(str(path))
        return load_config(path)
    monkeypatch.setattr(cli_night, "load_config", counted)
    monkeypatch.setattr(fn, "load_config", counted)
    r = run_cli("nightly", "-c", cfg_path, "--date", nights[0].isoformat())
    assert r.returncode == 0, r.stdout + r.stderr
    assert reads == [str(cfg_path)]

    async def names():
        async with get_client() as c:
            return [f.name for f in await c.read_flow_runs()]
    assert f"demo/{nights[0].isoformat()}" in asyncio.run(names())
