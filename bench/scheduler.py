"""Scheduler benchmark: server-side slot occupancy and makespan, dualpath vs a naive pool.

Every arm runs the built-in 17-call pipeline for 100 tickers against the same simulated 4-slot
llama-server (its own process, real loopback HTTP): dualpath with prefix affinity (the default:
each unit owns a slot, one request queued per slot), dualpath sharing slots with 0 and 1
requests queued at the server, and the naive one-worker-per-ticker pool. The server's side is
the measure: a call occupies its slot for its own reported service time (prompt_ms +
predicted_ms, scaled), ending when its answer ended; occupancy is the time-weighted share of
slots so occupied from the first moment all were to the admission of the last unit, and the
server's own counters give busy slot-seconds over the whole makespan. Lower bound of the
makespan = max(total service time / slots, longest unit chain) of the arm's own calls, so a
gap the harness leaves counts against it (prefix caching shortens service and is reported
apart, as the cached-token share).

Last line: `occupancy=... makespan_ratio=... naive_makespan_ratio=...` (the default arm)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

import httpx
import numpy as np

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath, SimProfile, parse_config
from dualpath.market import SyntheticMarket
from dualpath.pipeline import AGENTS, UnitInput, builtin
from dualpath.records import CallRecord, UnitStart
from dualpath.scheduler import PathRunner, Unit, derive_seed, draw_major
from dualpath.sim.fleet import SimFleet
from dualpath.transport import AiohttpTransport

STAGE = {a: s for s, group in enumerate([
    ["data_summary"], ["technical", "fundamental", "news_sentiment", "sector_macro"],
    ["bull_1", "bear_1"], ["bull_2", "bear_2"], ["research_manager"], ["trader"],
    ["risk_aggressive", "risk_neutral", "risk_conservative"], ["risk_judge"],
    ["portfolio_manager"], ["consistency_check"]]) for a in group}
assert set(STAGE) == set(AGENTS)


def service_s(c: CallRecord, scale: float) -> float:
    return (c.prompt_ms + c.predicted_ms) / 1000 * scale


def measure(records: list, slots: int, scale: float, t0: float, t1: float) -> dict:
    calls = [r for r in records if isinstance(r, CallRecord)]
    starts = [r for r in records if isinstance(r, UnitStart)]
    busy = sum(service_s(c, scale) for c in calls)
    chains: dict = {}
    for c in calls:
        stages = chains.setdefault((c.ticker, c.draw), {})
        stages[STAGE[c.agent]] = max(stages.get(STAGE[c.agent], 0.0), service_s(c, scale))
    longest = max(sum(s.values()) for s in chains.values())
    lower = max(busy / slots, longest)
    # the server's side: each call held a slot for its service time, ending with its answer
    ev = sorted([(c.end_mono - service_s(c, scale), 1) for c in calls]
                + [(c.end_mono, -1) for c in calls])
    t, n, first_full, area = ev[0][0], 0, None, 0.0
    last_admit = max(s.start_wall for s in starts) - time.time() + time.monotonic()
    for when, d in ev:
        if first_full is not None:
            lo, hi = max(t, first_full), min(when, last_admit)
            if hi > lo:
                area += (hi - lo) * min(n, slots)
        t, n = when, n + d
        if first_full is None and n >= slots:
            first_full = when
    window = last_admit - first_full if first_full is not None else 0.0
    # time a call spent beyond its service time: HTTP overhead plus waiting in the server's
    # queue (a queued request's latency is queue + service; both are on the record)
    wait = np.median([c.latency_s - service_s(c, scale) for c in calls])
    cached = sum(c.cache_n or 0 for c in calls)
    return {"median_wait_ms": wait * 1e3, "makespan_s": t1 - t0, "lower_bound_s": lower,
            "ratio": (t1 - t0) / lower, "busy_s": busy,
            "occupancy": area / (slots * window) if window > 0 else float("nan"),
            "cached_share": cached / max(1, cached + sum(c.prompt_n or 0 for c in calls)),
            "calls": len(calls)}


async def naive_pool(client: PathClient, units: list[Unit], workers: int, inputs, night) -> list:
    """The usual first attempt: N workers, each scoring one ticker at a time."""
    records: list = []
    queue = list(units)

    async def worker():
        while queue:
            unit = queue.pop(0)
            records.append(UnitStart(client.run_id, client.name, unit.ticker, unit.draw, 1,
                                     time.time()))
            seq = 0

            async def llm(agent, messages, *, json_schema=None):
                nonlocal seq
                seq += 1
                rec = await client.chat(ChatRequest(agent, messages, unit.ticker, unit.draw, 1,
                                                    seq, derive_seed(1, night, unit.ticker,
                                                                     unit.draw, agent)))
                records.append(rec)
                return rec.output_text
            llm.json_grades = False
            await builtin(inputs(unit), llm)

    await asyncio.gather(*(worker() for _ in range(workers)))
    return records


def counters(http_url: str) -> dict[str, float]:
    text = httpx.get(f"{http_url}/metrics").text
    return {ln.split()[0].split(":")[1]: float(ln.split()[1]) for ln in text.splitlines()
            if ln and not ln.startswith("#")}


ARMS = {"affinity q=1": dict(pin=True, queue=1), "shared q=1": dict(pin=False, queue=1),
        "shared q=0": dict(pin=False, queue=0), "naive": None}


async def run_arm(name, fleet_url, path, units, slots, scale, inputs, night, http) -> dict:
    client = PathClient("bench", path, Sampling(), http, f"bench/{name}")
    before = counters(fleet_url)
    t0 = time.monotonic()
    arm = ARMS[name]
    if arm is None:
        records = await naive_pool(client, units, slots, inputs, night)
    else:
        records: list = []
        runner = PathRunner(client, builtin, night, slots=slots, sink=records.append,
                            inputs=inputs, base_seed=1, queue_depth=arm["queue"],
                            pin_slots=arm["pin"])
        await runner.run_units(units)
    t1 = time.monotonic()
    after = counters(fleet_url)
    r = measure(records, slots, scale, t0, t1)
    served = sum(after[k] - before[k] for k in ("prompt_seconds_total",
                                               "tokens_predicted_seconds_total"))
    r["server_busy_share"] = served * scale / (slots * (t1 - t0))
    return r


async def main(tickers: int, slots: int, scale: float, rounds: int, arms: list[str]) -> None:
    cfg = parse_config({"experiment": {"universe": ["X"]}, "paths": {"bench": {
        "engine": "sim", "model": "m", "slots": slots,
        "sim": SimProfile(time_scale=scale).model_dump()}}})
    market = SyntheticMarket(7, n_tickers=tickers)
    night = market.nights(1)[0]

    def inputs(unit: Unit) -> UnitInput:
        h = market.history(unit.ticker, night, 60)
        return UnitInput(unit.ticker, unit.draw, night, tuple(zip(h["date"], h["adj_close"])))

    units = draw_major(market.tickers, 1)
    results: dict[str, list[dict]] = {name: [] for name in arms}
    with SimFleet(cfg) as fleet:
        url = fleet.urls["bench"]
        path = ServingPath(engine="sim", base_url=url, model="m", slots=slots, stream=False)
        async with AiohttpTransport(64) as http:     # the transport nights use
            for rnd in range(rounds):     # arms interleaved, so drift hits all alike
                for name in arms:
                    r = await run_arm(name, url, path, units, slots, scale, inputs, night, http)
                    results[name].append(r)
                    print(f"[{rnd + 1}/{rounds}] {name:>13}: {r['calls']} calls, makespan "
                          f"{r['makespan_s']:.1f} s, lower bound {r['lower_bound_s']:.1f} s, "
                          f"ratio {r['ratio']:.3f}, occupancy (server side) "
                          f"{r['occupancy']:.4f}, server busy share of makespan "
                          f"{r['server_busy_share']:.3f}, cached share {r['cached_share']:.2f}, "
                          f"median wait beyond service {r['median_wait_ms']:.1f} ms", flush=True)
    med = {name: {k: float(np.median([r[k] for r in rs])) for k in rs[0]}
           for name, rs in results.items()}
    print(f"medians over {rounds} round(s):")
    for name, m in med.items():
        print(f"  {name:>13}: makespan {m['makespan_s']:.1f} s, ratio {m['ratio']:.3f}, "
              f"occupancy {m['occupancy']:.4f}, cached share {m['cached_share']:.2f}")
    d, nv = med[arms[0]], med.get("naive")
    if nv is None:
        print(f"occupancy={d['occupancy']:.4f} makespan_ratio={d['ratio']:.4f} ({arms[0]})")
        return
    print(f"naive / dualpath makespan: {nv['makespan_s'] / d['makespan_s']:.2f}x")
    print(f"occupancy={d['occupancy']:.4f} makespan_ratio={d['ratio']:.4f} "
          f"naive_makespan_ratio={nv['ratio']:.4f} naive_occupancy={nv['occupancy']:.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tickers", type=int, default=100)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--time-scale", type=float, default=3e-3,
                    help="real seconds per modelled second (3e-3: a ~40 s call takes ~120 ms)")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds of every arm")
    ap.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS),
                    help="arms to run (the first is the one on the last line)")
    a = ap.parse_args()
    asyncio.run(main(a.tickers, a.slots, a.time_scale, a.rounds, a.arms))
    sys.exit(0)
