"""Scheduler benchmark: server-side slot occupancy and makespan of dualpath's scheduling arms
on a simulated llama-server, checked against the real CPU llama-server.

Every arm runs the built-in 17-call pipeline for `--tickers` tickers through dualpath's own
scheduler and client (the aiohttp transport nights use), each on a freshly started 4-slot
server: dualpath's default (prefix affinity: a unit per slot, nothing queued at a busy slot),
affinity with two units per slot, with one queued (on a server with and without its RAM
prompt cache) and with none queued, slots shared with 1 and 0 requests
queued, and the naive one-worker-per-ticker pool. The simulated server chooses,
defers and hands on slots as llama-server does (`dualpath.sim.slots`) and writes the same
launch/release log lines, so occupancy is read from the server's log the same way for both
(`dualpath.slotlog`: busy slot time / (slots x first launch to last release)).

The real arm (skipped with --no-real, or when the llama-server build is absent) runs the
default arm first on the real llama-server (Gemma 3 270M, the tests' CPU build); the
simulated server's speeds are then set from that run's own timings (prefill and decode
tokens per second per call, characters per token, output lengths), so the simulated arms
are the same workload at the same speeds, their clock compressed by `--time-scale`.

Makespan ratio = makespan / max(total service time / slots, longest unit chain) of the arm's
own calls: a gap the harness leaves counts against it (prefix caching shortens service and
is reported apart, as the cached share).

With --gpu the arms run the H200 workload of bench/gpu/README.md on a simulated server at the
speeds measured there (including the ~3 ms per KB the server takes to read and tokenize a
request), and the last line carries the occupancy the H200's own log gave.

Last line: `occupancy=... makespan_ratio=... real_occupancy=...` (the default arm; the goal
is real and simulated occupancy within 0.02 of each other)
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath, SimProfile
from dualpath.market import SyntheticMarket
from dualpath.pipeline import AGENTS, UnitInput, builtin
from dualpath.procs import spawn, stop_process
from dualpath.records import CallRecord, UnitStart
from dualpath.scheduler import PathRunner, Unit, derive_seed, draw_major
from dualpath.sim.fleet import wait_ready
from dualpath.slotlog import read_slot_log_file
from dualpath.transport import AiohttpTransport

STAGE = {a: s for s, group in enumerate([
    ["data_summary"], ["technical", "fundamental", "news_sentiment", "sector_macro"],
    ["bull_1", "bear_1"], ["bull_2", "bear_2"], ["research_manager"], ["trader"],
    ["risk_aggressive", "risk_neutral", "risk_conservative"], ["risk_judge"],
    ["portfolio_manager"], ["consistency_check"]]) for a in group}
assert set(STAGE) == set(AGENTS)

# queue None / units None: the path's defaults (llama.cpp: with affinity none queued, slots
# shared 1 queued; 1 unit per slot); ram False: the server runs with `--cache-ram 0`
ARMS = {"affinity": dict(pin=True, queue=None, units=None),
        "affinity 2/slot": dict(pin=True, queue=1, units=2),
        "affinity q=1": dict(pin=True, queue=1, units=None),
        "affinity q=1 cache-ram 0": dict(pin=True, queue=1, units=None, ram=False),
        "affinity cache-ram 0": dict(pin=True, queue=None, units=None, ram=False),
        "affinity q=0": dict(pin=True, queue=0, units=None),
        "shared q=1": dict(pin=False, queue=1, units=None),
        "shared q=0": dict(pin=False, queue=0, units=None), "naive": None}


# The H200 runs of bench/gpu/README.md (16 tickers, 20 KB documents, 192 output tokens): per
# busy slot ~10k prefill and ~115 decode tok/s, every answer to max_tokens, ~0.4 ms per KB for
# the server to read and tokenize a request (a slot's gap with no other launch in it is 15-18
# ms, harness included; at 0.7 the simulated slots fall into lockstep at queue_depth 0 too and
# the makespans of queue_depth 0 and 1 come out equal, unlike the H200's: bench/gpu/README.md)
# and ~2.3 ms per KB of saved prompt for its main thread to copy a slot's state to the RAM
# prompt cache (~49 ms per 5.3k-token, 83 MiB state, seen in its -lv 4 log). GPU_OCCUPANCY is
# what the H200's log read for the default arm (affinity, none queued: runs q0 and q0b).
GPU = SimProfile(prefill_tps=10000, decode_tps=115, context_tokens=0, output_mean_tokens=192,
                 output_sigma=0.0, runaway_share=1.0, malformed_share=0.0, intake_ms_per_kb=0.4,
                 cache_save_ms_per_kb=2.3)
GPU_OCCUPANCY = "0.960/0.961"


def filler(ticker: str, kb: int) -> str:
    """A ticker's document of `kb` KB of filler words, the same bytes every run."""
    import random
    rng, words = random.Random(ticker), ["revenue", "margin", "guidance", "segment", "demand",
                                         "capex", "inventory", "pricing", "backlog", "outlook"]
    out: list[str] = [f"# {ticker} filings digest"]
    while sum(map(len, out)) < kb * 1024:
        out.append(" ".join(rng.choice(words) for _ in range(12)) + f" {rng.randint(1, 999)}.")
    return "\n".join(out)


