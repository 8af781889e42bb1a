"""The embedded default: the demo config and its synthetic market."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

from dualpath.config import Config
from dualpath.market import SyntheticMarket, market_for_nights


def example_config_path() -> Path:
    """The real two-path setup shipped inside the package (`dualpath init`)."""
    return Path(__file__).with_name("example.toml")


def demo_config_path() -> Path:
    """The embedded default config shipped inside the package."""
    return Path(__file__).with_name("demo.toml")


def demo_config_data(root: Path, tickers: int, draws: int, clock: float = 1.0) -> dict:
    """The embedded demo config, resized, with storage under `root` and the clocks x `clock`."""
    data = tomllib.loads(demo_config_path().read_text())
    data["experiment"]["universe"] = data["experiment"]["universe"][:tickers]
    data["experiment"]["draws"] = draws
    data["warehouse"] = {"path": "warehouse.duckdb", "runs_dir": "runs"}
    for p in data["paths"].values():
        p["sim"]["time_scale"] = p["sim"].get("time_scale", 1.0) * clock
    return data


def demo_market(cfg: Config, nights: int) -> SyntheticMarket:
    """The synthetic market long enough for `nights` nights and the longest horizon."""
    return market_for_nights(cfg.market.synthetic_seed, nights, 100, max(cfg.experiment.horizons),
                             cfg.market.synthetic_start)


# `dualpath demo` picks its clock from the CPU this machine gives it when it starts (unless
# --clock is given). The harness keeps a simulated path's slots busy only while its own work per
# call (client, journal, both simulated servers, Prefect, all on this machine) stays small
# against the call's compressed service; a busy machine stretches that work, so the clock
# slows in proportion. Measured on 2 cores, 20 nights of 20 tickers x 2 draws: at a load of ~6
# (a spinner got 0.64-0.93 of a core) --clock 2.5 kept the backup's slots 76-92% busy and the
# slowdown within 1% of the served time model, in 273 s; at 0.3 the same machine starved
# every run (busy < 50%). With its lean Prefect server, at a load of ~6-7: --clock 2.5, 258 s
# (241 s of it the nights: 20 x 10.4 s of compressed backup service is the floor), no run
# starved, +0.5% from the time model; at ~8-11, 341 s, none starved, +5.7%; at ~18, 17 of
# the first 18 runs starved: past a load of ~10 on 2 cores the ceiling is not enough.
# With the report's power integrals in plain floats, both paths' nights equally long (main's
# time_scale 0.0036) and Prefect's server and the simulated servers started beside the
# demo's own set-up, its fixed cost (all but the nights) fell from ~133 s to ~17 s at a load
# of ~8-10: --clock 2.5, 228 s (211 s the nights; 20 x ~8.9 s of compressed service is now
# the floor), none starved, -0.8%; at a load of ~8-14 (4 busy processes on others' ~10),
# 505 s (414 s the nights), 5 of 40 starved, +9.7% (it was 1,047 s, +12.8%); with 8 on
# others' ~10 (a load of ~14-18), 897 s (729 s the nights), 32 of 40 starved, +8.8%.
# CPU per night of 20 tickers x 2 draws (1,360 calls), idle 2 cores, from the difference of a
# 5-night and a 2-night demo at --clock 0.6 (each process's utime + stime from /proc): the
# harness's process 1.57 s (~1.2 ms a call: the night's event loop ~1.35 s with its aiohttp
# posts, the scheduler, Prefect's flow and task runs and the nightly ingest, its two journal
# writers the rest; they took 0.57 s before they gathered 50 ms of records a batch), the main
# simulator 0.54 s (0.8 ms a call), the backup's 0.35 s (0.5 ms), Prefect's server 0.18 s:
# ~2.65 s in all (medians of 3; 3.1 s before). Fixed: the harness ~5.5 s, Prefect's server
# ~3 s, each simulator ~0.5 s.
CLOCK_PER_SHARE = 1.2          # clock = this / the measured share of a core
CLOCK_RANGE = (0.6, 2.5)       # the ceiling keeps 20 nights of 20 tickers within ~5 min


def cpu_share(seconds: float = 1.0) -> float:
    """The share of one core this process got while it spun for `seconds` (1.0 on an idle
    machine, ~2/(n+1) with n other busy processes on 2 cores)."""
    w0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - w0 < seconds:
        sum(range(2000))
    return min(1.0, (time.process_time() - c0) / max(time.perf_counter() - w0, 1e-9))


def machine_share(seconds: float = 1.0) -> float:
    """The share of a core the demo can count on: the smaller of a spinner's (`cpu_share`)
    and what the 1-minute load average leaves (cores ÷ (load + 1)). Either alone misjudged a
    shared machine: at a load of 7.7 on 2 cores a 1 s spinner once got a whole core (others'
    work comes in bursts), and the load average lags a load that has just started."""
    import os

    cores = os.cpu_count() or 1
    return min(cpu_share(seconds), min(1.0, cores / (os.getloadavg()[0] + 1)))


def auto_clock(share: float) -> float:
    """The demo's clock for a measured `share` of a core, rounded to a tenth."""
    lo, hi = CLOCK_RANGE
    return round(min(hi, max(lo, CLOCK_PER_SHARE / max(share, 1e-3))), 1)
