"""Every metric table from the four input frames, in one call (CLI, demo, weekly report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from dualpath.evals.draws import changes, described, run_draws
from dualpath.evals.energy import run_energy

from dualpath.evals.agreement import grade_distribution, self_agreement
from dualpath.evals.compare import compare_paths, cross_path_agreement, paired_delta_ic
from dualpath.evals.icr_plan import study_nights
from dualpath.evals.interchange import LIMIT_SHARE, interchange
from dualpath.evals.rankic import NIGHTLY, nightly_rank_ic, rank_ic_summary
from dualpath.evals.returns import COLUMNS, forward_returns
from dualpath.evals.scores import ticker_scores, usable_units
from dualpath.evals.signal import by_grade, draws_analysis, signal_shape
from dualpath.evals.serving import missing, serving_benchmark, unmeasured
from dualpath.evals.speed import path_speed, run_speed


@dataclass
class Metrics:
    """All tables; each a DataFrame ready to print (verdicts, methods and labels are columns)."""

    nightly_ic: pd.DataFrame
    rank_ic: pd.DataFrame
    comparison: pd.DataFrame
    cross_path: pd.DataFrame
    self_agreement: pd.DataFrame
    grades: pd.DataFrame
    speed_runs: pd.DataFrame
    speed: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    draws: pd.DataFrame = field(default_factory=pd.DataFrame)
    signal_shape: pd.DataFrame = field(default_factory=pd.DataFrame)
    by_grade: pd.DataFrame = field(default_factory=pd.DataFrame)
    nightly_delta: pd.DataFrame = field(default_factory=pd.DataFrame)
    verdict: object = None            # evals.verdict.PrimaryVerdict (set by flows.prereg.study)
    energy_runs: pd.DataFrame = field(default_factory=pd.DataFrame)   # evals.energy.run_energy
    interchange: object = None        # evals.interchange.Interchange of the pair's grades
    interchange_planned: bool = False  # its limit is the frozen plan's (set by flows.prereg)
    interchange_sequential: dict | None = None   # the plan's group-sequential verdict
    interchange_nights: object = None  # evals.icr_plan.NightsPlan from these nights' grades
    serving: pd.DataFrame = field(default_factory=pd.DataFrame)  # evals.serving
    serving_missing: list[str] = field(default_factory=list)  # a line per path without a row
    serving_unmeasured: list[str] = field(default_factory=list)  # a line per figure no path has


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
    summary = rank_ic_summary(nightly, alpha) if len(nightly) else pd.DataFrame()
    comparison, cross, delta = pd.DataFrame(), pd.DataFrame(), pd.DataFrame()
    if pair and len(nightly):
        primary = primary_horizon if primary_horizon in horizons else default_primary(horizons)
        comparison = compare_paths(scores, returns, pair[0], pair[1], horizons, primary,
                                   margin, alpha, tests=tests, power=power)
        delta = paired_delta_ic(scores, returns, pair[0], pair[1])
        cross = pd.DataFrame([{"baseline": pair[0], "candidate": pair[1],
                               **cross_path_agreement(scores, *pair)}])
    # pooled over nights only: a per-night table was computed here on every call (~18% of a
    # study on the seeded warehouse) and read by nothing
    agree = pd.DataFrame([{"path": p, **self_agreement(g)} for p, g in usable.groupby("path")])
    grades = grade_distribution(usable) if len(usable) else pd.DataFrame()
    own = pd.Series(run_draws(runs).to_numpy(), index=runs["run_id"]) if len(runs) else None
    draws = draws_analysis(usable, returns, nightly_ic=nightly, run_draws=own) \
        if len(returns) else pd.DataFrame()
    shape = signal_shape(scores, returns) if len(returns) else pd.DataFrame()
    grade_ret = by_grade(scores, returns) if len(returns) else pd.DataFrame()
    per_run = run_speed(calls, units, runs) if len(runs) and len(calls) else pd.DataFrame()
    speed = path_speed(per_run) if len(per_run) else pd.DataFrame()
    inter = interchange(usable, pair[0], pair[1], interchange_limit, alpha) \
        if pair and len(usable) else None
    m = Metrics(nightly, summary, comparison, cross, agree, grades, per_run, speed,
                notes, draws, shape, grade_ret, delta, interchange=inter)
    steps = changes(per_run, tuple(sorted(per_run["path"].unique()))) if len(per_run) else {}
    if steps and len(draws):
        notes.append(f"draws changed mid-study ({described(steps)}): the draws table "
                     "measures each k on the nights scored with at least k draws")
    m.interchange_nights = study_nights(usable, inter)
    m.energy_runs = run_energy(runs, per_run) if len(per_run) else pd.DataFrame()
    m.serving = serving_benchmark(calls, runs, per_run) if len(per_run) else pd.DataFrame()
    m.serving_missing = missing(per_run)
    m.serving_unmeasured = unmeasured(m.serving)
    return m
