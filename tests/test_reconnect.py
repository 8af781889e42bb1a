"""A server killed and restarted on its port: the calls made meanwhile wait for it.

A refused connection, or one opened for the request and reset before any byte of a reply
(what a proxy in front of a dead server gives), is the server not being there, not a fault
of the request: it is waited for with the usual backoff, up to `server_down_wait_s` of
sleeping, before it counts toward `max_attempts` (`Fault.no_server`)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter

import httpx
import orjson
import pytest

from dualpath.client import PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.sim.proxy import FaultProxy
from dualpath.transport import AiohttpTransport
from tests.test_client import make_client, req

# A real HTTP/1.1 server with kept-alive connections, in its own process (kill -9 closes its
# sockets the way a crashed llama-server's are closed); it prints its port once listening.
SERVER = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
REPLY = json.dumps({"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
    "message": {"role": "assistant", "content": "FINAL GRADE: 3"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def start_server(port: int = 0) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    if not line:
        proc.wait()
        raise RuntimeError(f"the test server did not start on port {port}")
    return proc, int(line)


def kill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("between", ["direct", "behind a proxy"])
async def test_calls_wait_for_a_server_killed_and_restarted_on_its_port(between):
    max_attempts = 3
    first, port = start_server()
    servers = [first]
    proxy = FaultProxy(f"http://127.0.0.1:{port}").__enter__() if between != "direct" else None
    url = proxy.url if proxy else f"http://127.0.0.1:{port}"
    sleeps: Counter = Counter()          # backoff sleeps per call (each call is a task)
    gone = asyncio.Event()

    async def sleep(s: float) -> None:
        sleeps[asyncio.current_task()] += 1
        # every call is past the point where its attempts alone would have ended it
        if len(sleeps) == 4 and min(sleeps.values()) >= max_attempts:
            gone.set()
        await asyncio.sleep(s)

    try:
        async with AiohttpTransport(4) as aio:
            path = ServingPath(engine="llama.cpp", base_url=url, model="m", stream=False,
                               max_attempts=max_attempts, backoff_s=0.02, backoff_max_s=0.1,
                               server_down_wait_s=120.0)
            client = PathClient("backup", path, Sampling(), aio, "e/2027-01-04/b",
                                sleep=sleep)
            warm = await asyncio.gather(*(client.chat(req()) for _ in range(4)))
            assert all(r.ok for r in warm)          # the pool holds kept-alive connections
            kill(first)
            calls = asyncio.gather(*(client.chat(req()) for _ in range(4)))
            # (calls that end first have given up: they fail below, with their reason)
            await asyncio.wait([calls, asyncio.ensure_future(gone.wait())], timeout=60,
                               return_when=asyncio.FIRST_COMPLETED)
            restarted, again = start_server(port)     # the same port, as a restart does
            servers.append(restarted)
            assert again == port
            recs = await asyncio.wait_for(calls, 120)
    finally:
        if proxy:
            proxy.__exit__()
        for p in servers:
            if p.poll() is None:
                kill(p)
    for rec in recs:
        assert rec.ok, rec.error_detail
    met = {e["kind"] for r in recs for e in orjson.loads(r.attempt_errors or "[]")}
    # direct: refused; through the proxy: a new connection reset before any reply byte
    assert met == ({"connect_error"} if between == "direct" else {"connection_reset"})
    assert max(r.attempts for r in recs) > max_attempts


async def test_a_server_that_stays_away_is_given_up_after_the_wait_then_the_attempts():
    client = make_client(lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused",
                                                                           request=r)),
                         max_attempts=3, backoff_s=1.0, backoff_max_s=1.0,
                         server_down_wait_s=5.0)
    rec = await client.chat(req())
    assert not rec.ok and rec.error_kind == "connect_error"
    waited = sum(client.slept[:-2])          # the last two sleeps are counted attempts'
    # the waits for the absent server fill the 5 s (the last ends past it, by less than one
    # backoff of at most 1 s); then the attempts count
    assert 5.0 <= waited < 6.0
    assert rec.attempts == len(client.slept) + 1 and rec.attempts > 3
    assert "waiting for a server that refused or reset new connections" in rec.error_detail


async def test_other_transient_faults_still_count_every_attempt():
    client = make_client(lambda r: httpx.Response(503, json={}), max_attempts=3,
                         backoff_s=1.0, server_down_wait_s=60.0)
    rec = await client.chat(req())
    assert rec.attempts == 3 and rec.error_kind == "http_503"
    assert "waiting for a server" not in rec.error_detail
