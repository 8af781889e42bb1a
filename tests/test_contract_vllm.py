"""Contract: the simulated vLLM against fixtures written from vLLM's own source.

vLLM cannot run here (0.33.0 needs torch 2.14), so each fixture below is what vLLM 0.33.0
(the PyPI wheel) writes, read from the file named beside it; the simulated server must
answer the same requests the same way, and the client must read it.
"""

from __future__ import annotations

import re

import httpx
import orjson
import pytest

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.sampling import sampling_body

# vllm/entrypoints/serve/engine/protocol.py: ErrorInfo(message, type, param, code) inside
# ErrorResponse(error); vllm/entrypoints/openai/models/serving.py, check_model:
NOT_FOUND = {"error": {"message": "The model `other` does not exist.", "type": "NotFoundError",
                       "param": "model", "code": 404}}
# vllm/renderers/params.py, _token_len_check: VLLMValidationError(parameter="input_tokens"),
# whose str() appends "(parameter=..., value=...)" (vllm/exceptions.py); a 400
# BadRequestError (vllm/entrypoints/serve/exception_handling/error_response.py)
OVERFLOW = re.compile(r"This model's maximum context length is (\d+) tokens\. However, your "
                      r"prompt contains (\d+) input tokens, which exceeds this limit even "
                      r"without any output tokens\. Please reduce the length of the input "
                      r"prompt\. \(parameter=input_tokens, value=(\d+)\)")
# vllm/entrypoints/openai/chat_completion/serving.py, chat_completion_stream_generator_raw:
# the first chunk's delta is DeltaMessage(role=role, content=""); thinking streams as
# DeltaMessage.reasoning; usage carries completion_tokens_details.reasoning_tokens only when
# a reasoning parser is set (_include_reasoning_tokens_details); an error mid-stream is
# `data: {"error": ...}` and the stream still ends with `data: [DONE]`.
FIRST_DELTA = {"role": "assistant", "content": ""}
# vllm/entrypoints/serve/utils/sse_keep_alive.py (only with --sse-keep-alive-interval)
KEEP_ALIVE = b": keep-alive\n\n"

MAX_MODEL_LEN = 4096


@pytest.fixture
def vllm(sim_server):
    def make(**kw):
        kw = {"dialect": "vllm", "model_alias": "served", "n_ctx": MAX_MODEL_LEN,
              "context_tokens": 0, "runaway_share": 0.0, "output_mean_tokens": 40, **kw}
        return sim_server(slots=2, **kw).url
    return make


def body(text: str = "TICKER: SYN001 | AS OF: 2027-04-29\nSay hello.", **kw) -> dict:
    return {"model": "served", "messages": [{"role": "user", "content": text}],
            **sampling_body("vllm", Sampling(max_tokens=64), 3), **kw}


def post(url: str, payload: dict) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", json=payload, timeout=30)


def events(text: str) -> list:
    return [orjson.loads(line[6:]) if line != "data: [DONE]" else "[DONE]"
            for line in text.splitlines() if line.startswith("data: ")]


def test_an_unknown_model_gets_vllms_404_body(vllm):
    r = post(vllm(), {**body(), "model": "other"})
    assert r.status_code == 404 and r.json() == NOT_FOUND


def test_context_is_max_model_len_per_request_not_split_over_slots(vllm):
    url = vllm()
    assert httpx.get(f"{url}/v1/models").json()["data"][0]["max_model_len"] == MAX_MODEL_LEN
    # prompt + max_tokens over max_model_len is no error: the output is capped at what is left
    # (vllm/entrypoints/serve/utils/api_utils.py, get_max_tokens)
    fits = "TICKER: SYN001 | AS OF: 2027-04-29\n" + "w" * 4 * 4000     # ~4000 tokens
    r = post(url, {**body(fits), "max_tokens": 2000})
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] <= MAX_MODEL_LEN - r.json()["usage"]["prompt_tokens"]
    r = post(url, body("TICKER: SYN001 | AS OF: 2027-04-29\n" + "w" * 4 * 5000))
    err = r.json()["error"]
    assert r.status_code == 400 and (err["type"], err["param"], err["code"]) == (
        "BadRequestError", "input_tokens", 400)
    m = OVERFLOW.fullmatch(err["message"])
    assert m and int(m[1]) == MAX_MODEL_LEN and m[2] == m[3]


async def test_the_client_names_vllms_overflow_a_context_overflow(vllm):
    path = ServingPath(engine="sim", base_url=vllm(), model="served", slots=1, stream=True,
                       sim={"dialect": "vllm"})
    async with httpx.AsyncClient() as http:
        rec = await PathClient("main", path, Sampling(), http, "t/r").chat(ChatRequest(
            "a", [{"role": "user", "content": "w" * 4 * 5000}], "T", 1, 1, 1))
    assert rec.error_kind == "context_overflow" and rec.attempts == 1


