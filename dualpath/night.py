"""Score one night on every path at once: the core entry point the flows call.

`score_night` opens one HTTP client, builds a `PathRunner` per path and runs them
concurrently. Records go to a per-path sink; what is already done (for a resumed night) is
passed in, so nothing is scored twice.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from datetime import date
from typing import Callable

import httpx
import pandas as pd

from dualpath.client import PathClient
from dualpath.config import Config
from dualpath.errors import ConfigError, DataError
from dualpath.pipeline import Pipeline, UnitInput, load_pipeline, read_documents
from dualpath.scheduler import PathRun, PathRunner, Progress, Sink, Unit, draw_major


class PriceHistory:
    """Adjusted closes by ticker, served to prompts strictly up to the night (no look-ahead)."""

    def __init__(self, prices: pd.DataFrame):
        need = {"ticker", "date", "adj_close"}
        if not need <= set(prices.columns):
            raise DataError(f"prices need columns {sorted(need)}, got {sorted(prices.columns)}")
        frame = prices[["ticker", "date", "adj_close"]].copy()
        frame["date"] = pd.to_datetime(frame["date"]).dt.date
        self._by_ticker = {t: g.sort_values("date") for t, g in frame.groupby("ticker")}

    def closes(self, ticker: str, night: date, days: int) -> tuple[tuple[date, float], ...]:
        g = self._by_ticker.get(ticker)
        if g is None:
            raise DataError(f"no prices for ticker {ticker}; import prices that cover the universe")
        g = g[g["date"] <= night].tail(days)
        if g.empty:
            raise DataError(f"no price for {ticker} on or before {night}; score a night the "
                            "price data covers (--date YYYY-MM-DD) or import newer prices")
        return tuple(zip(g["date"], g["adj_close"].astype(float)))


def run_id_for(experiment: str, night: date, path: str) -> str:
    """Runs are keyed by experiment, night and path: a rerun of a night resumes its run."""
    return f"{experiment}/{night.isoformat()}/{path}"


@dataclass
class NightPlan:
    """What to score on one path tonight."""

    path: str
    base_url: str
    units: list[Unit]
    sink: Sink
    attempts: dict[Unit, int] = field(default_factory=dict)
    on_client: Callable[[PathClient], None] | None = None


def units_for(cfg: Config) -> list[Unit]:
    """All units of a night in draw-major order."""
    return draw_major(cfg.tickers(), cfg.experiment.draws)


def _api_key(cfg: Config, name: str) -> str | None:
    env = cfg.paths[name].api_key_env
    if env is None:
        return None
    key = os.environ.get(env)
    if not key:
        raise ConfigError(f"paths.{name}.api_key_env = {env!r}, but ${env} is not set")
    return key


async def score_night(cfg: Config, night: date, history: PriceHistory, plans: list[NightPlan],
                      *, progress: Progress | None = None,
                      pipeline: Pipeline | None = None,
                      transport: httpx.AsyncBaseTransport | None = None) -> dict[str, PathRun]:
    """Score every plan's units concurrently; returns each path's counts."""
    pipeline = pipeline or load_pipeline(cfg.pipeline.name)
    docs_dir = cfg.resolve(cfg.pipeline.documents_dir) if cfg.pipeline.documents_dir else None
    days = cfg.pipeline.history_days
    slots_total = sum(cfg.paths[p.path].slots for p in plans)
    limits = httpx.Limits(max_connections=slots_total + 8, max_keepalive_connections=slots_total + 8)
    docs_cache: dict[str, str | None] = {}

    def inputs(unit: Unit) -> UnitInput:
        if unit.ticker not in docs_cache:
            docs_cache[unit.ticker] = read_documents(docs_dir, unit.ticker)
        return UnitInput(unit.ticker, unit.draw, night, history.closes(unit.ticker, night, days),
                         docs_cache[unit.ticker])

    async with httpx.AsyncClient(limits=limits, transport=transport) as http:
        runners = []
        for plan in plans:
            sp = cfg.paths[plan.path]
            client = PathClient(plan.path, sp, cfg.sampling, http,
                                run_id_for(cfg.experiment.name, night, plan.path),
                                base_url=plan.base_url, api_key=_api_key(cfg, plan.path))
            if plan.on_client:
                plan.on_client(client)
            runner = PathRunner(client, pipeline, night, slots=sp.slots, sink=plan.sink,
                                inputs=inputs, base_seed=cfg.sampling.base_seed,
                                seeded=cfg.sampling.seed_policy == "per-draw",
                                progress=progress, attempts=plan.attempts)
            runners.append(runner.run_units(plan.units))
        runs = await asyncio.gather(*runners)
    return {plan.path: run for plan, run in zip(plans, runs)}
