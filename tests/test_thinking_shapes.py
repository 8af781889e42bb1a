"""Thinking as the real templates and parsers write it (dualpath.thinking), each shape taken
from the engine's source: vLLM 0.33.0 vllm/parser/qwen3.py (`qwen3_config`: REASONING state
with thinking on, CONTENT with it off, where `<think>` stays and `</think>` is dropped) and
Qwen3.5/3.6's chat templates, which open `<think>` in the prompt. Each shape is split by
hand here and written by the simulated servers end to end."""

from __future__ import annotations

import httpx
import pytest

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.records import CallRecord, UnitResult
from dualpath.thinking import split_thinking
from tests.test_thinking import THINKING_LINE, score

ANSWER = "FINAL GRADE: 4 (BUY)"


@pytest.mark.parametrize("text, thinking_on, finish, thinking, answer", [
    # no parser, Qwen3.5/3.6 template (opened in the prompt), thinking on: closed ...
    ("weigh it\n</think>\n\n" + ANSWER, True, "stop", "weigh it", ANSWER),
    # ... and cut at max_tokens: no tag at all, all of it thinking (once kept as the answer)
    ("weigh it and weigh", True, "length", "weigh it and weigh", ""),
    # no parser, Qwen3 template, thinking on: closed, and cut
    ("<think>\nweigh it\n</think>\n\n" + ANSWER, True, "stop", "weigh it", ANSWER),
    ("<think>\nweigh it and", True, "length", "weigh it and", ""),
    # --reasoning-parser qwen3, thinking off, a model that thinks anyway, streamed: <think>
    # kept, </think> dropped (once all filed as thinking: the answer lost)
    ("<think>\nweigh it\n\n\n" + ANSWER, False, "stop", "weigh it", ANSWER),
    # the same, whole reply: extract_reasoning returns the output as generated
    ("<think>\nweigh it\n</think>\n\n" + ANSWER, False, "stop", "weigh it", ANSWER),
    # thinking off, ended normally, no trace of the close: kept whole, never lost
    ("<think>\nweigh it. " + ANSWER, False, "stop", "", "weigh it. " + ANSWER),
    # thinking on, a runaway answer without tags came apart nowhere: still a runaway's text
    (ANSWER, False, "length", "", ANSWER),
    (ANSWER, True, "stop", "", ANSWER),
])
def test_each_inline_shape_is_split(text, thinking_on, finish, thinking, answer):
    assert split_thinking(text, thinking_on=thinking_on, finish_reason=finish) == (
        thinking, answer)


SHAPES = {
    "vllm-no-parser-template-opens": ({"dialect": "vllm", "reasoning_parser": False,
                                       "template_opens_think": True}, "on"),
    "vllm-parser-off-thinks-anyway": ({"dialect": "vllm", "reasoning_parser": True,
                                       "thinks_when_off": True}, "off"),
    "vllm-no-parser-off-thinks-anyway": ({"dialect": "vllm", "reasoning_parser": False,
                                          "thinks_when_off": True}, "off"),
    "llama-template-opens": ({"dialect": "llama.cpp", "template_opens_think": True}, "on"),
}


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_each_simulated_shape_scores_its_answer_with_the_thinking_apart(
        sim_server, shape, stream):
    profile, thinking = SHAPES[shape]
    srv = sim_server(slots=2, thinks=True, runaway_share=0.0, **profile)
    recs = await score(srv.url, Sampling(thinking=thinking), stream, tickers=1)
    calls = [r for r in recs if isinstance(r, CallRecord)]
    units = [r for r in recs if isinstance(r, UnitResult)]
    assert [u.outcome for u in units] == ["graded"]
    for c in calls:
        assert "<think>" not in c.output_text and THINKING_LINE not in c.output_text
        assert THINKING_LINE in c.reasoning_text and c.output_text


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("shape", ["vllm-no-parser-template-opens", "llama-template-opens"])
async def test_a_reply_cut_while_thinking_has_no_answer_in_any_shape(sim_server, shape, stream):
    profile, thinking = SHAPES[shape]
    srv = sim_server(slots=1, thinks=True, runaway_share=1.0, **profile)
    path = ServingPath(engine="sim", base_url=srv.url, model="sim-model", stream=stream)
    async with httpx.AsyncClient() as http:
        client = PathClient("p", path, Sampling(thinking=thinking), http, "t/run")
        rec = await client.chat(ChatRequest(
            agent="a", messages=[{"role": "user", "content": "### Ticker: AAA\nhi"}],
            ticker="AAA", draw=1, unit_attempt=1, call_seq=1, seed=1))
    assert rec.ok and rec.runaway
    assert rec.output_text == "" and THINKING_LINE in rec.reasoning_text


def _upstream(content: str) -> bytes:
    import orjson

    body = orjson.dumps({"id": "c", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop",
         "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}})
    return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body


@pytest.mark.parametrize("kind", ["think_cut", "think_cut_parser"])
async def test_the_fault_proxys_cut_thinking_is_vllms_shape_and_kept_apart(kind):
    """The fault bench's rewrite (dualpath.sim.proxy): without a parser, the thinking is the
    content with no tag; with qwen3's, it is all `reasoning` and the content null; both end
    `length` at the request's max_tokens. The client, thinking on, keeps no answer."""
    import orjson

    from dualpath.sim.proxy import THINKING_MARK, _rewrite
    raw = _rewrite(kind, _upstream(ANSWER), orjson.dumps({"max_tokens": 64}))
    reply = orjson.loads(raw.partition(b"\r\n\r\n")[2])
    choice, usage = reply["choices"][0], reply["usage"]
    assert (choice["finish_reason"], usage["completion_tokens"]) == ("length", 64)
    msg = choice["message"]
    if kind == "think_cut":
        assert "<think>" not in msg["content"] and THINKING_MARK in msg["content"]
    else:
        assert msg["content"] is None and THINKING_MARK in msg["reasoning"]
        assert usage["completion_tokens_details"] == {"reasoning_tokens": 64}

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=raw.partition(b"\r\n\r\n")[2],
                              headers={"content-type": "application/json"})
    path = ServingPath(engine="vllm", base_url="http://sim", model="m", slots=1, stream=False)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as http:
        rec = await PathClient("main", path, Sampling(thinking="on"), http, "t/run").chat(
            ChatRequest(agent="trader", messages=[{"role": "user", "content": "x"}],
                        ticker="AAA", draw=1, unit_attempt=1, call_seq=1))
    assert rec.runaway and rec.output_text == "" and THINKING_MARK in rec.reasoning_text, (
        rec.error_kind, rec.error_detail)
    assert ANSWER in rec.reasoning_text        # the drafted grade stays in the thinking
