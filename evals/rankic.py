"""Forward RankIC: Spearman correlation across tickers between tonight's score and the
later forward return, per night x path x horizon (vectorised over the whole panel), and its
per-path summary with calibrated inference (`evals.inference`).

Takes a ``scores`` frame and the output of `evals.returns.forward_returns`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dualpath.evals.inputs import MetricInputs
from dualpath.evals.registry import table

from dualpath.evals.inference import mean_test
from dualpath.evals.returns import OK, PENDING

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


def _codes(*columns) -> list[np.ndarray]:
    """Integer codes of each column over the values of all of them (shared vocabulary)."""
    codes, _ = pd.factorize(np.concatenate([np.asarray(c) for c in columns]), sort=True)
    return np.split(codes, np.cumsum([len(c) for c in columns])[:-1])


def group_ids(frame: pd.DataFrame, keys: list[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """(group id per row, one row of keys per group), groups in sorted key order."""
    combined = np.zeros(len(frame), dtype=np.int64)
    for k in keys:
        c = _codes(frame[k].to_numpy())[0]
        combined = combined * (int(c.max()) + 1 if len(c) else 1) + c
    uniq, first, gid = np.unique(combined, return_index=True, return_inverse=True)
    return gid.ravel(), frame[keys].iloc[first].reset_index(drop=True)


def average_ranks(gid: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Ranks 1..n within each group, ties given their average rank (as scipy's rankdata)."""
    by_value = np.argsort(v)       # ties may come in any order: they share their average rank
    small = gid.astype(np.uint16) if len(gid) and gid.max() < 2 ** 16 else gid
    order = by_value[np.argsort(small[by_value], kind="stable")]   # radix sort for uint16
    g, s = gid[order], v[order]
    n = len(v)
    counts = np.bincount(g)
    group_start = (np.cumsum(counts) - counts)[g]
    new_run = np.r_[True, (g[1:] != g[:-1]) | (s[1:] != s[:-1])]
    starts = np.flatnonzero(new_run)
    ends = np.r_[starts[1:], n] - 1
    run = np.cumsum(new_run) - 1
    out = np.empty(n)
    out[order] = (starts + ends)[run] / 2 - group_start + 1
    return out


