"""What every metric is computed from, built once per study (`evals.report.compute_metrics`).

A metric is one function of `MetricInputs` declared with `evals.registry.table(...,
kind="metric")`; the frames follow the contracts in the package docstring. Each is
derived once here (scores, forward returns, nightly RankIC, per-run speed) and never again
by a metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class MetricInputs:
    """One study's inputs, shared by every metric."""

    usable: pd.DataFrame              # units of complete, uncontaminated runs
    scores: pd.DataFrame              # mean score per path x night x ticker
    returns: pd.DataFrame             # forward returns per night x ticker x horizon
    nightly: pd.DataFrame             # RankIC per path x night x horizon
    calls: pd.DataFrame
    runs: pd.DataFrame
    per_run: pd.DataFrame             # `evals.speed.run_speed`: seconds per run
    horizons: list[int] = field(default_factory=list)
    pair: tuple[str, str] | None = None      # (baseline, candidate)
    primary: int | None = None        # the primary horizon
    margin: float = 0.03
    alpha: float = 0.05
    tests: dict | None = None         # the planned `evals.compare.DeltaTest` per horizon
    power: float = 0.8
