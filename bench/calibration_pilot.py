"""Claimed vs delivered power of a plan drafted from a short pilot (`evals.power`).

Each replicate is one pilot: n nights (5 or 10) of nightly ΔIC at h = 1, Gaussian with true
sd SIGMA (the demo's plan: 0.101), whose sd s the draft sizes the window by, as `prereg
draft` does (`evals.power.power_table` and `propose`: the margin δ is the window's minimum
detectable ΔIC at power 0.8 when the configured 0.03 is too small). Claimed: the power the
draft prints at its δ. Delivered: the share of WINDOWS simulated windows of NIGHTS nights
at the true sd, paths equal, whose one-sided t declares the plan's δ non-inferior. Rows:
the predictive power the draft prints (averaged over σ given s) and, for comparison, the
plug-in power at s it printed before (exact only if σ were s).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from dualpath.evals import power as pw

SIGMA, NIGHTS, MARGIN, POWER, ALPHA, WINDOWS = 0.101, 30, 0.03, 0.8, 0.05, 400
PILOTS = (5, 10)


def delivered(rng: np.random.Generator, margins: np.ndarray) -> np.ndarray:
    """Per plan (margin δ): the simulated share of windows declared non-inferior."""
    x = rng.normal(0, SIGMA, (len(margins), WINDOWS, NIGHTS))
    se = x.std(axis=2, ddof=1) / math.sqrt(NIGHTS)
    q = stats.t.ppf(1 - ALPHA, NIGHTS - 1)
    return ((x.mean(axis=2) + margins[:, None]) / se > q).mean(axis=1)


def drafted(s: float, df: float | None) -> tuple[float, float]:
    """(δ, claimed power) of the plan a pilot sd `s` drafts (df None: plug-in)."""
    rows = pw.power_table({1: s}, NIGHTS, MARGIN, ALPHA, POWER, df=None if df is None
                          else {1: df})
    _, margin = pw.propose(rows, MARGIN, POWER)
    return margin, pw.planned_power("non-inferiority", s, NIGHTS, margin, ALPHA, df)


def run(reps: int, seed: int) -> pd.DataFrame:
    """One row per pilot length and kind of power: claimed vs delivered, and the gap."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in PILOTS:
        s = SIGMA * np.sqrt(rng.chisquare(n - 1, reps) / (n - 1))
        for kind, df in (("predictive", pw.sd_df(n, 1)), ("plug-in", None)):
            plans = np.array([drafted(float(v), df) for v in s])
            got = delivered(rng, plans[:, 0])
            rows.append({"pilot_nights": n, "power": kind, "claimed": plans[:, 1].mean(),
                         "delivered": got.mean(), "below_0.70": (got < 0.70).mean(),
                         "delta_median": float(np.median(plans[:, 0])),
                         "gap": abs(plans[:, 1].mean() - got.mean())})
    return pd.DataFrame(rows)


def gaps(r: pd.DataFrame) -> dict:
    """The predictive rows' gaps by pilot length (the last line's figures)."""
    p = r[r["power"] == "predictive"]
    return {int(n): float(g) for n, g in zip(p["pilot_nights"], p["gap"])}


def report(r: pd.DataFrame, reps: int) -> list[str]:
    """The section `bench/calibration.py` prints."""
    return [f"\nplans drafted from a pilot ({reps} pilots each; h = 1, true sd {SIGMA}, window "
            f"{NIGHTS} nights, power {POWER}, {WINDOWS} simulated windows per plan): claimed "
            "vs delivered power", r.to_string(index=False)]
