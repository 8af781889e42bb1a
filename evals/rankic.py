"""Forward RankIC: Spearman correlation across tickers between tonight's score and the
later forward return, per night x path x horizon, and its summary with honest inference.

Takes a ``scores`` frame and the output of `evals.returns.forward_returns`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from evals.inference import iid_t, newey_west_t
from evals.returns import OK

MIN_TICKERS = 5


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho with average ranks for ties; NaN when either side is constant."""
    ra = pd.Series(a).rank(method="average").to_numpy()
    rb = pd.Series(b).rank(method="average").to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float(ra @ rb / math.sqrt((ra @ ra) * (rb @ rb)))


def nightly_rank_ic(scores: pd.DataFrame, returns: pd.DataFrame) -> pd.DataFrame:
    """night, path, horizon, ic, n_tickers, status ('ok' | 'pending' | 'too_few').

    A horizon that has not matured is reported as pending with ic NaN, never as a value.
    """
    s = scores[scores["n_draws"] > 0][["night", "path", "ticker", "score"]]
    s = s.assign(night=pd.to_datetime(s["night"]))
    r = returns.assign(night=pd.to_datetime(returns["night"]))
    j = s.merge(r[["night", "ticker", "horizon", "fwd_return", "status"]], on=["night", "ticker"])
    rows = []
    for (night, path, h), g in j.groupby(["night", "path", "horizon"], sort=True):
        if (g["status"] == "pending").all():
            rows.append((night, path, h, math.nan, 0, "pending"))
            continue
        ok = g[g["status"] == OK]
        if len(ok) < MIN_TICKERS:
            rows.append((night, path, h, math.nan, len(ok), "too_few"))
            continue
        rows.append((night, path, h, spearman(ok["score"].to_numpy(), ok["fwd_return"].to_numpy()),
                     len(ok), "ok"))
    return pd.DataFrame(rows, columns=["night", "path", "horizon", "ic", "n_tickers", "status"])


def summarize_ic(ic: np.ndarray, horizon: int) -> dict:
    """Mean, sd, ICIR, hit rate, skew, excess kurtosis, iid t/p and Newey-West t (lag h-1+)."""
    ic = np.asarray(ic, dtype=float)
    ic = ic[np.isfinite(ic)]
    n = len(ic)
    lags = max(horizon - 1, 1)
    out = {"nights": n, "mean_ic": math.nan, "sd_ic": math.nan, "icir": math.nan,
           "share_positive": math.nan, "skew": math.nan, "excess_kurtosis": math.nan,
           "t_iid": math.nan, "p_iid": math.nan, "t_newey_west": math.nan, "nw_lags": lags}
    if n == 0:
        return out
    out["mean_ic"] = float(ic.mean())
    out["share_positive"] = float((ic > 0).mean())
    if n >= 2:
        sd = float(ic.std(ddof=1))
        out["sd_ic"] = sd
        out["icir"] = out["mean_ic"] / sd if sd > 0 else math.nan
        out["t_iid"], out["p_iid"] = iid_t(ic)
        out["t_newey_west"] = newey_west_t(lags)(ic)
    if n >= 3 and ic.std() > 0:
        out["skew"] = float(stats.skew(ic))
        out["excess_kurtosis"] = float(stats.kurtosis(ic))
    return out


def rank_ic_summary(nightly: pd.DataFrame) -> pd.DataFrame:
    """One row per path x horizon over its matured nights, plus the pending nights count."""
    rows = []
    for (path, h), g in nightly.groupby(["path", "horizon"], sort=True):
        ok = g[g["status"] == "ok"].sort_values("night")
        row = {"path": path, "horizon": int(h), **summarize_ic(ok["ic"].to_numpy(), int(h)),
               "pending_nights": int((g["status"] == "pending").sum())}
        rows.append(row)
    return pd.DataFrame(rows)
