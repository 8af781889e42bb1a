"""Coverage of the slowdown's 95% interval (`evals.speed.slowdown_interval`) by simulation.

Each replicate is a window of nightly log ratios (backup ÷ main s/ticker on the same night):
the true log slowdown plus each path's own noise (sd 0.05 a night in log seconds), and, by
scenario, `independent` nothing more; `drift` an AR(1) component in the backup's nightly log
seconds (φ 0.5, stationary sd 0.07, as large as the two paths' noise together: a backup whose
speed wanders and comes back); `drift08` a slower drift (φ 0.8, sd 0.10: a server that warms
up or a cache that fills over a week) and `drift08_t3` the same with t3 innovations (heavy
tails, scaled to the same sd); `runaways` nights on which the backup's runaways cluster
(probability 0.15 a night, an exponential excess of mean 0.15 in log seconds; the target is
the mean including them). Coverage of the project's interval beside the plain t interval's,
at 5, 10, 20 and 30 paired nights, on 200,000 windows a cell by default (a coverage's
standard error ~0.0005), with the median hi/lo of the interval on the ratio. The intervals are
computed for all windows at once (`ends`) and checked equal to
`evals.speed.slowdown_interval`'s on the first 50 of each cell. `drift_coverage(phi, nights,
sd, ...)` is one cell's coverage; the last line carries `slowdown_drift_coverage` (the worst
over the drift and runaway cells; goal >= 0.92) and `slowdown_drift08_coverage` (the worst at
5 nights, φ 0.8, drift sd 0.07 and 0.10, Gaussian and t3 innovations; goal >= 0.90). Run
through `bench/calibration.py` or alone: `python bench/calibration_speed.py [--reps N]`.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import math

import numpy as np
import pandas as pd
from scipy import fft, stats

from dualpath.evals.drift import critical
from dualpath.evals.speed import drift_df, slowdown_interval

NIGHTS = [5, 10, 20, 30]
SD, RUNAWAY_P, RUNAWAY_MEAN = 0.05, 0.15, 0.15
# scenario -> (φ, drift sd, t3 innovations)
DRIFTS = {"drift": (0.5, 0.07, False), "drift08": (0.8, 0.10, False),
          "drift08_t3": (0.8, 0.10, True)}
SCENARIOS = ["independent", *DRIFTS, "runaways"]
DRIFT08_SDS = (0.07, 0.10)
TRUE = math.log(5.7)


def ar1(rng: np.random.Generator, phi: float, sd: float, shape: tuple, heavy: bool = False):
    """Stationary AR(1) rows of stationary sd `sd`; t3 innovations (unit variance) if heavy."""
    reps, nights = shape
    draw = (lambda: rng.standard_t(3, reps) / math.sqrt(3)) if heavy else \
        (lambda: rng.standard_normal(reps))
    d = np.empty(shape)
    d[:, 0] = sd * draw()
    for t in range(1, nights):
        d[:, t] = phi * d[:, t - 1] + sd * math.sqrt(1 - phi ** 2) * draw()
    return d


def windows(rng: np.random.Generator, scenario: str, nights: int, reps: int) -> tuple:
    """(reps x nights log ratios, the true mean log ratio)."""
    x = TRUE + rng.normal(0, SD, (reps, nights)) - rng.normal(0, SD, (reps, nights))
    if scenario in DRIFTS:
        return x + ar1(rng, *DRIFTS[scenario][:2], (reps, nights), DRIFTS[scenario][2]), TRUE
    if scenario == "runaways":
        hit = rng.random((reps, nights)) < RUNAWAY_P
        return x + hit * rng.exponential(RUNAWAY_MEAN, (reps, nights)), \
            TRUE + RUNAWAY_P * RUNAWAY_MEAN
    return x, TRUE


def covered_t(x: np.ndarray, target: float) -> float:
    n = x.shape[1]
    half = stats.t.ppf(0.975, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
    return float(np.mean(np.abs(x.mean(axis=1) - target) <= half))


def ends(x: np.ndarray) -> np.ndarray:
    """`slowdown_interval`'s (lo, hi) for every window (row) at once: the same DCT-II and
    t quantile, vectorised; `run` checks it against the project's function."""
    n = x.shape[1]
    nu = drift_df(n)
    lam = fft.dct(x, type=2, norm="ortho", axis=1)[:, 1:nu + 1]
    half = critical(n, nu) * np.sqrt((lam ** 2).mean(axis=1) / n)
    return np.stack([x.mean(axis=1) - half, x.mean(axis=1) + half], axis=1)


def run(reps: int, seed: int = 30, check: int = 50) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for scenario in SCENARIOS:
        for n in NIGHTS:
            x, target = windows(rng, scenario, n, reps)
            e = ends(x)
            mine = np.array([slowdown_interval(row)[:2] for row in x[:check]])
            assert np.allclose(mine, e[:check], rtol=0, atol=1e-12), "ends differ"
            rows.append({"scenario": scenario, "nights": n,
                         "coverage": float(np.mean((e[:, 0] <= target) & (target <= e[:, 1]))),
                         "t_coverage": covered_t(x, target),
                         "median_width": float(np.median(np.exp(e[:, 1] - e[:, 0]))),
                         "df": drift_df(n)})
    return pd.DataFrame(rows)


def report(table: pd.DataFrame, reps: int, drift08: float | None = None) -> list[str]:
    """The table, then one key=value line (`drift08`: `drift08_coverage()`, computed here
    when not given)."""
    drift08 = drift08_coverage(reps) if drift08 is None else drift08
    return ["", f"slowdown interval coverage (nominal 0.95; {reps} windows per cell; "
            "median_width = hi/lo of the ratio)",
            table.to_string(index=False, float_format=lambda v: f"{v:.3f}"),
            f"slowdown_drift_coverage={worst_coverage(table):.3f} "
            f"slowdown_drift08_coverage={drift08:.3f}"]


def worst_coverage(table: pd.DataFrame) -> float:
    """The worst coverage over the drift and runaway cells of a `run` table."""
    return float(table[table["scenario"] != "independent"]["coverage"].min())


def drift_coverage(phi=0.8, nights: int = 5, sd: float = 0.10, reps: int = 200_000,
                   seed: int = 31, heavy: bool = False) -> float:
    """Coverage of the project's interval over `reps` windows of `nights` nightly log ratios
    whose backup drifts as AR(1) at `phi` with stationary sd `sd` (t3 innovations if
    `heavy`), beside each path's own noise. Given a `run` table instead (the older call),
    its worst drift or runaway cell."""
    if isinstance(phi, pd.DataFrame):
        return worst_coverage(phi)
    rng = np.random.default_rng(seed)
    x = TRUE + rng.normal(0, SD, (reps, nights)) - rng.normal(0, SD, (reps, nights)) \
        + ar1(rng, phi, sd, (reps, nights), heavy)
    e = ends(x)
    return float(np.mean((e[:, 0] <= TRUE) & (TRUE <= e[:, 1])))


def drift08_coverage(reps: int = 200_000, seed: int = 31) -> float:
    """The worst 5-night coverage at φ 0.8 over drift sd 0.07-0.10, Gaussian and t3."""
    return min(drift_coverage(0.8, 5, sd, reps, seed + i, heavy)
               for i, (sd, heavy) in enumerate((s, h) for s in DRIFT08_SDS
                                               for h in (False, True)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200_000)
    a = ap.parse_args()
    print("\n".join(report(run(a.reps), a.reps)))
