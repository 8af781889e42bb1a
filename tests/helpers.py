"""Small real projects for tests: a config on disk, prices imported, simulated paths."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dualpath.config import dump_toml, load_config
from dualpath.demo import demo_config_data, demo_market
from dualpath.sim.fleet import SimFleet
from flows import runner
from warehouse.db import writer
from warehouse.prices import import_prices, validate_prices


def make_project(root: Path, tickers: int = 6, draws: int = 2, nights: int = 2,
                 clock: float = 0.01, **overrides):
    data = demo_config_data(root, tickers, draws, clock)
    for section, values in overrides.items():
        data[section].update(values)
    cfg_path = root / "dualpath.toml"
    cfg_path.write_text(dump_toml(data) + "\n")
    cfg = load_config(cfg_path)
    market = demo_market(cfg, nights)
    raw = market.prices()
    raw = raw[raw["ticker"].isin(cfg.tickers())]
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        import_prices(con, validate_prices(raw, cfg.tickers())[0])
    return cfg_path, cfg, market.nights(nights)


def score_night_plain(cfg, night, urls, stop_after_units: int | None = None):
    """Plan, score into journals (optionally cut short), return the plans."""
    plans = runner.plan_night(cfg, night)
    for p in plans:
        p.base_url, p.how = urls[p.path], "simulated"
    asyncio.run(runner.check_identities(cfg, plans))
    history = runner.price_history(cfg)

    async def go():
        task = asyncio.create_task(runner.score_plans(cfg, night, history,
                                                      [p for p in plans if p.units]))
        if stop_after_units is None:
            return await task
        while True:
            await asyncio.sleep(0.005)
            done = sum(len(runner.read_journal(p.journal).units) for p in plans)
            if done >= stop_after_units:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                return None

    asyncio.run(go())
    return plans


__all__ = ["make_project", "score_night_plain", "SimFleet"]
