"""One home for computing the metric tables of an experiment: which pair, which margin,
level and primary horizon (the frozen plan's when there is one, else the config's
[comparison]), and the frames from the warehouse. The CLI's `metrics`, the weekly report
and the demo all call this."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import pandas as pd

from dualpath.config import Config
from dualpath.prereg import Plan
from dualpath.evals.report import Metrics, compute_metrics
from dualpath.warehouse.db import reader
from dualpath.warehouse.frames import calls_frame, prices_frame, runs_frame, units_frame


@dataclass(frozen=True)
class Question:
    """What the comparison asks: candidate vs baseline within a margin at a horizon."""

    baseline: str | None
    candidate: str | None
    margin: float
    alpha: float
    primary_horizon: int


def question(cfg: Config, plan: Plan | None = None, paths: list[str] | None = None) -> Question:
    """The plan's question when a plan is frozen; else the config's, with defaults."""
    horizons = cfg.experiment.horizons
    if plan is not None:
        return Question(plan.baseline, plan.candidate, plan.primary.margin, plan.primary.alpha,
                        plan.primary.horizon)
    names = paths or list(cfg.paths)
    c = cfg.comparison
    base = c.baseline if c.baseline in names else ("main" if "main" in names else names[0])
    rest = [n for n in names if n != base]
    cand = c.candidate if c.candidate in rest else ("backup" if "backup" in rest else
                                                    (rest[0] if rest else None))
    primary = c.primary_horizon or next((h for h in sorted(horizons) if h > 1), horizons[0])
    return Question(base, cand, c.margin, c.alpha, primary)


def compute(cfg: Config, q: Question, units: pd.DataFrame, calls: pd.DataFrame,
            runs: pd.DataFrame, prices: pd.DataFrame, sessions=None,
            tests: dict | None = None) -> Metrics:
    """Every metric table for these frames (``tests``: the plan's test per horizon)."""
    pair = (q.baseline, q.candidate) if q.candidate else None
    return compute_metrics(units, calls, runs, prices, cfg.experiment.horizons, pair,
                           seed=cfg.sampling.base_seed, margin=q.margin, alpha=q.alpha,
                           primary_horizon=q.primary_horizon, sessions=sessions, tests=tests)


def sessions_for(cfg: Config, prices: pd.DataFrame) -> list | None:
    """The exchange's sessions over the priced range: forward returns step over these, so a
    stray price on a holiday cannot shift every ticker's horizon."""
    from dualpath.calendar import MarketCalendar

    if not len(prices):
        return None
    cal = MarketCalendar.from_settings(cfg.market)
    lo = max(pd.Timestamp(prices["date"].min()).date(), cal.first)
    hi = min(pd.Timestamp(prices["date"].max()).date(), cal.last)
    return cal.sessions(lo, hi) if lo <= hi else None


def load_frames(cfg: Config, paths: list[str] | None = None) -> dict:
    """The experiment's frames, its frozen plan and its deviation log, from the warehouse."""
    from dualpath.errors import UserError
    from dualpath.warehouse import plans

    unknown = sorted(set(paths or []) - set(cfg.paths))
    if unknown:
        raise UserError(f"no such path {unknown}; the config's paths are {list(cfg.paths)}")
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        args = (con, cfg.experiment.name, None, paths)
        out = {"units": units_frame(*args), "calls": calls_frame(*args),
               "runs": runs_frame(*args), "prices": prices_frame(con),
               "all_runs": runs_frame(con, cfg.experiment.name) if paths else None,
               "frozen": plans.current(con, cfg.experiment.name),
               "deviations": plans.deviation_log(con, cfg.experiment.name),
               "scored": plans.scoring_times(con, cfg.experiment.name)}
    if out["all_runs"] is None:
        out["all_runs"] = out["runs"]
    if not len(out["runs"]):
        raise UserError(f"no runs of experiment {cfg.experiment.name!r}"
                        + (f" on {paths}" if paths else "") + " in the warehouse")
    return out


def load_metrics(cfg: Config, paths: list[str] | None = None, since: date | None = None,
                 until: date | None = None) -> Metrics:
    """Every metric table of the experiment, from the warehouse: under a frozen plan over
    exactly the nights the report analyses (`flows.prereg.study`), the label in the notes."""
    from dualpath.errors import UserError
    from dualpath.flows.prereg import study

    frames = load_frames(cfg, paths)
    if since and not (pd.to_datetime(frames["runs"]["night"]).dt.date >= since).any():
        raise UserError(f"no runs of experiment {cfg.experiment.name!r} from {since}"
                        + (f" on {paths}" if paths else "") + " in the warehouse")
    return study(cfg, since, until, paths, frames).metrics


def metadata(cfg: Config, since: date | None = None) -> dict:
    """What a machine-readable metrics export must say about itself."""
    from datetime import datetime, timezone

    from dualpath.warehouse import plans
    from dualpath.warehouse.experiment import config_hashes, night_span

    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        first, last = night_span(con, cfg.experiment.name, since)
        hashes = config_hashes(con, cfg.experiment.name)
        frozen = plans.current(con, cfg.experiment.name)
    q = question(cfg, frozen.plan if frozen else None)
    return {"experiment": cfg.experiment.name, "first_night": first, "last_night": last,
            "config_hashes": hashes, "plan_hash": frozen.plan_hash if frozen else None,
            "question": q.__dict__, "generated_at": datetime.now(timezone.utc).isoformat()}
