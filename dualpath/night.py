"""What one night needs in the core: prices up to the night, the units, a path's scheduler.

`path_runner` builds the `PathRunner` of one path for tonight; records go to the sink the
caller gives (the flow connects it to the path's journal); what is already done (for a
resumed night) is passed in as attempts and left out of the units, so nothing is scored
twice.
"""

from __future__ import annotations

import bisect
import os
from datetime import date

import httpx
import pandas as pd

from dualpath.config import Config
from dualpath.errors import ConfigError, DataError
from dualpath.pipeline import Pipeline, UnitInput, load_pipeline, read_documents
from dualpath.scheduler import PathRunner, Progress, Sink, Unit, draw_major


class PriceHistory:
    """Adjusted closes by ticker, served to prompts strictly up to the night (no look-ahead)."""

    def __init__(self, prices: pd.DataFrame):
        need = {"ticker", "date", "adj_close"}
        if not need <= set(prices.columns):
            raise DataError(f"prices need columns {sorted(need)}, got {sorted(prices.columns)}")
        frame = prices[["ticker", "date", "adj_close"]].copy()
        frame["date"] = pd.to_datetime(frame["date"]).dt.date
        # plain sorted lists, searched by bisection: a night asks ~200 times (every unit),
        # and slicing a frame each time cost ~1 ms of the harness's CPU per unit
        self._by_ticker = {
            t: (g["date"].tolist(), g["adj_close"].astype(float).tolist())
            for t, g in frame.sort_values(["ticker", "date"]).groupby("ticker")}

    def closes(self, ticker: str, night: date, days: int) -> tuple[tuple[date, float], ...]:
        series = self._by_ticker.get(ticker)
        if series is None:
            raise DataError(f"no prices for ticker {ticker}; import prices that cover the universe")
        dates, values = series
        end = bisect.bisect_right(dates, night)
        if end == 0:
            raise DataError(f"no price for {ticker} on or before {night}; score a night the "
                            "price data covers (--date YYYY-MM-DD) or import newer prices")
        start = max(0, end - days)
        return tuple(zip(dates[start:end], values[start:end]))


def run_id_for(experiment: str, night: date, path: str) -> str:
    """Runs are keyed by experiment, night and path: a rerun of a night resumes its run."""
    return f"{experiment}/{night.isoformat()}/{path}"


def units_for(cfg: Config, path: str, tickers: list[str] | None = None) -> list[Unit]:
    """All units of `path` tonight in draw-major order, at the path's own draws (over the
    config's tickers unless given)."""
    return draw_major(cfg.tickers() if tickers is None else tickers, cfg.draws_for(path))


def api_key(cfg: Config, name: str) -> str | None:
    """The path's API key from the environment variable its config names (None: no key)."""
    env = cfg.paths[name].api_key_env
    if env is None:
        return None
    key = os.environ.get(env)
    if not key:
        raise ConfigError(f"paths.{name}.api_key_env = {env!r}, but ${env} is not set; "
                          f"export {env}=... before running")
    return key


def missing_inputs(cfg: Config, history: PriceHistory, night: date,
                   tickers: list[str] | None = None) -> dict[str, str]:
    """Tickers (the config's unless given) that cannot be scored tonight, with why (checked
    before any call is made)."""
    out = {}
    for t in cfg.tickers() if tickers is None else tickers:
        try:
            history.closes(t, night, cfg.pipeline.history_days)
        except DataError as e:
            out[t] = str(e)
    return out


def path_runner(cfg: Config, night: date, path: str, base_url: str, history: PriceHistory,
                http: httpx.AsyncClient, sink: Sink, *, attempts: dict[Unit, int] | None = None,
                progress: Progress | None = None, pipeline: Pipeline | None = None,
                deadline_mono: float | None = None) -> PathRunner:
    """The scheduler of one path tonight, with its client (`runner.client`)."""
    from dualpath.client import PathClient   # its transport's aiohttp: only when scoring

    pipeline = pipeline or load_pipeline(cfg.pipeline.name)
    docs_dir = cfg.resolve(cfg.pipeline.documents_dir) if cfg.pipeline.documents_dir else None
    days = cfg.pipeline.history_days
    docs_cache: dict[str, str | None] = {}

    # a history that keeps its own documents (`dualpath.frozen.FrozenHistory`) serves them
    documents_of = getattr(history, "documents", None) or (
        lambda ticker: read_documents(docs_dir, ticker))

    def inputs(unit: Unit) -> UnitInput:
        if unit.ticker not in docs_cache:
            docs_cache[unit.ticker] = documents_of(unit.ticker)
        return UnitInput(unit.ticker, unit.draw, night, history.closes(unit.ticker, night, days),
                         docs_cache[unit.ticker])

    sp = cfg.paths[path]
    client = PathClient(path, sp, cfg.sampling, http, run_id_for(cfg.experiment.name, night, path),
                        base_url=base_url, api_key=api_key(cfg, path))
    pinned = sp.pins_slots(cfg.experiment.prefix_affinity)
    return PathRunner(client, pipeline, night, slots=sp.slots, sink=sink, inputs=inputs,
                      queue_depth=sp.queue_depth_for(pinned),
                      units_per_slot=sp.server_units_per_slot,
                      pin_slots=pinned,
                      base_seed=cfg.sampling.base_seed,
                      seeded=cfg.sampling.seed_policy == "per-draw", progress=progress,
                      attempts=attempts, deadline_mono=deadline_mono)
