"""Scheduler benchmark: slot occupancy and makespan vs. a naive one-worker-per-ticker pool.

Both run the built-in 17-call pipeline for 100 tickers against the same simulated 4-slot
llama-server (its own process, real loopback HTTP). Lower bound of the makespan =
max(total service time / slots, longest unit chain), from the server's own timings
(prompt_ms + predicted_ms, scaled), so HTTP overhead counts against the scheduler.

Last line: `occupancy=... makespan_ratio=... naive_makespan_ratio=...`
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
    # occupancy: time-weighted min(in flight, slots)/slots while work was available, i.e. from
    # the first moment all slots were busy to the admission of the last unit
    ev = sorted([(c.start_mono, 1) for c in calls] + [(c.end_mono, -1) for c in calls])
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
    window = last_admit - first_full
    # time a call spent beyond its service time: HTTP overhead plus waiting in the server's
    # queue. Queueing inflates client-side latencies, which then no longer measure the server.
    wait = np.median([c.latency_s - service_s(c, scale) for c in calls])
    return {"median_wait_ms": wait * 1e3,"makespan_s": t1 - t0, "lower_bound_s": lower, "ratio": (t1 - t0) / lower,
            "occupancy": area / (slots * window) if window > 0 else float("nan"),
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


async def main(tickers: int, slots: int, scale: float) -> None:
    cfg = parse_config({"experiment": {"universe": ["X"]}, "paths": {"bench": {
        "engine": "sim", "model": "m", "slots": slots,
        "sim": SimProfile(time_scale=scale).model_dump()}}})
    market = SyntheticMarket(7, n_tickers=tickers)
    night = market.nights(1)[0]

    def inputs(unit: Unit) -> UnitInput:
        h = market.history(unit.ticker, night, 60)
        return UnitInput(unit.ticker, unit.draw, night, tuple(zip(h["date"], h["adj_close"])))

    units = draw_major(market.tickers, 1)
    results = {}
    with SimFleet(cfg) as fleet:
        path = ServingPath(engine="sim", base_url=fleet.urls["bench"], model="m", slots=slots,
                           stream=False)
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=64)) as http:
            for name in ("dualpath", "naive"):
                client = PathClient("bench", path, Sampling(), http, f"bench/{name}")
                t0 = time.monotonic()
                if name == "dualpath":
                    records: list = []
                    runner = PathRunner(client, builtin, night, slots=slots, sink=records.append,
                                        inputs=inputs, base_seed=1)
                    await runner.run_units(units)
                else:
                    records = await naive_pool(client, units, slots, inputs, night)
                results[name] = measure(records, slots, scale, t0, time.monotonic())
                r = results[name]
                print(f"{name:>9}: {r['calls']} calls, makespan {r['makespan_s']:.1f} s, "
                      f"lower bound {r['lower_bound_s']:.1f} s, ratio {r['ratio']:.3f}, "
                      f"steady-state occupancy {r['occupancy']:.3f}, median call wait beyond "
                      f"service {r['median_wait_ms']:.1f} ms", flush=True)
    print(f"naive / dualpath makespan: {results['naive']['makespan_s'] / results['dualpath']['makespan_s']:.2f}x")
    print(f"occupancy={results['dualpath']['occupancy']:.4f} "
          f"makespan_ratio={results['dualpath']['ratio']:.4f} "
          f"naive_makespan_ratio={results['naive']['ratio']:.4f} "
          f"naive_occupancy={results['naive']['occupancy']:.4f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tickers", type=int, default=100)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--time-scale", type=float, default=3e-3,
                    help="real seconds per modelled second (3e-3: a ~40 s call takes ~120 ms)")
    a = ap.parse_args()
    asyncio.run(main(a.tickers, a.slots, a.time_scale))
    sys.exit(0)
