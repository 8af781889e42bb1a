"""Time-outs that mean what they say, on the nights' transport (aiohttp) against loopback
servers: a request waiting in the server's queue is not timed out while the server works on
another call; a kept-alive connection the server closed is reopened at once, not a fault; a
reply trickled slowly is cut by the per-call deadline (call_timeout_s)."""

from __future__ import annotations

import asyncio

import orjson

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.transport import AiohttpTransport


def _events(text: str) -> list[bytes]:
    base = {"id": "c", "model": "m", "system_fingerprint": "b1", "object": "chat.completion.chunk"}
    ev = [{**base, "choices": [{"index": 0, "finish_reason": None, "delta": {"content": c}}]}
          for c in text]
    ev.append({**base, "choices": [{"index": 0, "finish_reason": "stop", "delta": {}}]})
    ev.append({**base, "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": len(text),
                                                "total_tokens": 5 + len(text)}})
    return [b"data: " + orjson.dumps(e) + b"\n\n" for e in ev] + [b"data: [DONE]\n\n"]


def _chunk(b: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(b), b)


HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n\r\n")


async def _read_request(reader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    n = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
              if h.lower().startswith(b"content-length:")), 0)
    await reader.readexactly(n)


async def _serve(handle):
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def _client(url: str, http, sleeps: list | None = None, **path) -> PathClient:
    async def sleep(s):
        sleeps.append(s)
    sp = ServingPath(engine="llama.cpp", base_url=url, model="m", stream=True, slots=1,
                     backoff_s=5.0, **path)
    return PathClient("p", sp, Sampling(), http, "e/2027-01-04/p",
                      sleep=sleep if sleeps is not None else asyncio.sleep)


def _req(i: int) -> ChatRequest:
    return ChatRequest("a", [{"role": "user", "content": "hi"}], "SYN", 1, 1, i)


async def test_a_queued_request_is_not_timed_out_while_the_server_works_on_another():
    # one slot: the second request gets no byte until the first is done, which streams
    # for ~4 read timeouts
    slot = asyncio.Lock()

    async def handle(reader, writer):
        try:
            while True:
                await _read_request(reader)
                async with slot:
                    writer.write(HEAD)
                    for ev in _events("abcdefghij"):
                        writer.write(_chunk(ev))
                        await writer.drain()
                        await asyncio.sleep(0.04)
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server, url = await _serve(handle)
    sleeps: list = []
    async with server, AiohttpTransport(4) as aio:
        client = _client(url, aio, sleeps, read_timeout_s=0.12, queue_depth=1)
        first, second = await asyncio.gather(client.chat(_req(1)), client.chat(_req(2)))
    assert first.ok and second.ok, (first.error_detail, second.error_detail)
    assert (first.attempts, second.attempts, sleeps) == (1, 1, [])
    assert second.first_token_mono > first.end_mono - 0.05     # it really waited its turn


async def test_a_server_silent_on_every_call_still_times_out():
    async def handle(reader, writer):
        await _read_request(reader)
        await asyncio.sleep(5)
        writer.close()

    server, url = await _serve(handle)
    async with server, AiohttpTransport(2) as aio:
        rec = await _client(url, aio, read_timeout_s=0.2, max_attempts=1).chat(_req(1))
    assert rec.error_kind == "timeout" and "silent" in rec.error_detail


async def test_a_kept_alive_connection_the_server_closed_is_reopened_without_a_fault():
    # the server answers a connection's first request, then closes it when the next one
    # arrives: what a client sees when the server dropped an idle kept-alive connection
    async def handle(reader, writer):
        try:
            await _read_request(reader)
            writer.write(HEAD + b"".join(_chunk(e) for e in _events("ok")) + b"0\r\n\r\n")
            await writer.drain()
            await _read_request(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.transport.abort()

    server, url = await _serve(handle)
    sleeps: list = []
    async with server, AiohttpTransport(2) as aio:
        client = _client(url, aio, sleeps)
        recs = [await client.chat(_req(i)) for i in range(3)]
        reopened = aio.stale_reopened
    assert all(r.ok and r.attempts == 1 and r.attempt_errors is None for r in recs), \
        [r.error_detail for r in recs]
    assert sleeps == [] and reopened == 2


async def test_a_reply_trickled_byte_by_byte_is_cut_by_the_call_deadline():
    async def handle(reader, writer):
        try:
            await _read_request(reader)
            writer.write(HEAD)
            body = b"".join(_chunk(e) for e in _events("x" * 200))
            for i in range(len(body)):
                writer.write(body[i:i + 1])
                await writer.drain()
                await asyncio.sleep(0.02)
        except ConnectionError:
            pass
        writer.close()

    server, url = await _serve(handle)
    async with server, AiohttpTransport(2) as aio:
        rec = await _client(url, aio, read_timeout_s=1.0, call_timeout_s=0.5,
                            max_attempts=1).chat(_req(1))
    assert rec.error_kind == "timeout" and "call_timeout_s" in rec.error_detail


def test_slot_occupancy_and_gaps_are_read_from_a_llama_server_log():
    from dualpath.slotlog import read_slot_log
    log = "\n".join([
        "0.00.100.000 I slot get_availabl: id  0 | task -1 | selected slot by id (0)",
        "\x1b[32m0.00.100.000\x1b[0m I slot launch_slot_: id  0 | task 1 | processing task, is_child = 0",
        "0.00.100.000 I slot launch_slot_: id  1 | task 2 | processing task, is_child = 0",
        "0.01.100.000 I slot      release: id  0 | task 1 | stop processing: n_tokens = 9, truncated = 0",
        "0.01.200.000 I slot launch_slot_: id  0 | task 3 | processing task, is_child = 0",
        "0.02.100.000 I slot      release: id  0 | task 3 | stop processing: n_tokens = 9, truncated = 0",
        "0.02.100.000 I slot      release: id  1 | task 2 | stop processing: n_tokens = 9, truncated = 0"])
    s = read_slot_log(log).summary(2)
    assert s["tasks"] == 3 and abs(s["window_s"] - 2.0) < 1e-9
    assert abs(s["occupancy"] - 3.9 / 4.0) < 1e-9 and abs(s["gap_median_ms"] - 100) < 1e-6
