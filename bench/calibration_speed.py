"""Coverage of the slowdown's 95% interval (`evals.speed.slowdown_interval`) by simulation.

Each replicate is a window of nightly log ratios (backup ÷ main s/ticker on the same night):
the true log slowdown plus each path's own noise (sd 0.05 a night in log seconds), and, by
scenario, `independent` nothing more; `drift` an AR(1) component in the backup's nightly log
seconds (φ 0.5, stationary sd 0.07, as large as the two paths' noise together: a backup whose speed wanders and comes back); `runaways`
nights on which the backup's runaways cluster (probability 0.15 a night, an exponential
excess of mean 0.15 in log seconds; the target is the mean including them). Coverage of the
project's interval beside the plain t interval's, at 5, 10, 20 and 30 paired nights, on
200,000 windows a cell by default (a coverage's standard error ~0.0006: the 5-night drift cell
sits at 0.921-0.922, near the goal, so 2,000 windows could read it either side of 0.92). The
intervals are computed for all windows at once (`ends`) and checked equal to
`evals.speed.slowdown_interval`'s on the first 50 of each cell. Run through
`bench/calibration.py` (its last line carries `slowdown_drift_coverage`, the worst over the
drift and runaway cells; goal >= 0.92) or alone: `python bench/calibration_speed.py [--reps N]`.
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

from dualpath.evals.speed import drift_df, slowdown_interval

NIGHTS = [5, 10, 20, 30]
SCENARIOS = ["independent", "drift", "runaways"]
SD, DRIFT_SD, PHI, RUNAWAY_P, RUNAWAY_MEAN = 0.05, 0.07, 0.5, 0.15, 0.15
TRUE = math.log(5.7)


def windows(rng: np.random.Generator, scenario: str, nights: int, reps: int) -> tuple:
    """(reps x nights log ratios, the true mean log ratio)."""
    x = TRUE + rng.normal(0, SD, (reps, nights)) - rng.normal(0, SD, (reps, nights))
    if scenario == "drift":
        d = np.empty((reps, nights))
        d[:, 0] = rng.normal(0, DRIFT_SD, reps)
        for t in range(1, nights):
            d[:, t] = PHI * d[:, t - 1] + rng.normal(0, DRIFT_SD * math.sqrt(1 - PHI ** 2), reps)
        return x + d, TRUE
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
    half = stats.t.ppf(0.975, nu) * np.sqrt((lam ** 2).mean(axis=1) / n)
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


def report(table: pd.DataFrame, reps: int) -> list[str]:
    return ["", f"slowdown interval coverage (nominal 0.95; {reps} windows per cell; "
            "median_width = hi/lo of the ratio)",
            table.to_string(index=False, float_format=lambda v: f"{v:.3f}"),
            f"worst drift coverage {drift_coverage(table):.3f} (goal >= 0.92)"]


def drift_coverage(table: pd.DataFrame) -> float:
    return float(table[table["scenario"] != "independent"]["coverage"].min())


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200_000)
    a = ap.parse_args()
    print("\n".join(report(run(a.reps), a.reps)))
