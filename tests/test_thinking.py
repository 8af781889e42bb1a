"""Thinking as an experiment setting: sent alike to both engines, stored apart from the answer,
never quoted into later prompts, never read for a grade, and timed from its first token.

The simulated pair thinks as each engine returns thinking: llama-server in
`reasoning_content`, vLLM with a reasoning parser in `reasoning` (counted in
`completion_tokens_details.reasoning_tokens`), vLLM without one inline as <think>…</think>.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import orjson
import pytest

from dualpath.client import ChatRequest, PathClient, split_thinking
from dualpath.config import Sampling, ServingPath
from dualpath.grades import parse_grade
from dualpath.pipeline import builtin
from dualpath.records import CallRecord, UnitResult
from dualpath.scheduler import PathRunner, draw_major
from tests.test_scheduler import MARKET, NIGHT, inputs

THINKING_LINE = "weigh the evidence before answering"     # the simulated model's thinking

PAIR = {"llama": {"dialect": "llama.cpp"},
        "vllm-parser": {"dialect": "vllm", "reasoning_parser": True},
        "vllm-inline": {"dialect": "vllm", "reasoning_parser": False}}


async def score(url: str, sampling: Sampling, stream: bool, tickers: int = 3) -> list:
    records: list = []
    path = ServingPath(engine="sim", base_url=url, model="sim-model", slots=2, stream=stream)
    async with httpx.AsyncClient() as http:
        client = PathClient("p", path, sampling, http, "t/run")
        runner = PathRunner(client, builtin, NIGHT, slots=2, sink=records.append,
                            inputs=inputs, base_seed=1)
        run = await runner.run_units(draw_major(MARKET.tickers[:tickers], 1))
    assert run.complete
    return records


def calls_by_key(records) -> dict:
    return {(r.ticker, r.draw, r.agent): r for r in records if isinstance(r, CallRecord)}


@pytest.mark.parametrize("stream", [True, False])
async def test_the_pair_stores_the_same_answers_and_the_thinking_apart(sim_server, stream):
    thinking_on = Sampling(thinking="on")
    got = {}
    for name, kw in PAIR.items():
        srv = sim_server(slots=2, thinks=True, **kw)
        got[name] = await score(srv.url, thinking_on, stream)
    calls = {name: calls_by_key(recs) for name, recs in got.items()}
    keys = set(calls["llama"])
    assert len(keys) == 3 * 17 and all(set(c) == keys for c in calls.values())
    for key in keys:
        llama, parsed, inline = (calls[n][key] for n in PAIR)
        # the same answer on every path, with no thinking in it ...
        assert llama.output_text == parsed.output_text == inline.output_text
        assert "<think>" not in llama.output_text and THINKING_LINE not in llama.output_text
        # ... and the same thinking, stored apart, whichever way the engine returned it
        assert THINKING_LINE in llama.reasoning_text
        assert llama.reasoning_text == parsed.reasoning_text == inline.reasoning_text
        # counted by vLLM's parser; estimated from characters where the engine gives no count
        assert parsed.reasoning_tokens_basis == "server" and parsed.reasoning_tokens > 0
        assert {llama.reasoning_tokens_basis, inline.reasoning_tokens_basis} == {"chars"}
        # never quoted into a later prompt
        assert THINKING_LINE not in llama.prompt_text and "<think>" not in inline.prompt_text
        # the body asked for thinking the same way on both engines
        assert orjson.loads(llama.request_json)["chat_template_kwargs"] == {"enable_thinking": True}
        assert orjson.loads(inline.request_json)["chat_template_kwargs"] == {"enable_thinking": True}
    for name, recs in got.items():
        units = [r for r in recs if isinstance(r, UnitResult)]
        assert len(units) == 3
        for u in units:
            pm = calls[name][(u.ticker, u.draw, "portfolio_manager")]
            # the thinking drafted another grade; the grade is the answer's alone
            draft = parse_grade(pm.reasoning_text).grade
            assert u.outcome == "graded" and u.grade == parse_grade(pm.output_text).grade
            assert draft is not None and draft != u.grade
            assert u.final_text == pm.output_text


async def test_thinking_off_asks_both_engines_not_to_think(sim_server):
    for kw in PAIR.values():
        srv = sim_server(slots=2, thinks=True, **kw)
        recs = await score(srv.url, Sampling(thinking="off"), stream=True, tickers=1)
        for r in calls_by_key(recs).values():
            assert orjson.loads(r.request_json)["chat_template_kwargs"] == {
                "enable_thinking": False}
            assert r.reasoning_text == "" and r.reasoning_tokens in (None, 0)


@pytest.mark.parametrize("text, thinking, answer", [
    ("<think>\nweigh it\n</think>\n\nFINAL GRADE: 4 (BUY)", "weigh it", "FINAL GRADE: 4 (BUY)"),
    # the chat template opened the block in the prompt: only its end is generated
    ("weigh it\n</think>\n\nFINAL GRADE: 4 (BUY)", "weigh it", "FINAL GRADE: 4 (BUY)"),
    # cut off at max_tokens while thinking: no answer at all
    ("<think>\nweigh it and weigh", "weigh it and weigh", ""),
    ("FINAL GRADE: 4 (BUY)", "", "FINAL GRADE: 4 (BUY)"),
    ("I think <think> is a tag", "", "I think <think> is a tag"),
])
def test_inline_thinking_is_split_from_the_answer(text, thinking, answer):
    assert split_thinking(text) == (thinking, answer)


def _events(*deltas: dict, usage: dict | None = None) -> list[bytes]:
    base = {"id": "c", "object": "chat.completion.chunk", "model": "m", "created": 0}
    out = [b"data: " + orjson.dumps({**base, "choices": [
        {"index": 0, "finish_reason": None, "delta": d}]}) + b"\n\n" for d in deltas]
    out.append(b"data: " + orjson.dumps({**base, "choices": [
        {"index": 0, "finish_reason": "stop", "delta": {}}]}) + b"\n\n")
    out.append(b"data: " + orjson.dumps({**base, "choices": [], "usage": usage or {
        "prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}}) + b"\n\n")
    return out + [b"data: [DONE]\n\n"]


@pytest.mark.parametrize("field, dialect", [("reasoning", "vllm"),
                                            ("reasoning_content", "llama.cpp")])
async def test_first_token_time_is_the_first_thinking_token_in_both_dialects(field, dialect):
    """The first token is thinking; the answer comes later: the first-token time is taken
    when the thinking arrived, not when the answer did."""
    sent: dict[str, float] = {}
    lines = _events({"role": "assistant", "content": ""}, {field: "weigh it"},
                    {"content": "FINAL GRADE: 4 (BUY)"})

    async def body():
        for i, line in enumerate(lines):
            if i == 2:
                await asyncio.sleep(0.05)       # the answer arrives well after the thinking
                sent["answer"] = time.monotonic()
            if i == 1:
                sent["thinking"] = time.monotonic()
            yield line

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=body())

    path = ServingPath(engine="sim", base_url="http://t", model="m", slots=1,
                       sim={"dialect": dialect})
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        rec = await PathClient("p", path, Sampling(thinking="on"), http, "t/r").chat(
            ChatRequest("a", [{"role": "user", "content": "x"}], "T", 1, 1, 1))
    assert rec.ok and rec.output_text == "FINAL GRADE: 4 (BUY)"
    assert rec.reasoning_text == "weigh it"
    assert sent["thinking"] <= rec.first_token_mono < sent["answer"]


def test_thinking_share_per_path_counts_what_the_engine_reports():
    import pandas as pd

    from dualpath.evals.thinking import thinking_share

    calls = pd.DataFrame({
        "path": ["main", "main", "backup", "backup", "backup"],
        "completion_tokens": pd.array([100, 300, 200, 200, None], dtype="Int64"),
        "reasoning_tokens": pd.array([40, 0, 50, None, None], dtype="Int64"),
        "reasoning_tokens_basis": ["server", "server", "chars", None, None]})
    t = thinking_share(calls).set_index("path")
    # main: 40 of 400 generated tokens; backup: 50 of 400 (the call without usage left out)
    assert t.loc["main", "thinking_share"] == 0.1 and t.loc["main", "basis"] == "server"
    assert t.loc["backup", "thinking_share"] == 0.125 and t.loc["backup", "basis"] == "chars"
    assert (t.loc["backup", "calls"], t.loc["backup", "thinking_calls"]) == (3, 1)


def test_the_report_shows_each_paths_thinking_share(tmp_path):
    """A night on the simulated pair with a thinking model, through the warehouse to the
    weekly report: the thinking is stored apart (texts, by reasoning_hash) and the report's
    hygiene section shows its share per path."""
    from dualpath.config import load_config
    from dualpath.flows.weekly import write_report
    from tests.helpers import SimFleet, ingest, make_project, score_night_plain
    from dualpath.warehouse.db import reader

    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    text = cfg_path.read_text().replace("[sampling]\n", '[sampling]\nthinking = "on"\n')
    for path in ("main", "backup"):
        text = text.replace(f"[paths.{path}.sim]\n", f"[paths.{path}.sim]\nthinks = true\n")
    cfg_path.write_text(text)
    cfg = load_config(cfg_path)
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        rows = con.execute("""SELECT c.path, count(*), count(t.text), min(c.reasoning_tokens),
                                     any_value(c.reasoning_tokens_basis),
                                     bool_or(strpos(o.text, ?) > 0)
                              FROM calls c LEFT JOIN texts t ON t.hash = c.reasoning_hash
                              JOIN texts o ON o.hash = c.output_hash
                              GROUP BY 1 ORDER BY 1""", [THINKING_LINE]).fetchall()
        grades = con.execute("SELECT count(grade) FROM units").fetchone()[0]
    assert rows == [("backup", 34, 34, rows[0][3], "chars", False),
                    ("main", 34, 34, rows[1][3], "server", False)]
    assert rows[0][3] > 0 and rows[1][3] > 0 and grades == 4
    _, md, _ = write_report(cfg, tmp_path / "out")
    report = md.read_text()
    section = report[report.index("### Sampling and thinking"):]
    assert "declared difference: presence_penalty 1.5" in section
    backup = next(line for line in section.splitlines() if line.startswith("| backup |"))
    main = next(line for line in section.splitlines() if line.startswith("| main |"))
    assert backup.endswith("| chars |") and main.endswith("| server |")