@pytest.mark.parametrize("parser", [True, False])
def test_thinking_streams_as_vllm_writes_it(vllm, parser):
    url = vllm(thinks=True, reasoning_parser=parser)
    ev = events(post(url, body(stream=True, stream_options={"include_usage": True},
                               chat_template_kwargs={"enable_thinking": True})).text)
    assert ev[0]["choices"][0]["delta"] == FIRST_DELTA and ev[-1] == "[DONE]"
    deltas = [e["choices"][0]["delta"] for e in ev[1:-1] if e["choices"]]
    usage = ev[-2]["usage"]
    if parser:
        assert any("reasoning" in d for d in deltas)
        assert usage["completion_tokens_details"]["reasoning_tokens"] > 0
    else:
        text = "".join(d.get("content") or "" for d in deltas)
        assert text.startswith("<think>\n") and "</think>" in text
        assert not any("reasoning" in d for d in deltas)
        assert "completion_tokens_details" not in usage


# vllm/parser/qwen3.py, qwen3_config: thinking on starts in REASONING (THINK_START dropped,
# THINK_END moves to CONTENT), thinking off starts in CONTENT, where THINK_END is dropped
# silently and THINK_START has no transition (kept as text); Qwen3Parser.extract_reasoning
# returns (None, model_output) with thinking off. Qwen3.5/3.6 templates open <think> in the
# prompt (add_generation_prompt with enable_thinking), so without a parser the generated
# text starts inside the block.
@pytest.mark.parametrize("stream", [True, False])
def test_qwen3_parser_with_thinking_off_keeps_the_open_tag_as_vllm_does(vllm, stream):
    url = vllm(thinks=True, reasoning_parser=True, thinks_when_off=True)
    kw = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
    r = post(url, body(chat_template_kwargs={"enable_thinking": False}, **kw))
    if stream:
        ev = events(r.text)
        deltas = [e["choices"][0]["delta"] for e in ev[1:-1] if e["choices"]]
        text = "".join(d.get("content") or "" for d in deltas)
        assert not any("reasoning" in d for d in deltas)
        assert text.startswith("<think>\n") and "</think>" not in text and "\n\n\n" in text
        assert "completion_tokens_details" not in ev[-2]["usage"]
    else:
        msg = r.json()["choices"][0]["message"]
        assert msg["content"].startswith("<think>\n") and "\n</think>\n\n" in msg["content"]
        assert "reasoning" not in msg


@pytest.mark.parametrize("cut", [False, True])
def test_a_template_that_opens_thinking_in_the_prompt_generates_no_open_tag(vllm, cut):
    url = vllm(thinks=True, reasoning_parser=False, template_opens_think=True,
               runaway_share=1.0 if cut else 0.0)
    r = post(url, body(chat_template_kwargs={"enable_thinking": True}))
    choice = r.json()["choices"][0]
    text = choice["message"]["content"]
    assert "<think>" not in text
    assert ("</think>" not in text) if cut else ("\n</think>\n\n" in text)
    assert choice["finish_reason"] == ("length" if cut else "stop")


def test_a_mid_stream_error_is_an_error_event_then_done(vllm):
    ev = events(post(vllm(stream_error_share=1.0), body(stream=True)).text)
    assert ev[-1] == "[DONE]"
    err = ev[-2]["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == 500


def test_keep_alive_comments_only_when_asked(vllm):
    slow = {"prefill_tps": 1.0, "time_scale": 1e-3}       # ~20 modelled s of prefill
    quiet = post(vllm(**slow), body(stream=True)).content
    pinged = post(vllm(sse_ping_s=5.0, **slow), body(stream=True)).content
    assert KEEP_ALIVE not in quiet and KEEP_ALIVE in pinged


# vllm/entrypoints/serve/engine/protocol.py: ModelCard; serve/instrumentator/basic.py:
# /version answers {"version": VLLM_VERSION} alone
MODEL_CARD_KEYS = {"id", "object", "created", "owned_by", "root", "parent", "max_model_len",
                   "permission"}


def test_models_and_version_are_vllms_own(vllm):
    """What tells vLLM from the other engines (`dualpath.engines.proof`)."""
    url = vllm()
    card, = httpx.get(f"{url}/v1/models").json()["data"]
    assert set(card) == MODEL_CARD_KEYS and card["owned_by"] == "vllm"
    assert set(httpx.get(f"{url}/version").json()) == {"version"}
    assert httpx.get(f"{url}/props").status_code == 404