def service_s(c: CallRecord, scale: float) -> float:
    return (c.prompt_ms + c.predicted_ms) / 1000 * scale


def measure(records: list, slots: int, scale: float, t0: float, t1: float) -> dict:
    calls = [r for r in records if isinstance(r, CallRecord)]
    busy = sum(service_s(c, scale) for c in calls)
    chains: dict = {}
    for c in calls:
        stages = chains.setdefault((c.ticker, c.draw), {})
        stages[STAGE[c.agent]] = max(stages.get(STAGE[c.agent], 0.0), service_s(c, scale))
    lower = max(busy / slots, max(sum(s.values()) for s in chains.values()))
    cached = sum(c.cache_n or 0 for c in calls)
    return {"makespan_s": t1 - t0, "lower_bound_s": lower, "ratio": (t1 - t0) / lower,
            "cached_share": cached / max(1, cached + sum(c.prompt_n or 0 for c in calls)),
            "calls": len(calls), "failed": sum(not c.ok for c in calls)}


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


async def run_arm(name: str, url: str, log: Path, a: argparse.Namespace, units, inputs, night,
                  scale: float, engine: str) -> dict:
    arm = ARMS[name]
    path = ServingPath(engine=engine, base_url=url, model="m", slots=a.slots, stream=True,
                       queue_depth=None if arm is None else arm["queue"],
                       units_per_slot=None if arm is None else arm["units"])
    async with AiohttpTransport(4 * a.slots) as http:     # the transport nights use
        client = PathClient("bench", path, Sampling(max_tokens=a.max_tokens), http,
                            f"bench/{name}")
        t0 = time.monotonic()
        if arm is None:
            records = await naive_pool(client, units, a.slots, inputs, night)
        else:
            records = []
            runner = PathRunner(client, builtin, night, slots=a.slots, sink=records.append,
                                inputs=inputs, base_seed=1,
                                queue_depth=path.queue_depth_for(arm["pin"]),
                                pin_slots=arm["pin"], units_per_slot=path.server_units_per_slot)
            await runner.run_units(units)
        t1 = time.monotonic()
    r = measure(records, a.slots, scale, t0, t1)
    r.update(read_slot_log_file(log).summary(a.slots))
    r["records"] = records
    return r


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def real_arm(a, tmp: Path, units, inputs, night) -> dict:
    """The default arm on a freshly started real llama-server, its log read for occupancy."""
    from dualpath.launcher import LaunchedServer, gemma_model, llama_server_binary
    port, log = _free_port(), tmp / "real.log"
    argv = [llama_server_binary(), "-m", gemma_model(tmp), "--host", "127.0.0.1", "--port",
            str(port), "-np", str(a.slots), "-c", str(a.ctx * a.slots), "-t", str(a.threads),
            "--metrics", "--log-prefix", "--log-timestamps"]
    with LaunchedServer(argv, f"http://127.0.0.1:{port}", log, ready_timeout_s=300) as srv:
        return await run_arm("affinity", srv.base_url, log, a, units, inputs, night, 1.0,
                             "llama.cpp")


def calibrated(real: dict, scale: float) -> SimProfile:
    """A simulated server at the real run's speeds (its clock compressed by `scale`)."""
    calls = [c for c in real["records"] if isinstance(c, CallRecord) and c.ok]
    chars = sum(len(c.prompt_text) for c in calls)
    per_token = chars / sum(c.prompt_tokens for c in calls)      # the sim counts chars / 4
    prefill = sum(c.prompt_n for c in calls) / (sum(c.prompt_ms for c in calls) / 1e3)
    decode = sum(c.predicted_n for c in calls) / (sum(c.predicted_ms for c in calls) / 1e3)
    out = [c.predicted_n for c in calls]
    return SimProfile(prefill_tps=prefill * per_token / 4, decode_tps=decode,
                      time_scale=scale, context_tokens=0,
                      output_mean_tokens=float(np.mean(out)), output_sigma=0.05,
                      runaway_share=sum(c.finish_reason == "length" for c in calls) / len(calls),
                      malformed_share=0.0, n_ctx=131072)


def sim_server(profile: SimProfile, slots: int, log: Path):
    proc = spawn([sys.executable, "-m", "dualpath.sim", "--slots", str(slots), "--profile",
                  profile.model_dump_json(), "--log-file", str(log)],
                 stdout=subprocess.PIPE, text=True)
    return proc, wait_ready("bench", proc, 30.0)


