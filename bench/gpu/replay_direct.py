"""Direct replay of a recorded dualpath night on the same llama-server: no dualpath code in
the loop (duckdb to read the warehouse, a bare httpx client to send).

The requests are the run's successful calls, bodies from `texts` by `calls.request_hash` and
messages from `v_prompts` by `calls.prompt_hash`; units in the order their first call started,
each unit's calls in `call_seq` order, one FIFO queue drained by `--in-flight` workers (so
exactly that many requests are in flight until the queue runs dry; slots + 1 keeps one
waiting in the server's queue). `--drop-id-slot` sends them without the run's `id_slot`, so
the server picks slots itself. A request whose connection the
server drops (a stale keep-alive connection) is sent again at once and counted in `retries`. Outputs are free (each request
is sent as recorded, whatever the server answers).

Printed (and written to --out as JSON): wall clock (first send to last response), calls,
client-side token counts, the server's /metrics deltas (tokens predicted, prompt tokens
processed, their seconds), aggregate decode tok/s = predicted delta / wall, and the cached
share from each response's timings (cache_n / (cache_n + prompt_n)).

usage: python bench/gpu/replay_direct.py WAREHOUSE URL [--in-flight 4] [--drop-id-slot]
       [--out replay.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

import duckdb
import httpx


def metrics(url: str) -> dict[str, float]:
    out = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def load(warehouse: str, drop_id_slot: bool = False) -> list[dict]:
    con = duckdb.connect(warehouse, read_only=True)
    rows = con.execute("""
        WITH ok AS (SELECT * FROM calls WHERE error_kind IS NULL AND http_status = 200),
        firsts AS (SELECT ticker, draw, unit_attempt, min(start_mono) AS t0 FROM ok
                   GROUP BY ALL)
        SELECT ok.ticker, ok.draw, ok.call_seq, r.text AS body, p.prompt_text
        FROM ok JOIN firsts USING (ticker, draw, unit_attempt)
        JOIN texts r ON r.hash = ok.request_hash
        JOIN v_prompts p ON p.prompt_hash = ok.prompt_hash
        ORDER BY firsts.t0, ok.ticker, ok.draw, ok.unit_attempt, ok.call_seq""").fetchall()
    con.close()
    reqs = []
    for ticker, draw, seq, body, prompt in rows:
        b = json.loads(body)
        b["messages"] = json.loads(prompt)
        if drop_id_slot:
            b.pop("id_slot", None)
        reqs.append({"unit": f"{ticker}/{draw}", "seq": seq, "body": b})
    return reqs


async def send(http: httpx.AsyncClient, url: str, body: dict) -> dict:
    if not body.get("stream"):
        r = await http.post(url + "/v1/chat/completions", json=body)
        r.raise_for_status()
        j = r.json()
        return {"usage": j.get("usage") or {}, "timings": j.get("timings") or {}}
    usage, timings = {}, {}
    async with http.stream("POST", url + "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            j = json.loads(line[6:])
            usage = j.get("usage") or usage
            timings = j.get("timings") or timings
    return {"usage": usage, "timings": timings}


async def replay(url: str, reqs: list[dict], slots: int) -> tuple[float, list[dict], list[str]]:
    q: asyncio.Queue = asyncio.Queue()
    for r in reqs:
        q.put_nowait(r)
    results: list[dict] = []
    retries: list[str] = []

    async def worker(http):
        while True:
            try:
                r = q.get_nowait()
            except asyncio.QueueEmpty:
                return
            for attempt in range(4):   # a dropped keep-alive connection: send again at once
                try:
                    results.append(await send(http, url, r["body"]))
                    break
                except (httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadError) as e:
                    retries.append(f"{r['unit']}#{r['seq']}: {type(e).__name__}: {e}")
                    if attempt == 3:
                        raise

    limits = httpx.Limits(max_connections=slots, max_keepalive_connections=slots)
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800, connect=10), limits=limits) as http:
        t0 = time.monotonic()
        await asyncio.gather(*(worker(http) for _ in range(slots)))
        wall = time.monotonic() - t0
    return wall, results, retries


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("warehouse")
    p.add_argument("url")
    p.add_argument("--in-flight", "--slots", dest="slots", type=int, default=4)
    p.add_argument("--drop-id-slot", action="store_true")
    p.add_argument("--out")
    a = p.parse_args()
    url = a.url.rstrip("/")
    reqs = load(a.warehouse, a.drop_id_slot)
    m0 = metrics(url)
    wall, res, retries = asyncio.run(replay(url, reqs, a.slots))
    m1 = metrics(url)
    d = {k: m1.get(k, 0) - m0.get(k, 0) for k in m1 if k.endswith("_total")}
    cache_n = sum(r["timings"].get("cache_n", 0) or 0 for r in res)
    prompt_n = sum(r["timings"].get("prompt_n", 0) or 0 for r in res)
    out = {
        "calls": len(res), "in_flight": a.slots, "units": len({r["unit"] for r in reqs}),
        "tickers": len({r["unit"].split("/")[0] for r in reqs}), "wall_s": wall,
        "completion_tokens": sum(r["usage"].get("completion_tokens", 0) or 0 for r in res),
        "prompt_tokens": sum(r["usage"].get("prompt_tokens", 0) or 0 for r in res),
        "cache_n": cache_n, "prompt_n": prompt_n,
        "cached_share": cache_n / (cache_n + prompt_n) if cache_n + prompt_n else None,
        "retries": len(retries), "retry_detail": retries[:20],
        "metrics_delta": d,
        "decode_tps": d.get("llamacpp:tokens_predicted_total", 0) / wall,
        "prefill_tokens": d.get("llamacpp:prompt_tokens_total", 0),
    }
    print(json.dumps(out, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
