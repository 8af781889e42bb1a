"""The interchangeability test (`evals.interchange`) on many panels at once, for simulation.

A panel is two arrays of grade codes, ``main`` and ``backup``, each (..., nights, tickers,
draws) with NaN for a draw without a grade (failed) or a ticker not scored that night. The
functions here give, per panel, exactly what `evals.interchange.interchange` gives on that
panel's ``units`` frame (standardised mid-ranks per draw, each ticker-night's pair means
weighing once, clusters by ticker, t on K - 1 df): `bench/calibration_dgps.py` checks them
equal on panels with failed draws and a universe change. `evals.icr_plan` sizes a plan with
them; the bench calibrates the test with them. Vectorised because a plan is drafted from
hundreds of resampled panels in the seconds `prereg draft` may take.
"""

from __future__ import annotations

import numpy as np

from dualpath.evals import dist


def zranks(codes: np.ndarray) -> np.ndarray:
    """Standardised mid-ranks along the ticker axis (-2) of integer-valued codes, NaN kept;
    0 for a draw whose graded tickers all share one grade (it orders nothing)."""
    ok = ~np.isnan(codes)
    c = np.where(ok, codes, -1).astype(np.int64)
    levels = int(c.max()) + 1 if c.size else 0
    below = np.zeros(codes.shape[:-2] + (1,) + codes.shape[-1:])
    rank = np.zeros(codes.shape)
    for lv in range(levels):        # grades are few (1-5 or so): one pass per level
        hit = c == lv
        cnt = hit.sum(axis=-2, keepdims=True)
        rank = np.where(hit, below + (cnt + 1) / 2, rank)
        below = below + cnt
    n = ok.sum(axis=-2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (n + 1) / 2
        dev = np.where(ok, rank - mean, 0.0)
        sd = np.sqrt((dev ** 2).sum(axis=-2, keepdims=True) / n)
        z = np.where(sd > 1e-12, dev / np.where(sd > 1e-12, sd, 1.0), 0.0)
    return np.where(ok, z, np.nan)


def terms(main: np.ndarray, backup: np.ndarray) -> dict:
    """Per ticker-night (..., nights, tickers): the RR and TR pair means of z products
    (NaN where the ticker-night has no such pair) and whether the ticker was graded."""
    zr, zt = zranks(main), zranks(backup)
    d = (~np.isnan(zr)).sum(-1)
    s, q = np.nansum(zr, -1), np.nansum(zr ** 2, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rr = np.where(d >= 2, (s * s - q) / (d * (d - 1.0)), np.nan)
        mean_r = np.where(d > 0, s / d, np.nan)
        dt = (~np.isnan(zt)).sum(-1)
        mean_t = np.where(dt > 0, np.nansum(zt, -1) / dt, np.nan)
    seen = (d > 0) | (dt > 0)
    return {"rr": rr, "tr": mean_r * mean_t, "seen": seen}


def cumulative(t: dict) -> dict:
    """Per ticker, sums and counts of each term over the first n nights, for every n (the
    nights axis becomes 'through night n'); `seen` becomes 'graded by night n'."""
    out = {}
    for k in ("rr", "tr"):
        v = t[k]
        out[f"{k}_s"] = np.nancumsum(v, axis=-2)
        out[f"{k}_n"] = np.cumsum(~np.isnan(v), axis=-2)
    out["seen"] = np.cumsum(t["seen"], axis=-2) > 0
    return out


def statistic(c: dict, n: int, limit: float) -> dict:
    """g, its cluster-robust se, g / se, g / its se about 0 (`Interchange.z_null`, what
    the looks read) and the df (K - 1), per panel, over the first n nights of `cumulative`
    terms: `interchange`'s estimator, vectorised."""
    at = {k: v[..., n - 1, :] for k, v in c.items()}
    seen = at["seen"]
    k = seen.sum(-1)
    m, psi = {}, {}
    for name in ("rr", "tr"):
        s, cnt = np.where(seen, at[f"{name}_s"], 0.0), np.where(seen, at[f"{name}_n"], 0)
        tot = cnt.sum(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            m[name] = s.sum(-1) / tot
            psi[name] = (s - m[name][..., None] * cnt) / tot[..., None]
    g = m["tr"] - limit * m["rr"]
    p = psi["tr"] - limit * psi["rr"]
    with np.errstate(invalid="ignore", divide="ignore"):
        cnt = np.where(seen, at["tr_n"], 0)
        p0 = p + g[..., None] * cnt / cnt.sum(-1, keepdims=True)
        se = np.sqrt(k / (k - 1.0) * (p ** 2).sum(-1))
        se0 = np.sqrt(k / (k - 1.0) * (p0 ** 2).sum(-1))
        return {"g": g, "se": se, "z": g / se, "z_null": g / se0, "df": k - 1,
                "rr": m["rr"], "tr": m["tr"]}


def decisions(s: dict, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(declared interchangeable, declared not interchangeable) by the fixed-sample test."""
    q = dist.t_ppf(1 - alpha, np.maximum(s["df"], 1))
    return s["g"] - q * s["se"] > 0, s["g"] + q * s["se"] < 0
