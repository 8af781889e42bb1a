"""The embedded default: synthetic market + simulated paths, run through the nightly flow."""

from __future__ import annotations

import asyncio
import shutil
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dualpath.config import Config, dump_toml, load_config, parse_config
from dualpath.market import SyntheticMarket, market_for_nights
from dualpath.sim.fleet import SimFleet


def demo_config_data(root: Path, tickers: int, draws: int, clock: float = 1.0) -> dict:
    """The embedded demo config, resized, with storage under `root` and the clocks x `clock`."""
    from dualpath.cli import demo_config_path

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


@dataclass
class DemoResult:
    config: Path
    warehouse: Path
    totals: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def run_demo(root: Path, nights: int, tickers: int, draws: int, clock: float,
             bars=None, path_bars=None) -> DemoResult:
    """Fresh demo folder, prices imported, then `nights` nights through the nightly flow."""
    from flows.nightly import nightly
    from flows.runner import plan_night, set_progress
    from warehouse.db import reader, writer
    from warehouse.prices import import_prices, validate_prices
    from warehouse.queries import path_totals

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    cfg_path = root / "dualpath.toml"
    cfg_path.write_text("# written by `dualpath demo`\n"
                        + dump_toml(demo_config_data(root, tickers, draws, clock)) + "\n")
    cfg = load_config(cfg_path)
    market = demo_market(cfg, nights)
    raw = market.prices()
    raw = raw[raw["ticker"].isin(cfg.tickers())]
    prices, warnings = validate_prices(raw, cfg.tickers(), "synthetic market")
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        import_prices(con, prices)
    nights_list = market.nights(nights, max(cfg.experiment.horizons))
    overall = bars.add_task("nights", total=nights, what="") if bars else None
    t0 = time.monotonic()

    async def all_nights() -> None:
        for night in nights_list:
            if path_bars is not None:
                path_bars.reset(str(night), list(cfg.paths),
                                {p.path: p.units_planned for p in plan_night(cfg, night)})
                set_progress(path_bars)
            await nightly(str(cfg_path), night, endpoints=fleet.urls)
            if bars is not None:
                bars.update(overall, advance=1, what=f"nights · {time.monotonic() - t0:.0f} s")

    with SimFleet(cfg) as fleet:
        asyncio.run(all_nights())
    set_progress(None)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        totals = path_totals(con, cfg.experiment.name)
    return DemoResult(cfg_path, cfg.resolve(cfg.warehouse.path), totals, warnings)
