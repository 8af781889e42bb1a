"""Forward RankIC: Spearman correlation across tickers between tonight's score and the
later forward return, per night x path x horizon (vectorised over the whole panel), and its
per-path summary with calibrated inference (`evals.inference`).

Takes a ``scores`` frame and the output of `evals.returns.forward_returns`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from evals.inference import mean_test
from evals.returns import OK, PENDING

MIN_TICKERS = 5
NIGHTLY = ["night", "path", "horizon", "ic", "n_tickers", "start_pos", "status"]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho with average ranks for ties; NaN when either side is constant."""
    ra = pd.Series(a).rank(method="average").to_numpy()
    rb = pd.Series(b).rank(method="average").to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float(ra @ rb / math.sqrt((ra @ ra) * (rb @ rb)))


def grouped_spearman(frame: pd.DataFrame, keys: list[str], x: str, y: str) -> pd.DataFrame:
    """keys..., ic, n per group: Spearman of x and y within each group, all groups at once.

    Average ranks within each group, then Pearson of the ranks from centred sums (ranks are
    multiples of 1/2, so the centring is exact in floating point).
    """
    g = frame.groupby(keys, sort=True)
    r = pd.DataFrame({"rx": g[x].rank(method="average"), "ry": g[y].rank(method="average")})
    for k in keys:
        r[k] = frame[k]
    n = r.groupby(keys, sort=True)["rx"].transform("size").to_numpy(dtype=float)
    mid = (n + 1) / 2                      # the mean of average ranks 1..n is (n+1)/2 exactly
    dx, dy = r["rx"].to_numpy() - mid, r["ry"].to_numpy() - mid
    r = r[keys].assign(sxy=dx * dy, sxx=dx * dx, syy=dy * dy)
    s = r.groupby(keys, sort=True).agg(sxy=("sxy", "sum"), sxx=("sxx", "sum"),
                                       syy=("syy", "sum"), n=("sxy", "size"))
    with np.errstate(invalid="ignore", divide="ignore"):
        ic = s["sxy"] / np.sqrt(s["sxx"] * s["syy"])
    return s.assign(ic=ic.where((s["sxx"] > 0) & (s["syy"] > 0)))[["ic", "n"]].reset_index()


def nightly_rank_ic(scores: pd.DataFrame, returns: pd.DataFrame) -> pd.DataFrame:
    """night, path, horizon, ic, n_tickers, start_pos, status.

    status: 'ok', 'pending' (the horizon has not matured: ic NaN, never a value), 'too_few'
    (< MIN_TICKERS priced tickers) or 'constant' (every score or return equal: undefined).
    """
    s = scores[scores["n_draws"] > 0][["night", "path", "ticker", "score"]]
    s = s.assign(night=pd.to_datetime(s["night"]))
    r = returns.assign(night=pd.to_datetime(returns["night"]))
    cols = ["night", "ticker", "horizon", "fwd_return", "status"] + \
        (["start_pos"] if "start_pos" in r else [])
    j = s.merge(r[cols], on=["night", "ticker"])
    if "start_pos" not in j:
        j["start_pos"] = j.groupby("night").ngroup()
    keys = ["night", "path", "horizon"]
    j = j.assign(is_ok=j["status"] == OK, is_pending=j["status"] == PENDING)
    base = j.groupby(keys, sort=True).agg(start_pos=("start_pos", "first"), n_ok=("is_ok", "sum"),
                                          pending=("is_pending", "all")).reset_index()
    ok = j[j["status"] == OK]
    ic = grouped_spearman(ok, keys, "score", "fwd_return") if len(ok) else \
        pd.DataFrame(columns=keys + ["ic", "n"])
    out = base.merge(ic, on=keys, how="left")
    out["n_tickers"] = out["n_ok"].astype(int)
    status = np.where(out["pending"], PENDING, np.where(
        out["n_tickers"] < MIN_TICKERS, "too_few", np.where(out["ic"].isna(), "constant", OK)))
    out["status"] = status
    out.loc[out["status"] != OK, "ic"] = np.nan
    out["ic"] = out["ic"].astype(float)
    return out[NIGHTLY]


def summarize_ic(ic: np.ndarray, horizon: int, start_pos: np.ndarray | None = None,
                 alpha: float = 0.05) -> dict:
    """Mean, sd, ICIR, hit rate, skew, excess kurtosis, and the calibrated test of mean = 0."""
    ic = np.asarray(ic, dtype=float)
    keep = np.isfinite(ic)
    ic = ic[keep]
    pos = None if start_pos is None else np.asarray(start_pos)[keep]
    n = len(ic)
    out = {"nights": n, "mean_ic": math.nan, "sd_ic": math.nan, "icir": math.nan,
           "share_positive": math.nan, "skew": math.nan, "excess_kurtosis": math.nan}
    if n:
        out["mean_ic"] = float(ic.mean())
        out["share_positive"] = float((ic > 0).mean())
    if n >= 2:
        sd = float(ic.std(ddof=1))
        out["sd_ic"] = sd
        out["icir"] = out["mean_ic"] / sd if sd > 0 else math.nan
    if n >= 3 and ic.std() > 0:
        out["skew"] = float(stats.skew(ic))
        out["excess_kurtosis"] = float(stats.kurtosis(ic))
    return {**out, **mean_test(ic, horizon, pos, alpha=alpha)}


def rank_ic_summary(nightly: pd.DataFrame, alpha: float = 0.05) -> pd.DataFrame:
    """One row per path x horizon over its matured nights, plus the pending nights count."""
    rows = []
    for (path, h), g in nightly.groupby(["path", "horizon"], sort=True):
        ok = g[g["status"] == OK].sort_values("night")
        pos = ok["start_pos"].to_numpy() if "start_pos" in ok else None
        rows.append({"path": path, "horizon": int(h),
                     **summarize_ic(ok["ic"].to_numpy(), int(h), pos, alpha),
                     "pending_nights": int((g["status"] == PENDING).sum())})
    out = pd.DataFrame(rows)
    return out.astype({"df": "Int64"}) if len(out) else out
