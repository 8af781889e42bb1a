"""Record building from real-shaped responses, dialects and retries (httpx.MockTransport)."""

import email.utils
import time

import httpx
import orjson
import pytest

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath

# Shaped like llama-server b9251's non-streaming reply (fields as it returns them).
LLAMA_REPLY = {
    "choices": [{"finish_reason": "stop", "index": 0,
                 "message": {"role": "assistant", "content": "Trend up.\nFINAL GRADE: 4 (BUY)"}}],
    "created": 1764000000, "model": "qwen3.6-35b-a3b", "system_fingerprint": "b9251-e2b129e1b",
    "object": "chat.completion", "id": "chatcmpl-abc",
    "usage": {"completion_tokens": 1436, "prompt_tokens": 6329, "total_tokens": 7765,
              "prompt_tokens_details": {"cached_tokens": 512}},
    "timings": {"cache_n": 512, "prompt_n": 5817, "prompt_ms": 2017.3,
                "prompt_per_token_ms": 0.3468, "prompt_per_second": 2883.6,
                "predicted_n": 1436, "predicted_ms": 33400.2, "predicted_per_token_ms": 23.26,
                "predicted_per_second": 42.99, "draft_n": 700, "draft_n_accepted": 351},
}
# Shaped like vLLM's reply with per-request metrics; a runaway (finish_reason length).
VLLM_REPLY = {
    "id": "chatcmpl-xyz", "object": "chat.completion", "created": 1764000001,
    "model": "qwen3.6-27b", "system_fingerprint": None,
    "choices": [{"index": 0, "finish_reason": "length", "stop_reason": None, "logprobs": None,
                 "message": {"role": "assistant", "content": "and so on and so on",
                             "reasoning_content": None}}],
    "usage": {"prompt_tokens": 8000, "completion_tokens": 4096, "total_tokens": 12096,
              "prompt_tokens_details": {"cached_tokens": 4096}},
    "metrics": {"time_to_first_token_ms": 812.5, "generation_time_ms": 30100.0,
                "queue_time_ms": 3.2},
}


def llama_stream_events() -> list[bytes]:
    base = {"id": "chatcmpl-s", "created": 1, "model": "qwen3.6-35b-a3b",
            "system_fingerprint": "b9251-e2b129e1b", "object": "chat.completion.chunk"}
    ev = [
        {**base, "choices": [{"index": 0, "finish_reason": None,
                              "delta": {"role": "assistant", "content": None}}]},
        {**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"content": "FINAL "}}]},
        {**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"content": "GRADE: 2"}}]},
        {**base, "choices": [{"index": 0, "finish_reason": "stop", "delta": {}}],
         "timings": LLAMA_REPLY["timings"]},
        {**base, "choices": [], "usage": LLAMA_REPLY["usage"]},
    ]
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in ev] + [b"data: [DONE]\n\n"]


def make_client(handler, engine="llama.cpp", stream=False, **path_kw) -> PathClient:
    path = ServingPath(engine=engine, base_url="http://srv:8080", model="qwen3.6-35b-a3b",
                       stream=stream, **{"backoff_s": 0.0, **path_kw})
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    slept: list[float] = []

    async def no_sleep(s: float) -> None:
        slept.append(s)

    client = PathClient("backup", path, Sampling(), http, "exp/2027-01-04/backup", sleep=no_sleep)
    client.slept = slept
    return client


def req(**kw) -> ChatRequest:
    return ChatRequest(agent="portfolio_manager", messages=[{"role": "user", "content": "hi"}],
                       ticker="AAA", draw=1, unit_attempt=1, call_seq=16, seed=42, **kw)


async def test_llama_cpp_record_carries_every_timing_field():
    sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(orjson.loads(request.content))
        return httpx.Response(200, json=LLAMA_REPLY)

    rec = await make_client(handler).chat(req())
    assert rec.ok and rec.attempts == 1 and rec.http_status == 200
    assert rec.output_text.endswith("FINAL GRADE: 4 (BUY)")
    assert (rec.prompt_tokens, rec.completion_tokens, rec.cached_tokens) == (6329, 1436, 512)
    assert (rec.prompt_n, rec.prompt_ms, rec.predicted_n, rec.predicted_ms) == (5817, 2017.3, 1436, 33400.2)
    assert (rec.prompt_per_second, rec.predicted_per_second, rec.cache_n) == (2883.6, 42.99, 512)
    assert (rec.draft_n, rec.draft_n_accepted) == (700, 351)
    assert orjson.loads(rec.timings_json)["predicted_per_token_ms"] == 23.26
    assert rec.system_fingerprint == "b9251-e2b129e1b" and rec.response_model == "qwen3.6-35b-a3b"
    assert rec.finish_reason == "stop" and not rec.runaway
    assert rec.end_mono >= rec.start_mono and rec.end_wall >= rec.start_wall
    assert rec.first_token_mono is None          # not streamed: no client-side first token
    body = sent[0]
    # every sampling parameter explicit, llama.cpp dialect: min_p 0 and a whole-output penalty
    assert (body["temperature"], body["top_p"], body["top_k"], body["min_p"]) == (0.7, 0.8, 20, 0.0)
    assert (body["presence_penalty"], body["repeat_last_n"], body["max_tokens"]) == (1.5, 4096, 4096)
    assert body["seed"] == 42 and body["messages"] == [{"role": "user", "content": "hi"}]
    assert orjson.loads(rec.request_json) == {k: v for k, v in body.items() if k != "messages"}


