"""Prefix-cache benchmark: the same tickers scored with and without prefix affinity on a real
llama-server (the CPU build the integration tests use, Gemma 3 270M), arms interleaved.

Both arms run the built-in 17-call pipeline through dualpath's own scheduler and client, with
the same seeds, slots and queue depth; only `prefix_affinity` differs (each unit owning a slot,
`id_slot` on every call, vs whichever slot is free). The workload keeps the real shape's ratio
of prompt to output tokens (about 6.6 : 1 over a night) at a size two CPU cores can serve:
the ticker context is `--history-days` of closes and answers stop at `--max-tokens` (the
defaults give ~7.5 : 1 with Gemma's tokenizer; `--max-tokens 160` gives ~12.6 : 1, a
prompt-heavier night, where affinity gains more). Each run prints its ratio.

Every run gets a freshly started server, so no run is served the identical prompts of the
run before it from the slots' caches or llama-server's RAM prompt cache.

Per-ticker seconds are on the throughput basis (an arm's wall clock / its tickers), the basis
of the comparison; the latency basis (median unit seconds) is printed beside it, since pinning
a unit to one slot runs its parallel calls one after another. Cached share = cached prompt
tokens / prompt tokens, from the server's own per-call timings (cache_n, prompt_n).

Last line: `prefix_speedup=... cached_share_on=... cached_share_off=...` where prefix_speedup
is per-ticker seconds (throughput basis) on / off, median over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dualpath.client import PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.launcher import LaunchedServer, gemma_model, llama_server_binary
from dualpath.market import SyntheticMarket
from dualpath.pipeline import UnitInput, builtin
from dualpath.records import CallRecord, UnitResult
from dualpath.scheduler import PathRunner, Unit, draw_major
from dualpath.transport import AiohttpTransport


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def arm(url: str, pin: bool, units: list[Unit], inputs, night, slots: int,
              max_tokens: int) -> dict:
    path = ServingPath(engine="llama.cpp", base_url=url, model="gemma", slots=slots,
                       stream=True)
    records: list = []
    async with AiohttpTransport(slots + 2) as http:     # the transport nights use
        client = PathClient("bench", path, Sampling(max_tokens=max_tokens), http,
                            f"bench/{'on' if pin else 'off'}")
        runner = PathRunner(client, builtin, night, slots=slots, sink=records.append,
                            inputs=inputs, base_seed=1, queue_depth=1, pin_slots=pin)
        t0 = time.monotonic()
        run = await runner.run_units(units)
        wall = time.monotonic() - t0
    calls = [r for r in records if isinstance(r, CallRecord)]
    if not run.complete or not all(c.ok for c in calls):
        failed = [f"{c.agent}#{c.call_seq}: {c.error_kind}: {c.error_detail}"
                  for c in calls if not c.ok]
        raise SystemExit(f"arm {'on' if pin else 'off'} incomplete: {run.outcomes}; "
                         f"failed calls: {failed}")
    cached = sum(c.cache_n or 0 for c in calls)
    fresh = sum(c.prompt_n or 0 for c in calls)
    units_s = [r.end_mono - r.start_mono for r in records if isinstance(r, UnitResult)]
    return {"ticker_s": wall / len({u.ticker for u in units}),
            "unit_s": statistics.median(units_s), "cached_share": cached / (cached + fresh),
            "prompt_tokens": cached + fresh,
            "output_tokens": sum(c.predicted_n or 0 for c in calls), "calls": len(calls)}


async def main(a: argparse.Namespace) -> None:
    market = SyntheticMarket(11, n_tickers=a.tickers)
    night = market.nights(1)[0]

    def inputs(unit: Unit) -> UnitInput:
        h = market.history(unit.ticker, night, a.history_days)
        return UnitInput(unit.ticker, unit.draw, night, tuple(zip(h["date"], h["adj_close"])))

    units = draw_major(market.tickers, 1)
    with tempfile.TemporaryDirectory() as tmp:
        model = gemma_model(Path(tmp))
        results: dict[bool, list[dict]] = {True: [], False: []}
        for rnd in range(a.rounds):
            # alternate which arm goes first, so warm-up and drift hit both alike
            for pin in ((True, False) if rnd % 2 == 0 else (False, True)):
                # a freshly started server for every run: the slots' caches and
                # llama-server's RAM prompt cache (--cache-ram) would otherwise serve this
                # run the identical prompts of the run before it
                port = free_port()
                argv = [llama_server_binary(), "-m", model, "--host", "127.0.0.1",
                        "--port", str(port), "-np", str(a.slots), "-c", str(a.ctx * a.slots),
                        "-t", str(a.threads), "--metrics"]
                log = Path(tmp) / f"server-{rnd}-{'on' if pin else 'off'}.log"
                with LaunchedServer(argv, f"http://127.0.0.1:{port}", log,
                                    ready_timeout_s=300) as server:
                    r = await arm(server.base_url, pin, units, inputs, night, a.slots,
                                  a.max_tokens)
                results[pin].append(r)
                print(f"[{rnd + 1}/{a.rounds}] affinity {'on ' if pin else 'off'}: "
                      f"{r['calls']} calls, {r['ticker_s']:.1f} s per ticker (throughput "
                      f"basis), median unit {r['unit_s']:.1f} s (latency basis), cached "
                      f"share {r['cached_share']:.3f}, prompt:output tokens "
                      f"{r['prompt_tokens'] / r['output_tokens']:.1f}:1", flush=True)
    med = {pin: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for pin, rs in results.items()}
    on, off = med[True], med[False]
    print(f"latency basis (median unit seconds) on / off: {on['unit_s'] / off['unit_s']:.3f}")
    print(f"prefix_speedup={on['ticker_s'] / off['ticker_s']:.3f} "
          f"cached_share_on={on['cached_share']:.3f} cached_share_off={off['cached_share']:.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tickers", type=int, default=4)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--history-days", type=int, default=120,
                    help="closes in each prompt's ticker context (~9 tokens a day)")
    ap.add_argument("--max-tokens", type=int, default=320)
    ap.add_argument("--ctx", type=int, default=8192, help="context per slot")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    asyncio.run(main(ap.parse_args()))
    sys.exit(0)
