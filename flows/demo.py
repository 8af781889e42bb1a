"""`dualpath demo`: a fresh demo folder, synthetic prices, N nights through the nightly flow."""

from __future__ import annotations

import asyncio
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from dualpath.config import dump_toml, load_config
from dualpath.demo import demo_config_data, demo_market
from dualpath.sim.fleet import SimFleet
from flows.nightly import nightly
from flows.runner import plan_night, set_progress
from warehouse.db import reader, writer
from warehouse.prices import import_prices, validate_prices
from warehouse.queries import path_totals


@dataclass
class DemoResult:
    config: Path
    warehouse: Path
    totals: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def run_demo(root: Path, nights: int, tickers: int, draws: int, clock: float,
             bars=None, path_bars=None) -> DemoResult:
    """Fresh demo folder, prices imported, then `nights` nights through the nightly flow."""
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