async def test_vllm_record_runaway_and_metrics():
    sent = []

    def handler(request):
        sent.append(orjson.loads(request.content))
        return httpx.Response(200, json=VLLM_REPLY)

    rec = await make_client(handler, engine="vllm").chat(req())
    assert rec.runaway and rec.finish_reason == "length"
    assert (rec.prompt_tokens, rec.completion_tokens, rec.cached_tokens) == (8000, 4096, 4096)
    assert orjson.loads(rec.server_metrics_json)["time_to_first_token_ms"] == 812.5
    assert rec.prompt_n is None and rec.timings_json is None
    assert sent[0]["top_k"] == 20 and sent[0]["repetition_penalty"] == 1.0
    assert "repeat_last_n" not in sent[0] and "cache_prompt" not in sent[0]


async def test_openai_dialect_sends_only_standard_fields():
    sent = []

    def handler(request):
        sent.append(orjson.loads(request.content))
        return httpx.Response(200, json=VLLM_REPLY)

    await make_client(handler, engine="openai").chat(req())
    assert "top_k" not in sent[0] and "min_p" not in sent[0]
    assert sent[0]["temperature"] == 0.7


async def test_streaming_record_has_first_token_before_end():
    def handler(request):
        assert orjson.loads(request.content)["stream_options"] == {"include_usage": True}
        return httpx.Response(200, content=b"".join(llama_stream_events()),
                              headers={"content-type": "text/event-stream"})

    rec = await make_client(handler, stream=True).chat(req())
    assert rec.ok and rec.output_text == "FINAL GRADE: 2"
    assert rec.start_mono <= rec.first_token_mono <= rec.end_mono
    assert rec.predicted_n == 1436 and rec.completion_tokens == 1436 and rec.cached_tokens == 512


async def test_transient_errors_are_retried_and_counted():
    replies = [httpx.Response(503, json={"error": {"code": 503, "type": "unavailable_error",
                                                   "message": "Loading model"}}),
               httpx.Response(429, headers={"retry-after": "2"}, json={}),
               httpx.Response(200, json=LLAMA_REPLY)]

    def handler(request):
        return replies.pop(0)

    client = make_client(handler)
    rec = await client.chat(req())
    assert rec.ok and rec.attempts == 3
    assert client.slept[1] == 2.0            # Retry-After is honoured


async def test_connect_errors_retried_then_recorded():
    calls = []

    def handler(request):
        calls.append(1)
        raise httpx.ConnectError("refused", request=request)

    client = make_client(handler, max_attempts=3)
    rec = await client.chat(req())
    assert not rec.ok and rec.error_kind == "connect_error" and rec.attempts == 3
    assert len(calls) == 3 and len(client.slept) == 2


async def test_context_overflow_is_not_retried():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(400, json={"error": {
            "code": 400, "type": "exceed_context_size_error",
            "message": "request (30000 tokens) exceeds the available context size (27500 tokens)"}})

    rec = await make_client(handler).chat(req())
    assert rec.error_kind == "context_overflow" and "exceed_context_size_error" in rec.error_detail
    assert rec.attempts == 1 and len(calls) == 1 and rec.http_status == 400


async def test_unreadable_reply_is_a_recorded_failure():
    rec = await make_client(lambda r: httpx.Response(200, content=b"<html>proxy</html>")).chat(req())
    assert rec.error_kind == "bad_response" and "proxy" in rec.error_detail


async def test_response_from_another_server_is_marked_contaminated():
    client = make_client(lambda r: httpx.Response(200, json=LLAMA_REPLY))
    client.expected_fingerprint = "b9999-other"
    rec = await client.chat(req())
    assert rec.ok and "b9251-e2b129e1b" in rec.contaminated


