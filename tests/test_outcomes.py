"""Honest outcomes below the flow: what a unit and a run become when things go wrong."""

import asyncio
import re

import httpx
import pytest

from dualpath.client import PathClient
from dualpath.config import Sampling, ServingPath, SimProfile
from dualpath.errors import HarnessError
from dualpath.launcher import redact_argv, redact_env
from dualpath.pipeline import UnitInput
from dualpath.records import CallRecord, UnitResult
from dualpath.scheduler import PathRunner, Unit, draw_major
from dualpath.sim.fleet import sim_process
from dualpath.flows import inputs, runner
from tests.helpers import ingest, make_project
from dualpath.warehouse.db import reader
from dualpath.warehouse.queries import RUN_SUMMARY

NIGHT_INPUT = lambda u: UnitInput(u.ticker, u.draw, __import__("datetime").date(2027, 5, 3), ())


async def one_call(unit: UnitInput, llm) -> str:
    return await llm("only", [{"role": "user", "content": f"TICKER: {unit.ticker}"}])


def mock_http(content: str, finish: str = "stop", model: str = "m", fingerprint=None):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={
            "model": model, "system_fingerprint": fingerprint,
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def make_runner(http, sink, engine="llama.cpp", pipeline=one_call):
    path = ServingPath(engine=engine, base_url="http://srv:1", model="m", slots=2, stream=False)
    client = PathClient("p", path, Sampling(), http, "e/2027-05-03/p")
    return PathRunner(client, pipeline, __import__("datetime").date(2027, 5, 3), slots=2,
                      sink=sink, inputs=NIGHT_INPUT)


async def test_a_final_answer_cut_off_at_max_tokens_is_not_a_grade():
    records = []
    async with mock_http("Thinking it over...\nFINAL GRADE: 5", finish="length") as http:
        run = await make_runner(http, records.append).run_units([Unit("AAA", 1)])
    res = [r for r in records if isinstance(r, UnitResult)][0]
    assert res.outcome == "parse_failed" and res.grade is None
    assert "max_tokens" in res.failure_detail
    assert run.complete          # a runaway final answer is a quality outcome, measured


async def test_a_failing_sink_stops_the_run_as_a_harness_error_not_a_unit_failure():
    records = []

    def sink(rec):
        if isinstance(rec, CallRecord) and len(records) >= 3:
            raise OSError("disk full")
        records.append(rec)

    async with mock_http("FINAL GRADE: 3") as http:
        r = make_runner(http, sink)
        with pytest.raises(HarnessError, match="disk full"):
            await r.run_units(draw_major([f"T{i}" for i in range(20)], 1))
    results = [x for x in records if isinstance(x, UnitResult)]
    assert all(x.outcome == "graded" for x in results)      # nobody blamed the pipeline
    assert r.run.units_done < 20 and not r.run.complete


async def test_missing_inputs_fail_the_unit_as_input_failed():
    records = []

    def no_prices(u):
        raise __import__("dualpath.errors", fromlist=["DataError"]).DataError("no price for X")

    async with mock_http("FINAL GRADE: 3") as http:
        r = make_runner(http, records.append)
        r.inputs = no_prices
        run = await r.run_units([Unit("X", 1)])
    res = [x for x in records if isinstance(x, UnitResult)][0]
    assert res.outcome == "input_failed" and res.n_calls == 0 and not run.complete


async def test_vllm_replies_without_a_fingerprint_are_not_contaminated():
    records = []
    async with mock_http("FINAL GRADE: 4", model="m", fingerprint=None) as http:
        r = make_runner(http, records.append, engine="vllm")
        r.client.pin("m", "vllm-0.11.0", "vllm")     # the build /version reported
        run = await r.run_units([Unit("AAA", 1)])
    calls = [x for x in records if isinstance(x, CallRecord)]
    assert calls[0].contaminated is None and run.outcomes == {"graded": 1}
    # llama-server does send its build: a different one there is another server
    records.clear()
    async with mock_http("FINAL GRADE: 4", fingerprint="b2") as http:
        r = make_runner(http, records.append)
        r.client.pin("m", "b1", "llama.cpp")
        run = await r.run_units([Unit("AAA", 1)])
    assert run.outcomes == {"contaminated": 1}
    assert "system_fingerprint 'b2' != 'b1'" in records[1].contaminated


def test_simulated_vllm_speaks_vllm(sim_server):
    srv = sim_server(dialect="vllm", model_alias="qwen", build="vllm-0.11.0")
    with httpx.Client(base_url=srv.url) as http:
        assert http.get("/version").json() == {"version": "0.11.0"}
        assert http.get("/props").status_code == 404 and http.get("/slots").status_code == 404
        assert "vllm:num_requests_running" in http.get("/metrics").text
        body = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 8, "stream": False}
        ok = http.post("/v1/chat/completions", json=body).json()
        # vLLM 0.33 sends vllm-<version>-<hash8> (vllm/entrypoints/serve/utils/fingerprint.py)
        assert re.fullmatch(r"vllm-0\.11\.0-[0-9a-f]{8}", ok["system_fingerprint"])
        assert "timings" not in ok and "metrics" not in ok
        # cached tokens only with --enable-prompt-tokens-details (the profile's setting)
        assert "prompt_tokens_details" not in ok["usage"]
        bad = http.post("/v1/chat/completions", json={**body, "model": "other"})
        # vLLM 0.33's ErrorResponse (see tests/test_contract_vllm.py)
        assert bad.status_code == 404 and bad.json()["error"]["type"] == "NotFoundError"
        assert "does not exist" in bad.json()["error"]["message"]