def spearman_by_group(gid: np.ndarray, x: np.ndarray, y: np.ndarray,
                      n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(rho, n) per group: Pearson of within-group average ranks from centred sums.

    Ranks are multiples of 1/2 and their mean is (n+1)/2, so the centring is exact.
    """
    n = np.bincount(gid, minlength=n_groups).astype(float)
    mid = ((n + 1) / 2)[gid]
    dx, dy = average_ranks(gid, x) - mid, average_ranks(gid, y) - mid
    sxy = np.bincount(gid, dx * dy, n_groups)
    sxx = np.bincount(gid, dx * dx, n_groups)
    syy = np.bincount(gid, dy * dy, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where((sxx > 0) & (syy > 0), sxy / np.sqrt(sxx * syy), np.nan)
    return rho, n


def rank_rows(m: np.ndarray) -> np.ndarray:
    """Average ranks (1..n) along each row of m, ignoring NaN (which stays NaN)."""
    order = np.argsort(m, axis=1)                  # NaN sorts last
    s = np.take_along_axis(m, order, axis=1)
    idx = np.broadcast_to(np.arange(m.shape[1]), m.shape)
    step = s[:, 1:] != s[:, :-1]
    first = np.concatenate([np.ones((len(m), 1), bool), step], axis=1)
    last = np.concatenate([step, np.ones((len(m), 1), bool)], axis=1)
    start = np.maximum.accumulate(np.where(first, idx, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, idx, m.shape[1])[:, ::-1], axis=1)[:, ::-1]
    out = np.empty_like(m)
    np.put_along_axis(out, order, (start + end) / 2 + 1, axis=1)
    out[np.isnan(m)] = np.nan
    return out


def spearman_rows(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rho, n) per row of two equally shaped matrices with the same NaN pattern."""
    valid = ~np.isnan(x)
    n = valid.sum(axis=1)
    mid = ((n + 1) / 2)[:, None]
    dx = np.where(valid, rank_rows(x) - mid, 0.0)
    dy = np.where(valid, rank_rows(y) - mid, 0.0)
    sxx, syy = (dx * dx).sum(axis=1), (dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where((sxx > 0) & (syy > 0), (dx * dy).sum(axis=1) / np.sqrt(sxx * syy), np.nan)
    return rho, n


def grouped_spearman(frame: pd.DataFrame, keys: list[str], x: str, y: str) -> pd.DataFrame:
    """keys..., ic, n per group: Spearman of x and y within each group, all groups at once."""
    if frame.empty:
        return pd.DataFrame(columns=keys + ["ic", "n"])
    gid, groups = group_ids(frame, keys)
    rho, n = spearman_by_group(gid, frame[x].to_numpy(float), frame[y].to_numpy(float),
                               len(groups))
    return groups.assign(ic=rho, n=n.astype(int))


def _factorize(own, other) -> tuple[list[np.ndarray], np.ndarray]:
    """Codes of ``own`` and ``other`` over the values of ``other`` (-1: not in ``other``)."""
    codes, uniques = pd.factorize(np.asarray(other), sort=True)
    return [pd.Index(uniques).get_indexer(np.asarray(own)), codes], np.asarray(uniques)


def _scored_rows(s: pd.DataFrame, returns: pd.DataFrame) -> dict:
    """Every return row that a path scored: its row index, path code and score, by a dense
    lookup on integer (night, ticker) codes instead of a merge."""
    (sn, rn), nights = _factorize(pd.to_datetime(s["night"]).to_numpy("datetime64[ns]"),
                                  pd.to_datetime(returns["night"]).to_numpy("datetime64[ns]"))
    (st, rt), tickers = _factorize(s["ticker"].to_numpy(), returns["ticker"].to_numpy())
    known = (sn >= 0) & (st >= 0)          # a score with no return row has nothing to meet
    skey, rkey = (sn * len(tickers) + st)[known], rn * len(tickers) + rt
    spath, paths = pd.factorize(s["path"].to_numpy(), sort=True)
    spath, svalue = spath[known], s["score"].to_numpy(float)[known]
    rows, score, pc = [], [], []
    for i in range(len(paths)):
        dense = np.full(len(nights) * len(tickers), np.nan)
        dense[skey[spath == i]] = svalue[spath == i]
        got = dense[rkey]
        has = np.flatnonzero(~np.isnan(got))
        rows.append(has)
        score.append(got[has])
        pc.append(np.full(len(has), i))
    rows = np.concatenate(rows)
    return {"rows": rows, "score": np.concatenate(score), "path": np.concatenate(pc),
            "night": rn[rows], "ticker": rt[rows], "nights": nights, "paths": paths,
            "n_tickers": len(tickers)}


def nightly_rank_ic(scores: pd.DataFrame, returns: pd.DataFrame) -> pd.DataFrame:
    """night, path, horizon, ic, n_tickers, start_pos, status.

    status: 'ok', 'pending' (the horizon has not matured: ic NaN, never a value), 'too_few'
    (< MIN_TICKERS priced tickers) or 'constant' (every score or return equal: undefined).
    """
    s = scores[scores["n_draws"] > 0]
    if s.empty or returns.empty:
        return pd.DataFrame(columns=NIGHTLY)
    j = _scored_rows(s, returns)
    rows = j["rows"]
    hcode, horizons = pd.factorize(returns["horizon"].to_numpy()[rows], sort=True)
    status = returns["status"].to_numpy()[rows]
    # group = night x path x horizon; its key range is small, so a dense map, not a sort
    combined = (j["night"] * len(j["paths"]) + j["path"]) * len(horizons) + hcode
    present = np.zeros(len(j["nights"]) * len(j["paths"]) * len(horizons), dtype=bool)
    present[combined] = True
    gid, k = (np.cumsum(present) - 1)[combined], int(present.sum())
    first = np.zeros(k, dtype=np.int64)
    first[gid[::-1]] = np.arange(len(gid))[::-1]        # any row of the group will do
    pending = np.bincount(gid, status == PENDING, k) == np.bincount(gid, minlength=k)
    ok = status == OK
    # one row per group, one column per ticker: ranks along the rows of a dense matrix
    x = np.full((k, j["n_tickers"]), np.nan)
    y = np.full((k, j["n_tickers"]), np.nan)
    x[gid[ok], j["ticker"][ok]] = j["score"][ok]
    y[gid[ok], j["ticker"][ok]] = returns["fwd_return"].to_numpy(float)[rows][ok]
    rho, n = spearman_rows(x, y)
    state = np.where(pending, PENDING, np.where(n < MIN_TICKERS, "too_few",
                                                np.where(np.isnan(rho), "constant", OK)))
    start = returns["start_pos"].to_numpy(np.int64)[rows] if "start_pos" in returns \
        else j["night"]
    return pd.DataFrame({"night": j["nights"][j["night"][first]],
                         "path": j["paths"][j["path"][first]], "horizon": horizons[hcode[first]],
                         "ic": np.where(state == OK, rho, np.nan), "n_tickers": n.astype(int),
                         "start_pos": start[first], "status": state})


def skew_kurtosis(x: np.ndarray) -> tuple[float, float]:
    """scipy.stats' skew and (excess) kurtosis, biased, without importing scipy.stats (~0.3 s):
    m3/m2^1.5 and m4/m2^2 - 3 of the central moments, NaN where the values are all but equal
    (m2 <= (eps * mean)^2, scipy's own test)."""
    x = np.asarray(x, dtype=float)
    mean = x.mean()
    d = x - mean
    m2 = float((d * d).mean())
    if m2 <= (np.finfo(float).eps * mean) ** 2:
        return math.nan, math.nan
    return float((d * d * d).mean() / m2 ** 1.5), float((d ** 4).mean() / m2 ** 2 - 3)


def summarize_ic(ic: np.ndarray, horizon: int, start_pos: np.ndarray | None = None,
                 alpha: float = 0.05) -> dict:
    """Mean, sd, ICIR, hit rate, skew, excess kurtosis, and the calibrated test of mean = 0;
    ``estimate`` is the interval's own centre (the mean of the non-overlapping nights the
    test uses) where there is an interval, else the mean over every night."""
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
        out["skew"], out["excess_kurtosis"] = skew_kurtosis(ic)
    test = mean_test(ic, horizon, pos, alpha=alpha)
    # the mean over every night lay outside the t interval on the non-overlapping nights in
    # 1.3-3.2% of tables at h = 5 and 20: a point estimate printed beside an interval is
    # the interval's own
    est = test["tested_mean"] if math.isfinite(test["ci_low"]) else out["mean_ic"]
    return {**out, **test, "estimate": est}


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


@table("rank_ic", "RankIC per path × horizon (matured nights; t, p and CI on non-overlapping "
       "nights, or why not)",
       ["path", "horizon", "nights", "mean_ic", "sd_ic", "icir", "share_positive", "skew",
        "excess_kurtosis", "n_independent", "tested_mean", "t", "df", "p", "ci_low", "ci_high",
        "ci_level", "ci_method", "basis", "note", "pending_nights", "estimate"],
       ["path", "horizon", "nights", "estimate", "icir", "n_independent", "p", "ci_low",
        "ci_high", "note"],
       # the interval is a t on the non-overlapping nights: beside it, their mean, not the
       # mean over every night (that lay outside its interval in 1.3-3.2% of tables)
       gloss={"estimate": "mean IC over the non-overlapping nights the t, p and CI use (the "
              "interval's centre); without an interval, over every matured night (mean_ic)",
              "icir": "mean IC ÷ its nightly sd", "n_independent": "non-overlapping nights "
              "the t, p and CI use"},
       kinds={"nights": "int", "horizon": "int", "n_independent": "int",
              "pending_nights": "int"},
       order=20, section="quality", empty="no RankIC yet: no night's forward return has matured")
def rank_ic_table(d: MetricInputs) -> pd.DataFrame:
    """`rank_ic_summary` of the study's nightly RankIC (empty before a night has matured)."""
    return rank_ic_summary(d.nightly, d.alpha) if len(d.nightly) else pd.DataFrame()