async def test_json_schema_in_each_dialect():
    sent = []

    def handler(request):
        sent.append(orjson.loads(request.content))
        return httpx.Response(200, json=LLAMA_REPLY)

    schema = {"type": "object"}
    await make_client(handler).chat(req(json_schema=schema))
    await make_client(handler, engine="vllm").chat(req(json_schema=schema))
    assert sent[0]["json_schema"] == schema
    assert sent[1]["response_format"]["json_schema"]["schema"] == schema


# --- retry policy by fault class -------------------------------------------------------

def _llama_ok(request):
    return httpx.Response(200, json=LLAMA_REPLY)


def _sse(events: list[bytes]):
    return httpx.Response(200, content=b"".join(events),
                          headers={"content-type": "text/event-stream"})


def _raise(exc_type):
    def fail(request):
        raise exc_type("boom", request=request)
    return fail


TRANSIENT = {
    "connection reset": (_raise(httpx.ReadError), "connection_reset"),
    "closed mid-reply": (_raise(httpx.RemoteProtocolError), "connection_reset"),
    "read timeout": (_raise(httpx.ReadTimeout), "timeout"),
    "connect refused": (_raise(httpx.ConnectError), "connect_error"),
    "http 500": (lambda r: httpx.Response(500, json={"error": {"type": "server_error",
                                                              "message": "slot crashed"}}),
                 "http_500"),
    "http 408": (lambda r: httpx.Response(408, text="timeout"), "http_408"),
    "http 502": (lambda r: httpx.Response(502, text="<html>bad gateway</html>"), "http_502"),
    "cut json": (lambda r: httpx.Response(200, content=orjson.dumps(LLAMA_REPLY)[:120]),
                 "cut_body"),
}


@pytest.mark.parametrize("fault", sorted(TRANSIENT))
async def test_each_transient_fault_is_retried_then_succeeds(fault):
    first, kind = TRANSIENT[fault]
    handlers = [first, first, _llama_ok]
    client = make_client(lambda r: handlers.pop(0)(r))
    rec = await client.chat(req())
    assert rec.ok and rec.attempts == 3 and rec.output_text.endswith("FINAL GRADE: 4 (BUY)")
    assert rec.http_status == 200 and rec.prompt_n == 5817      # the good attempt's fields
    log = orjson.loads(rec.attempt_errors) if hasattr(rec, "attempt_errors") else None
    if log is not None:
        assert [e["kind"] for e in log] == [kind, kind]


@pytest.mark.parametrize("fault", sorted(TRANSIENT))
async def test_a_transient_fault_that_persists_fails_named_after_max_attempts(fault):
    first, kind = TRANSIENT[fault]
    client = make_client(first, max_attempts=3)
    rec = await client.chat(req())
    assert not rec.ok and rec.error_kind == kind and rec.attempts == 3
    assert "gave up after 3 attempts" in rec.error_detail and len(client.slept) == 2


def _cut_streams():
    full = llama_stream_events()
    return {
        "no [DONE]": full[:-1],                 # finish_reason and usage seen, then closed
        "no usage, no [DONE]": full[:-2],       # the case that used to be accepted as OK
        "only content": full[:3],
        "mid-event": full[:2] + [full[2][:30] + b"\n\n"],
    }


@pytest.mark.parametrize("cut", sorted(_cut_streams()))
async def test_a_cut_stream_is_retried_never_accepted(cut):
    replies = [_sse(_cut_streams()[cut]), _sse(llama_stream_events())]
    client = make_client(lambda r: replies.pop(0), stream=True)
    rec = await client.chat(req())
    assert rec.ok and rec.attempts == 2 and rec.output_text == "FINAL GRADE: 2"
    assert rec.completion_tokens == 1436
    client = make_client(lambda r: _sse(_cut_streams()[cut]), stream=True, max_attempts=2)
    rec = await client.chat(req())
    assert not rec.ok and rec.error_kind == "cut_stream" and rec.output_text == ""


@pytest.mark.parametrize("status,kind", [(400, "http_400"), (401, "http_401"),
                                         (403, "http_403"), (404, "http_404"),
                                         (422, "http_422")])
async def test_permanent_client_errors_are_named_and_not_retried(status, kind):
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(status, json={"error": {"type": "invalid_request_error",
                                                      "message": "no"}})

    rec = await make_client(handler).chat(req())
    assert rec.error_kind == kind and rec.attempts == 1 and len(calls) == 1
    assert "invalid_request_error: no" == rec.error_detail