def _scored(cfg, night, url, path="main"):
    history = inputs.price_history(cfg)
    work = runner.plan_path(cfg, night, path)
    return work, history


def test_a_server_swapped_mid_run_contaminates_the_run_and_keeps_it_out_of_speed(tmp_path,
                                                                                 sim_server):
    """vLLM's replies carry no build: the swap shows only in the re-read /version."""
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1)
    cfg_path.write_text(cfg_path.read_text().replace(
        '[paths.main]\n', '[paths.main]\nidentity_poll_s = 0.05\n'))
    cfg = __import__("dualpath.config", fromlist=["load_config"]).load_config(cfg_path)
    main = cfg.paths["main"].sim
    srv = sim_server(slots=8, **{**main.model_dump(), "time_scale": 2e-3})
    night = nights[0]
    work, history = _scored(cfg, night, srv.url)

    async def go():
        task = asyncio.create_task(runner.run_path(cfg, night, work, history, {},
                                                   override_url=srv.url))
        while len(runner.read_journal(work.journal).units) < 2:
            await asyncio.sleep(0.01)
        # same alias, same port, another build: llama-server would show it in every reply
        srv.sim.profile = SimProfile(**{**main.model_dump(), "build": "vllm-0.12.0",
                                        "time_scale": 2e-3, "dialect": "vllm"})
        return await task
    outcome = asyncio.run(go())
    assert outcome.status in ("partial", "failed")
    ingest(cfg, [work])
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        run = con.execute("SELECT status, status_detail, CASE WHEN speed_measured THEN wall_s END FROM (" + RUN_SUMMARY
                          + ") WHERE path = 'main'").fetchone()
        flagged = con.execute("SELECT count(*) FROM calls WHERE contaminated LIKE "
                              "'%identity changed%'").fetchone()[0]
        problem = con.execute("SELECT identity_problem FROM server_sessions").fetchone()[0]
    assert run[0] != "complete" and "contaminated" in run[1] and run[2] is None
    assert flagged > 0 and "'vllm-0.11.0' -> 'vllm-0.12.0'" in problem


