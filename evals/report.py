"""Every metric table from the four input frames, in one call (CLI, demo, weekly report)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from evals.agreement import grade_distribution, self_agreement
from evals.compare import compare_ic, cross_path_agreement
from evals.rankic import nightly_rank_ic, rank_ic_summary
from evals.returns import forward_returns
from evals.scores import ticker_scores, usable_units
from evals.speed import path_speed, run_speed


@dataclass
class Metrics:
    """All tables; each a DataFrame ready to print."""

    nightly_ic: pd.DataFrame
    rank_ic: pd.DataFrame
    comparison: pd.DataFrame
    cross_path: pd.DataFrame
    self_agreement: pd.DataFrame
    self_agreement_nightly: pd.DataFrame
    grades: pd.DataFrame
    speed_runs: pd.DataFrame
    speed: pd.DataFrame
    notes: list[str] = field(default_factory=list)


def compute_metrics(units: pd.DataFrame, calls: pd.DataFrame, runs: pd.DataFrame,
                    prices: pd.DataFrame, horizons: list[int], pair: tuple[str, str] | None,
                    seed: int = 20260101, delta: float = 0.02) -> Metrics:
    """Metrics over usable units (complete runs, uncontaminated); partial runs only in speed."""
    notes = []
    usable = usable_units(units)
    dropped = len(units) - len(usable)
    if dropped:
        notes.append(f"{dropped} unit(s) of partial/failed runs or with contaminated calls "
                     "were left out of every quality metric")
    scores = ticker_scores(usable)
    nights = sorted(scores["night"].unique()) if len(scores) else []
    returns = forward_returns(prices, nights, horizons) if nights and len(prices) else \
        pd.DataFrame(columns=["night", "ticker", "horizon", "fwd_return", "status"])
    nightly = nightly_rank_ic(scores, returns) if len(scores) else \
        pd.DataFrame(columns=["night", "path", "horizon", "ic", "n_tickers", "status"])
    summary = rank_ic_summary(nightly) if len(nightly) else pd.DataFrame()
    comparison, cross = pd.DataFrame(), pd.DataFrame()
    if pair and len(nightly):
        comparison = pd.DataFrame([compare_ic(nightly, pair[0], pair[1], h, seed=seed, delta=delta)
                                   for h in horizons])
        cross = pd.DataFrame([{"a": pair[0], "b": pair[1],
                               **cross_path_agreement(scores, *pair)}])
    agree = pd.DataFrame([{"path": p, **self_agreement(g)} for p, g in usable.groupby("path")])
    agree_n = pd.DataFrame([{"path": p, "night": n, **self_agreement(g)}
                            for (p, n), g in usable.groupby(["path", "night"])])
    grades = grade_distribution(usable) if len(usable) else pd.DataFrame()
    per_run = run_speed(calls, units, runs) if len(runs) and len(calls) else pd.DataFrame()
    speed = path_speed(per_run) if len(per_run) else pd.DataFrame()
    return Metrics(nightly, summary, comparison, cross, agree, agree_n, grades, per_run, speed,
                   notes)