async def test_vllm_context_overflow_is_named_too():
    msg = ("This model's maximum context length is 32768 tokens. However, you requested "
           "40000 tokens.")
    rec = await make_client(lambda r: httpx.Response(400, json={
        "object": "error", "message": msg, "type": "BadRequestError", "code": 400}),
        engine="vllm").chat(req())
    assert rec.error_kind == "context_overflow" and rec.attempts == 1 and "32768" in rec.error_detail


async def test_a_200_that_is_not_json_at_all_is_permanent():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(200, content=b"<html>captive portal</html>")

    rec = await make_client(handler).chat(req())
    assert rec.error_kind == "bad_response" and len(calls) == 1


async def test_retry_after_seconds_and_http_date_are_honoured_up_to_the_cap():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    replies = [httpx.Response(503, headers={"retry-after": "7"}, json={}),
               httpx.Response(429, headers={"retry-after": when}, json={}),
               httpx.Response(503, headers={"retry-after": "86400"}, json={}),
               httpx.Response(200, json=LLAMA_REPLY)]
    client = make_client(lambda r: replies.pop(0), retry_after_max_s=60)
    rec = await client.chat(req())
    assert rec.ok and rec.attempts == 4
    assert client.slept[0] >= 7 and 25 <= client.slept[1] <= 31 and client.slept[2] == 60


async def test_backoff_grows_with_jitter_and_is_capped():
    client = make_client(_raise(httpx.ConnectError), max_attempts=8, backoff_s=1.0,
                         backoff_max_s=10.0, server_down_wait_s=0)
    await client.chat(req())
    assert len(client.slept) == 7
    for n, s in enumerate(client.slept, 1):
        assert 0.5 * min(2 ** (n - 1), 10) <= s <= min(2 ** (n - 1), 10)


async def test_retry_budget_stops_retrying_and_says_so():
    """A wait that would end past the call's retry budget is not slept: the call ends, named."""
    client = make_client(lambda r: httpx.Response(503, headers={"retry-after": "500"}, json={}),
                         max_attempts=10, retry_budget_s=120, retry_after_max_s=500)
    rec = await client.chat(req())
    assert rec.attempts == 1 and rec.error_kind == "http_503"
    assert "retry budget of 120s spent" in rec.error_detail and client.slept == []


# -- the nights' transport (aiohttp) against a raw loopback server ---------------------------

async def _raw_server(reply: bytes, *, close_after: bool = False):
    """A loopback HTTP server that answers every request with `reply`'s bytes."""
    import asyncio

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                n = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                          if h.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(n)
                writer.write(reply)
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _chunked(body: bytes) -> bytes:
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))


async def test_aiohttp_reads_a_stream_with_an_event_longer_than_its_line_buffer():
    from dualpath.transport import AiohttpTransport

    long_text = "x" * 300_000          # one SSE event far over aiohttp's 64 KiB line limit
    events = llama_stream_events()
    big = {"id": "c", "model": "qwen3.6-35b-a3b", "system_fingerprint": "b9251-e2b129e1b",
           "choices": [{"index": 0, "finish_reason": None, "delta": {"content": long_text}}]}
    body = b"".join(events[:2] + [b"data: " + orjson.dumps(big) + b"\n\n"] + events[2:])
    server, url = await _raw_server(_chunked(body))
    async with server, AiohttpTransport(2) as aio:
        path = ServingPath(engine="llama.cpp", base_url=url, model="qwen3.6-35b-a3b",
                           stream=True)
        client = PathClient("backup", path, Sampling(), aio, "exp/2027-01-04/backup")
        recs = [await client.chat(req()) for _ in range(3)]
    for rec in recs:
        assert rec.ok, rec.error_detail
        assert rec.output_text == "FINAL " + long_text + "GRADE: 2"
        assert rec.completion_tokens == 1436 and rec.prompt_n == 5817