def test_a_killed_server_leaves_a_partial_run_that_a_rerun_completes_exactly(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1, clock=0.3)  # slow enough to kill mid-night
    night = nights[0]
    history = inputs.price_history(cfg)
    import contextlib

    with contextlib.ExitStack() as stack:
        cm = sim_process(cfg, "backup")
        url = stack.enter_context(cm)
        proc_gen = cm.gen.gi_frame.f_locals["proc"]
        work = runner.plan_path(cfg, night, "backup")

        async def go():
            task = asyncio.create_task(runner.run_path(cfg, night, work, history, {},
                                                       override_url=url))
            while len(runner.read_journal(work.journal).units) < 3:
                await asyncio.sleep(0.01)
            proc_gen.kill()                                  # the server dies mid-night
            return await task
        first = asyncio.run(go())
    assert first.status in ("partial", "failed")
    ingest(cfg, [work])
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        st = con.execute("SELECT status FROM runs").fetchone()[0]
        measured_before = con.execute("SELECT count(*) FROM v_units WHERE measured").fetchone()[0]
    assert st == "partial" and 0 < measured_before < 12
    with sim_process(cfg, "backup") as url2:
        again = runner.plan_path(cfg, night, "backup")
        assert len(again.units) == 12 - measured_before       # exactly the missing units
        second = asyncio.run(runner.run_path(cfg, night, again, history, {}, override_url=url2))
    assert second.status == "complete"
    ingest(cfg, [again])
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        st = con.execute("SELECT status FROM runs").fetchone()[0]
        per_unit = con.execute("""SELECT count(*), count(DISTINCT (ticker, draw)) FROM v_units
                                  WHERE measured""").fetchone()
        calls = con.execute("SELECT count(*), count(DISTINCT call_id) FROM calls").fetchone()
    assert st == "complete" and per_unit == (12, 12) and calls[0] == calls[1]


def test_secrets_in_launch_evidence_are_redacted():
    assert redact_env({"HF_TOKEN": "abc", "CUDA_VISIBLE_DEVICES": "0"}) == {
        "HF_TOKEN": "<redacted>", "CUDA_VISIBLE_DEVICES": "0"}
    assert redact_argv(["vllm", "serve", "--api-key", "s3cret", "--port", "8000",
                        "--api-key=x"]) == ["vllm", "serve", "--api-key", "<redacted>",
                                            "--port", "8000", "--api-key=<redacted>"]


def test_migration_relabels_complete_runs_whose_units_failed(tmp_path):
    import duckdb
    from dualpath.warehouse.migrations import MIGRATIONS, migrate

    db = tmp_path / "old.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at "
                "TIMESTAMPTZ DEFAULT now())")
    for name, sql in MIGRATIONS[:3]:          # a warehouse written by the first landing
        con.execute(sql)
        con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [name])
    con.execute("""INSERT INTO runs (run_id, experiment, night, path, config_hash, status,
                   units_planned, units_done) VALUES
                   ('e/1/a', 'e', '2027-01-04', 'a', 'h', 'complete', 2, 2),
                   ('e/1/b', 'e', '2027-01-04', 'b', 'h', 'complete', 2, 2)""")
    con.execute("""INSERT INTO units (run_id, ticker, draw, unit_attempt, grade, failure_kind)
                   VALUES ('e/1/a', 'X', 1, 1, NULL, 'pipeline_error'),
                          ('e/1/a', 'Y', 1, 1, NULL, 'server_error'),
                          ('e/1/b', 'X', 1, 1, 4, NULL), ('e/1/b', 'Y', 1, 1, NULL, 'parse_failure')""")
    assert "m004_outcomes" in migrate(con)
    runs = con.execute("SELECT run_id, status FROM runs ORDER BY 1").fetchall()
    outcomes = con.execute("SELECT run_id, ticker, outcome FROM units ORDER BY 1, 2").fetchall()
    con.close()
    assert runs == [("e/1/a", "failed"), ("e/1/b", "complete")]
    assert outcomes == [("e/1/a", "X", "pipeline_failed"), ("e/1/a", "Y", "call_failed"),
                        ("e/1/b", "X", "graded"), ("e/1/b", "Y", "parse_failed")]
