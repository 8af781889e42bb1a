"""Client benchmark: dualpath's PathClient vs the openai SDK vs bare httpx, streaming.

A loopback server in another process answers every chat completion the way llama-server
streams it: one SSE event per generated token, then the finish event, the usage event with
`timings`, and `[DONE]`, chunked, on keep-alive connections. The server sends pre-built
bytes so that the client side is what limits the rate. Each arm sends the same requests
(a 24 KB prompt, `--tokens` tokens streamed back) with 8 in flight; arms are interleaved
over rounds and medians are quoted, since the machine is shared.

Measured per arm: calls per second, CPU seconds of this (client) process per call, and TCP
connections the server accepted per call.

Last line: `vs_openai=... cpu_vs_httpx=... connections_per_call=...`: dualpath's calls/s over
the SDK's, dualpath's CPU per call over bare httpx's, dualpath's connections per call.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import socket
import statistics
import sys
import time

import httpx
import orjson

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.transport import AiohttpTransport

PROMPT = [{"role": "system", "content": "You are one member of an investment committee."},
          {"role": "user", "content": ("2027-01-04,101.25\n" * 1365)[:24 * 1024]}]


def sse_body(tokens: int) -> bytes:
    """What llama-server streams for one answer of `tokens` tokens (with usage asked for)."""
    meta = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
            "model": "bench", "system_fingerprint": "b1-bench"}

    def event(**f) -> bytes:
        return b"data: " + orjson.dumps({**meta, **f}) + b"\n\n"
    out = [event(choices=[{"index": 0, "finish_reason": None,
                           "delta": {"role": "assistant", "content": None}}])]
    out += [event(choices=[{"index": 0, "finish_reason": None, "delta": {"content": " tok"}}])
            for _ in range(tokens)]
    out.append(event(choices=[{"index": 0, "finish_reason": "stop", "delta": {}}]))
    timings = {"cache_n": 0, "prompt_n": 6000, "prompt_ms": 800.0, "predicted_n": tokens,
               "predicted_ms": 2000.0, "prompt_per_second": 7500.0,
               "predicted_per_second": tokens / 2.0}
    out.append(event(choices=[], usage={"prompt_tokens": 6000, "completion_tokens": tokens,
                                        "total_tokens": 6000 + tokens}, timings=timings))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def serve(port: int, tokens: int, ready) -> None:
    """A minimal HTTP/1.1 server: keep-alive, chunked SSE replies, connections counted."""
    body = sse_body(tokens)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 16384]), body[i:i + 16384])
                      for i in range(0, len(body), 16384)) + b"0\r\n\r\n"
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
    count = {"connections": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        count["connections"] += 1
        try:
            while True:
                headers = await reader.readuntil(b"\r\n\r\n")
                if headers.startswith(b"GET /connections"):
                    n = str(count["connections"]).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(n), n))
                    await writer.drain()
                    continue
                length = 0
                for line in headers.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                writer.write(head + chunks)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=256)
        ready.set()
        async with server:
            await server.serve_forever()
    asyncio.run(main())


async def arm_dualpath(url: str, calls: int, in_flight: int) -> None:
    path = ServingPath(engine="llama.cpp", base_url=url, model="bench", slots=in_flight,
                       stream=True, queue_depth=0)
    # the transport nights use (flows.runner.chat_transport): aiohttp, pooled to the slots
    async with AiohttpTransport(in_flight) as chat:
        client = PathClient("bench", path, Sampling(max_tokens=512), chat, "bench/run")
        sem = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            async with sem:
                rec = await client.chat(ChatRequest("trader", PROMPT, "SYN", 1, 1, i, seed=i))
                assert rec.ok and rec.completion_tokens, rec.error_detail
        await asyncio.gather(*(one(i) for i in range(calls)))


async def arm_openai(url: str, calls: int, in_flight: int) -> None:
    from openai import AsyncOpenAI

    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    async with httpx.AsyncClient(limits=limits) as http:
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="none", http_client=http,
                             max_retries=0)
        sem = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            async with sem:
                stream = await client.chat.completions.create(
                    model="bench", messages=PROMPT, stream=True, seed=i, max_tokens=512,
                    stream_options={"include_usage": True})
                text, usage = [], None
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text.append(chunk.choices[0].delta.content)
                    usage = chunk.usage or usage
                assert usage is not None and text
        await asyncio.gather(*(one(i) for i in range(calls)))


async def arm_httpx(url: str, calls: int, in_flight: int) -> None:
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    async with httpx.AsyncClient(limits=limits) as http:
        sem = asyncio.Semaphore(in_flight)

        async def one(i: int) -> None:
            async with sem:
                body = {"model": "bench", "messages": PROMPT, "stream": True, "seed": i,
                        "max_tokens": 512, "stream_options": {"include_usage": True}}
                text, usage = [], None
                async with http.stream("POST", f"{url}/v1/chat/completions",
                                       content=orjson.dumps(body),
                                       headers={"content-type": "application/json"}) as r:
                    async for line in r.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        event = orjson.loads(line[6:])
                        if event["choices"] and event["choices"][0]["delta"].get("content"):
                            text.append(event["choices"][0]["delta"]["content"])
                        usage = event.get("usage") or usage
                assert usage is not None and text
        await asyncio.gather(*(one(i) for i in range(calls)))


ARMS = {"dualpath": arm_dualpath, "openai": arm_openai, "httpx": arm_httpx}


def connections(url: str) -> int:
    return int(httpx.get(f"{url}/connections").text)


def main(a: argparse.Namespace) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    server = ctx.Process(target=serve, args=(port, a.tokens, ready), daemon=True)
    server.start()
    ready.wait(30)
    url = f"http://127.0.0.1:{port}"
    results: dict[str, list[dict]] = {name: [] for name in ARMS}
    try:
        for rnd in range(a.rounds):
            order = list(ARMS) if rnd % 2 == 0 else list(reversed(ARMS))
            for name in order:
                conn0, cpu0, t0 = connections(url), time.process_time(), time.perf_counter()
                asyncio.run(ARMS[name](url, a.calls, a.in_flight))
                wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
                conns = connections(url) - conn0 - 1     # less our own /connections read
                r = {"calls_s": a.calls / wall, "cpu_ms": cpu / a.calls * 1e3,
                     "conn_per_call": conns / a.calls}
                results[name].append(r)
                print(f"[{rnd + 1}/{a.rounds}] {name:>8}: {r['calls_s']:.1f} calls/s, "
                      f"{r['cpu_ms']:.2f} ms CPU per call, {conns} connection(s) for "
                      f"{a.calls} calls", flush=True)
    finally:
        server.kill()
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for n, rs in results.items()}
    d, o, h = med["dualpath"], med["openai"], med["httpx"]
    print(f"medians: dualpath {d['calls_s']:.1f} calls/s {d['cpu_ms']:.2f} ms CPU; openai "
          f"{o['calls_s']:.1f} calls/s {o['cpu_ms']:.2f} ms; httpx {h['calls_s']:.1f} calls/s "
          f"{h['cpu_ms']:.2f} ms ({a.tokens} tokens per reply, one SSE event each)")
    print(f"vs_openai={d['calls_s'] / o['calls_s']:.2f} cpu_vs_httpx={d['cpu_ms'] / h['cpu_ms']:.2f} "
          f"connections_per_call={d['conn_per_call']:.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--in-flight", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=300, help="tokens streamed per reply")
    ap.add_argument("--rounds", type=int, default=3)
    main(ap.parse_args())
    sys.exit(0)
