"""The embedded default: synthetic market + simulated paths, set up for the demo."""

from __future__ import annotations

from datetime import date

import pandas as pd
from rich.progress import Progress

from dualpath.config import Config, load_config, parse_config
from dualpath.market import SyntheticMarket, market_for_nights
from dualpath.night import NightPlan, PriceHistory, score_night, units_for
from dualpath.records import UnitResult
from dualpath.sim.fleet import SimFleet


def demo_config(tickers: int = 100, draws: int = 2, time_scale: float = 2e-4,
                overrides: dict | None = None) -> Config:
    """The embedded demo config, resized and with the simulated clock scaled."""
    from dualpath.cli import demo_config_path
    import tomllib

    data = tomllib.loads(demo_config_path().read_text())
    data["experiment"]["universe"] = data["experiment"]["universe"][:tickers]
    data["experiment"]["draws"] = draws
    for p in data["paths"].values():
        p["sim"]["time_scale"] = time_scale
    for section, values in (overrides or {}).items():
        data.setdefault(section, {}).update(values)
    return parse_config(data, "embedded demo config")


def demo_market(cfg: Config, nights: int) -> SyntheticMarket:
    """The synthetic market long enough for `nights` nights and the longest horizon."""
    return market_for_nights(cfg.market.synthetic_seed, nights, 100, max(cfg.experiment.horizons),
                             cfg.market.synthetic_start)


async def run_demo_in_memory(nights: int, tickers: int, draws: int, time_scale: float,
                             bars: Progress | None = None) -> pd.DataFrame:
    """Score `nights` synthetic nights on both simulated paths; per-path speed summary."""
    from evals.speed import speed_summary

    cfg = demo_config(tickers, draws, time_scale)
    market = demo_market(cfg, nights)
    history = PriceHistory(market.prices())
    units_rows, runs_rows = [], []
    with SimFleet(cfg) as fleet:
        for night in market.nights(nights, max(cfg.experiment.horizons)):
            results: dict[str, list[UnitResult]] = {p: [] for p in cfg.paths}
            tasks = {}
            if bars is not None:
                tasks = {p: bars.add_task(f"{p} {night}", total=len(units_for(cfg)), calls=0)
                         for p in cfg.paths}

            def progress(path: str, done: int, total: int, calls: int) -> None:
                if bars is not None:
                    bars.update(tasks[path], completed=done, calls=calls)

            plans = [NightPlan(p, fleet.urls[p], units_for(cfg),
                               sink=lambda r, p=p: results[p].append(r)
                               if isinstance(r, UnitResult) else None) for p in cfg.paths]
            runs = await score_night(cfg, night, history, plans, progress=progress)
            for p, run in runs.items():
                runs_rows.append({"run_id": f"{night}/{p}", "path": p, "night": night,
                                  "wall_s": run.end_mono - run.start_mono,
                                  "time_scale": cfg.paths[p].sim.time_scale,
                                  "calls": run.calls, "runaway": run.runaway,
                                  "graded": run.units_graded})
                units_rows += [{"run_id": f"{night}/{p}", "path": p,
                                "seconds": u.seconds} for u in results[p]]
    units, runs = pd.DataFrame(units_rows), pd.DataFrame(runs_rows)
    speed = speed_summary(units, runs)
    extra = runs.set_index("run_id")[["calls", "runaway", "graded"]]
    return speed.join(extra, on="run_id").drop(columns=["run_id"])