def line(name: str, r: dict) -> str:
    return (f"{name:>15}: {r['calls']} calls ({r['failed']} failed), makespan "
            f"{r['makespan_s']:.1f} s, ratio {r['ratio']:.3f}, occupancy (server log) "
            f"{r['occupancy']:.4f}, idle gaps median {r['gap_median_ms']:.1f} ms p90 "
            f"{r['gap_p90_ms']:.1f} ms, cached share {r['cached_share']:.3f}")


async def main(a: argparse.Namespace) -> None:
    market = SyntheticMarket(7, n_tickers=a.tickers)
    night = market.nights(1)[0]

    docs = {t: filler(t, a.docs_kb) for t in market.tickers} if a.docs_kb else {}

    def inputs(unit: Unit) -> UnitInput:
        h = market.history(unit.ticker, night, a.history_days)
        return UnitInput(unit.ticker, unit.draw, night, tuple(zip(h["date"], h["adj_close"])),
                         docs.get(unit.ticker))

    units = draw_major(market.tickers, 1)
    real = None
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        profile = SimProfile(time_scale=a.time_scale)
        if a.gpu:
            profile = GPU.model_copy(update={"time_scale": a.time_scale})
        if a.real:
            real = await real_arm(a, tmp, units, inputs, night)
            print(f"[real] {line('affinity', real)}", flush=True)
            scale = min(1.0, a.sim_seconds / real["makespan_s"])
            profile = calibrated(real, scale)
            print(f"simulated at the real run's speeds: prefill {profile.prefill_tps:.0f} "
                  f"(chars/4)/s, decode {profile.decode_tps:.1f} tok/s, output mean "
                  f"{profile.output_mean_tokens:.0f} tokens, clock x{scale:.3f}", flush=True)
        results: dict[str, list[dict]] = {n: [] for n in a.arms}
        for rnd in range(a.rounds):       # arms interleaved, so drift hits all alike
            for name in a.arms:
                log = tmp / f"sim-{rnd}-{a.arms.index(name)}.log"
                arm = ARMS[name] or {}
                proc, url = sim_server(profile.model_copy(
                    update={"cache_ram": arm.get("ram", True)}), a.slots, log)
                try:
                    r = await run_arm(name, url, log, a, units, inputs, night,
                                      profile.time_scale, "sim")
                finally:
                    stop_process(proc)
                results[name].append(r)
                print(f"[{rnd + 1}/{a.rounds}] {line(name, r)}", flush=True)
    keys = ("makespan_s", "ratio", "occupancy", "cached_share", "gap_median_ms")
    med = {n: {k: statistics.median(r[k] for r in rs) for k in keys} for n, rs in results.items()}
    print(f"medians over {a.rounds} round(s):")
    for n, m in med.items():
        print(f"  {n:>15}: makespan {m['makespan_s']:.1f} s, ratio {m['ratio']:.3f}, occupancy "
              f"{m['occupancy']:.4f}, cached share {m['cached_share']:.3f}")
    d = med[a.arms[0]]
    tail = f" real_occupancy={real['occupancy']:.4f}" if real else " real_occupancy=nan"
    if a.gpu:
        tail += f" gpu_occupancy_measured={GPU_OCCUPANCY} (H200, bench/gpu/README.md, runs q0/q0b)"
    nv = med.get("naive")
    if nv:
        tail += f" naive_makespan_ratio={nv['ratio']:.4f} naive_occupancy={nv['occupancy']:.4f}"
    print(f"occupancy={d['occupancy']:.4f} makespan_ratio={d['ratio']:.4f}{tail}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tickers", type=int, default=8)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--history-days", type=int, default=60)
    ap.add_argument("--time-scale", type=float, default=0.05,
                    help="simulated clock without the real arm (with it: set from its wall)")
    ap.add_argument("--sim-seconds", type=float, default=40.0,
                    help="with the real arm: the simulated arms' clock is compressed to "
                         "about this makespan")
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds of every arm")
    ap.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS),
                    help="arms to run (the first is the one on the last line)")
    ap.add_argument("--no-real", dest="real", action="store_false",
                    help="skip the real llama-server arm")
    ap.add_argument("--docs-kb", type=int, default=0, help="a document of this size per ticker")
    ap.add_argument("--gpu", action="store_true", help="the H200 workload of bench/gpu "
                    "(16 tickers, 20 KB documents, 192 tokens out) on a simulated server at its "
                    "measured speeds, against the occupancy measured there (no real CPU arm)")
    ap.add_argument("--ctx", type=int, default=4096, help="real server: context per slot")
    ap.add_argument("--threads", type=int, default=1, help="real server: threads")
    a = ap.parse_args()
    if a.gpu:
        a.real, a.tickers, a.docs_kb, a.max_tokens = False, 16, a.docs_kb or 20, 192
        a.time_scale = a.time_scale if a.time_scale != 0.05 else 0.5
    if a.arms[0] != "affinity" and a.real:
        ap.error("the real arm runs the default arm: put 'affinity' first or pass --no-real")
    asyncio.run(main(a))
    sys.exit(0)
