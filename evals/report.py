"""Every metric table from the four input frames, in one call (CLI, demo, weekly report):
the inputs are built once (`evals.inputs.MetricInputs`) and every registered metric
(`evals.registry.metrics`) computed from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from dualpath.evals.draws import changes, described
from dualpath.evals.energy import run_energy
from dualpath.evals.compare import paired_delta_ic
from dualpath.evals.icr_plan import study_nights
from dualpath.evals.inputs import MetricInputs
from dualpath.evals.interchange import LIMIT_SHARE, interchange
from dualpath.evals.rankic import NIGHTLY, nightly_rank_ic
from dualpath.evals.registry import metrics
from dualpath.evals.returns import COLUMNS, forward_returns
from dualpath.evals.scores import ticker_scores, usable_units
from dualpath.evals.serving import missing, unmeasured
from dualpath.evals.speed import run_speed


@dataclass
class Metrics:
    """Every metric table by its key (`tables`, read as attributes: ``m.rank_ic``; a key
    with no frame reads as an empty one), and the frames and objects the headline reads."""

    nightly_ic: pd.DataFrame
    speed_runs: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    nightly_delta: pd.DataFrame = field(default_factory=pd.DataFrame)
    verdict: object = None            # evals.verdict.PrimaryVerdict (set by flows.prereg.study)
    energy_runs: pd.DataFrame = field(default_factory=pd.DataFrame)   # evals.energy.run_energy
    interchange: object = None        # evals.interchange.Interchange of the pair's grades
    interchange_planned: bool = False  # its limit is the frozen plan's (set by flows.prereg)
    interchange_sequential: dict | None = None   # the plan's group-sequential verdict
    interchange_nights: object = None  # evals.icr_plan.NightsPlan from these nights' grades
    serving_missing: list[str] = field(default_factory=list)  # a line per path without a row
    serving_unmeasured: list[str] = field(default_factory=list)  # a line per figure no path has

    def __getattr__(self, name: str) -> pd.DataFrame:
        # only reached where no field has the name: a metric table, by its registered key
        if name.startswith("__") or name == "tables":
            raise AttributeError(name)
        from dualpath.evals.registry import metrics

        if name in self.tables or name in metrics():
            return self.tables.get(name, pd.DataFrame())
        raise AttributeError(f"Metrics has no field or metric table {name!r}")


def default_primary(horizons: list[int]) -> int:
    """The shortest horizon > 1, else the first."""
    return next((h for h in sorted(horizons) if h > 1), horizons[0])


def compute_metrics(units: pd.DataFrame, calls: pd.DataFrame, runs: pd.DataFrame,
                    prices: pd.DataFrame, horizons: list[int], pair: tuple[str, str] | None,
                    seed: int = 20260101, *, margin: float = 0.03, alpha: float = 0.05,
                    primary_horizon: int | None = None,
                    sessions: Sequence | None = None, tests: dict | None = None,
                    power: float = 0.8, interchange_limit: float = LIMIT_SHARE) -> Metrics:
    """Metrics over usable units (complete runs, uncontaminated); partial runs only in speed.

    ``pair``: (baseline, candidate); ΔIC = IC(candidate) − IC(baseline), judged non-inferior
    at ``primary_horizon`` when its one-sided (1-alpha) lower bound exceeds −margin.
    ``sessions``: exchange session dates for forward returns (else dates with any price).
    ``tests``: the planned `evals.compare.DeltaTest` per horizon (test, margin, α, assumed sd);
    ``power``: the power the minimum detectable ΔIC is stated at;
    ``interchange_limit``: the share of main's draw-to-draw agreement the candidate's grades
    must keep to be interchangeable (`evals.interchange`).
    ``seed`` is kept for callers; no table draws random numbers.
    """
    notes = []
    usable = usable_units(units)
    dropped = len(units) - len(usable)
    if dropped:
        notes.append(f"{dropped} unit(s) of partial/failed runs or with contaminated calls "
                     "were left out of every quality metric")
    scores = ticker_scores(usable)
    nights = sorted(scores["night"].unique()) if len(scores) else []
    returns = forward_returns(prices, nights, horizons, sessions) if nights and len(prices) \
        else pd.DataFrame(columns=COLUMNS)
    if returns.attrs.get("off_session_rows"):
        notes.append(f"{returns.attrs['off_session_rows']} price row(s) on non-session dates "
                     "were ignored")
    nightly = nightly_rank_ic(scores, returns) if len(scores) else pd.DataFrame(columns=NIGHTLY)
    per_run = run_speed(calls, units, runs) if len(runs) and len(calls) else pd.DataFrame()
    primary = (primary_horizon if primary_horizon in horizons else default_primary(horizons)) \
        if horizons else None
    inputs = MetricInputs(usable, scores, returns, nightly, calls, runs, per_run,
                          list(horizons), pair, primary, margin, alpha, tests, power)
    # every registered metric, each from the same inputs (`evals.registry.metrics`)
    tables = {k: spec.measure(inputs) for k, spec in metrics().items()
              if spec.measure is not None}
    delta = paired_delta_ic(scores, returns, pair[0], pair[1]) if pair and len(nightly) \
        else pd.DataFrame()
    inter = interchange(usable, pair[0], pair[1], interchange_limit, alpha) \
        if pair and len(usable) else None
    m = Metrics(nightly, per_run, tables, notes, delta, interchange=inter)
    steps = changes(per_run, tuple(sorted(per_run["path"].unique()))) if len(per_run) else {}
    if steps and len(tables.get("draws", pd.DataFrame())):
        notes.append(f"draws changed mid-study ({described(steps)}): the draws table "
                     "measures each k on the nights scored with at least k draws")
    m.interchange_nights = study_nights(usable, inter)
    m.energy_runs = run_energy(runs, per_run) if len(per_run) else pd.DataFrame()
    m.serving_missing = missing(per_run)
    m.serving_unmeasured = unmeasured(tables.get("serving", pd.DataFrame()))
    return m
