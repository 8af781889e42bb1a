"""Inference on a nightly series: iid t, Newey-West t, circular block bootstrap, power.

h-day forward returns sampled every night overlap by h-1 days, so nightly ICs are
autocorrelated and an iid t-statistic overstates significance; the Newey-West (Bartlett)
long-run variance with lag >= h-1 corrects for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


def newey_west_variance(x: np.ndarray, lags: int) -> float:
    """Long-run variance of x (Bartlett kernel, no small-sample correction)."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    d = x - x.mean()
    lrv = d @ d / n
    for lag in range(1, min(lags, n - 1) + 1):
        w = 1.0 - lag / (lags + 1.0)
        lrv += 2.0 * w * (d[lag:] @ d[:-lag]) / n
    return lrv


def newey_west_t(lags: int):
    """A metric factory: t-statistic of a series' mean with Newey-West standard error."""
    def t_stat(x: np.ndarray) -> float:
        x = np.asarray(x, dtype=float)
        if len(x) < 2:
            return math.nan
        var = newey_west_variance(x, lags) / len(x)
        return x.mean() / math.sqrt(var) if var > 0 else math.nan
    return t_stat


def iid_t(x: np.ndarray) -> tuple[float, float]:
    """(t, two-sided p) of the mean under independence."""
    x = np.asarray(x, dtype=float)
    if len(x) < 2 or np.std(x, ddof=1) == 0:
        return math.nan, math.nan
    r = stats.ttest_1samp(x, 0.0)
    return float(r.statistic), float(r.pvalue)


def circular_block_bootstrap_ci(x: np.ndarray, block: int, seed: int, n_boot: int = 2000,
                                level: float = 0.95) -> tuple[float, float]:
    """Percentile CI of the mean from a circular block bootstrap (blocks keep the overlap)."""
    x = np.asarray(x, dtype=float)
    n = len(x)
    block = max(1, block)
    if n < 2 * block:
        # with fewer than two blocks every resample is the series itself, rotated: no CI
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    n_blocks = math.ceil(n / block)
    starts = rng.integers(0, n, size=(n_boot, n_blocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]) % n
    means = x[idx.reshape(n_boot, -1)[:, :n]].mean(axis=1)
    a = (1 - level) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


@dataclass(frozen=True)
class Power:
    """Minimum detectable effect and power of a two-sided test of a mean at level alpha."""

    se: float
    mde: float
    power_at_delta: float
    delta: float


def power_of_mean(se: float, delta: float, alpha: float = 0.05, power: float = 0.8) -> Power:
    """MDE at the given power, and the power to detect `delta`, for a mean with this se."""
    z = stats.norm.ppf(1 - alpha / 2)
    if not se or not math.isfinite(se):
        return Power(se, math.nan, math.nan, delta)
    mde = (z + stats.norm.ppf(power)) * se
    pw = stats.norm.cdf(abs(delta) / se - z) + stats.norm.cdf(-abs(delta) / se - z)
    return Power(se, float(mde), float(pw), delta)