async def test_aiohttp_faults_are_sorted_like_httpx_ones():
    from dualpath.transport import AiohttpTransport

    # a stream cut mid-body (the server closes after half of it): retried, then given up
    body = b"".join(llama_stream_events())
    cut = _chunked(body)[: len(_chunked(body)) // 2]
    server, url = await _raw_server(cut, close_after=True)
    async with server, AiohttpTransport(2) as aio:
        path = ServingPath(engine="llama.cpp", base_url=url, model="m", stream=True,
                           max_attempts=2, backoff_s=0.0)
        rec = await PathClient("backup", path, Sampling(), aio, "e/2027-01-04/b").chat(req())
    assert not rec.ok and rec.error_kind == "connection_reset" and rec.attempts == 2
    # nobody listening: a connect error, transient
    port = url.rsplit(":", 1)[1]
    async with AiohttpTransport(2) as aio:
        path = ServingPath(engine="llama.cpp", base_url=f"http://127.0.0.1:{port}", model="m",
                           stream=False, max_attempts=1)
        rec = await PathClient("backup", path, Sampling(), aio, "e/2027-01-04/b").chat(req())
    assert rec.error_kind == "connect_error" and "transient" in rec.error_detail


async def test_aiohttp_waiting_for_a_pooled_connection_is_not_a_connect_timeout():
    import asyncio

    from dualpath.transport import AiohttpTransport

    reply = orjson.dumps(LLAMA_REPLY)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"

    async def handle(reader, writer):
        try:
            while True:
                h = await reader.readuntil(b"\r\n\r\n")
                n = next(int(x.split(b":")[1]) for x in h.split(b"\r\n")
                         if x.lower().startswith(b"content-length:"))
                await reader.readexactly(n)
                await asyncio.sleep(0.3)            # a call far longer than connect_timeout_s
                writer.write(head % len(reply) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with server, AiohttpTransport(1) as aio:      # one connection for three calls
        path = ServingPath(engine="llama.cpp", base_url=url, model="qwen3.6-35b-a3b",
                           stream=False, connect_timeout_s=0.05, max_attempts=1)
        client = PathClient("backup", path, Sampling(), aio, "exp/2027-01-04/backup")
        recs = await asyncio.gather(*(client.chat(req()) for _ in range(3)))
    assert all(r.ok for r in recs), [r.error_detail for r in recs]


async def test_aiohttp_records_a_redirect_and_bounds_a_server_that_stops_reading():
    import asyncio

    from dualpath.transport import AiohttpTransport

    # a redirect is the server's reply, recorded: following it would re-send the call as a
    # GET without its body and record whatever answered that
    server, url = await _raw_server(b"HTTP/1.1 302 Found\r\nlocation: /elsewhere\r\n"
                                    b"content-length: 0\r\n\r\n")
    async with server, AiohttpTransport(2) as aio:
        path = ServingPath(engine="llama.cpp", base_url=url, model="m", stream=False)
        rec = await PathClient("backup", path, Sampling(), aio, "e/2027-01-04/b").chat(req())
    assert (rec.ok, rec.http_status, rec.error_kind) == (False, 302, "http_302")

    # a server that accepts the connection and never reads the request
    held = []

    async def deaf(reader, writer):
        held.append(writer)
        await asyncio.sleep(30)
    deaf_server = await asyncio.start_server(deaf, "127.0.0.1", 0)
    deaf_url = f"http://127.0.0.1:{deaf_server.sockets[0].getsockname()[1]}"
    big = [{"role": "user", "content": "x" * 16_000_000}]
    async with deaf_server, AiohttpTransport(2) as aio:
        path = ServingPath(engine="llama.cpp", base_url=deaf_url, model="m", stream=False,
                           read_timeout_s=0.3, max_attempts=1)
        t0 = time.monotonic()
        rec = await PathClient("backup", path, Sampling(), aio, "e/2027-01-04/b").chat(
            ChatRequest("a", big, "SYN", 1, 1, 1))
        for w in held:
            w.close()
    assert rec.error_kind == "timeout" and time.monotonic() - t0 < 5, rec.error_detail


async def test_stream_lines_end_at_lf_crlf_or_a_lone_cr_on_both_transports():
    from dualpath.transport import AiohttpTransport, _split_lines

    assert _split_lines(b"", b"a\r\nb\rc\nd\r") == ([b"a", b"b", b"c"], b"d\r")
    assert _split_lines(b"d\r", b"\ne") == ([b"d"], b"e")
    body = b"".join(llama_stream_events()).replace(b"\n\n", b"\r\r")
    text = "FINAL \u2028GRADE: 2"
    body = body.replace(b'"FINAL "', orjson.dumps("FINAL \u2028"))
    server, url = await _raw_server(_chunked(body))
    async with server, AiohttpTransport(2) as aio:
        path = ServingPath(engine="llama.cpp", base_url=url, model="qwen3.6-35b-a3b",
                           stream=True)
        rec = await PathClient("backup", path, Sampling(), aio, "e/2027-01-04/b").chat(req())
    assert rec.ok and rec.output_text == text, rec.error_detail
    plain = make_client(lambda r: httpx.Response(200, content=body), stream=True)
    rec = await plain.chat(req())
    assert rec.ok and rec.output_text == text, rec.error_detail
