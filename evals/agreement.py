"""Self-reproducibility: do the draws of one path agree with each other?

Takes a ``units`` frame (grades per ticker x draw). Grades are on the fixed 5-level scale;
the full label set is always given to kappa, because without it sklearn infers labels from
the data and silently changes the quadratic distances.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from dualpath.evals.inputs import MetricInputs
from dualpath.evals.registry import table

SCALE = np.array([1, 2, 3, 4, 5])


def quadratic_kappa(a: np.ndarray, b: np.ndarray, labels: np.ndarray = SCALE) -> float:
    """Cohen's kappa with quadratic weights over the full label set; NaN when undefined."""
    a, b = np.asarray(a), np.asarray(b)
    k = len(labels)
    index = {v: i for i, v in enumerate(labels)}
    obs = np.zeros((k, k))
    np.add.at(obs, (np.vectorize(index.get)(a), np.vectorize(index.get)(b)), 1)
    w = (np.subtract.outer(np.arange(k), np.arange(k)) ** 2) / (k - 1) ** 2
    expected = np.outer(obs.sum(1), obs.sum(0)) / obs.sum()
    denom = (w * expected).sum()
    if denom == 0:
        return math.nan
    return float(1 - (w * obs).sum() / denom)


def krippendorff_alpha_ordinal(matrix: np.ndarray, domain: np.ndarray = SCALE) -> float:
    """Ordinal Krippendorff's alpha; rows are raters (draws), columns units, NaN = missing."""
    m = np.asarray(matrix, dtype=float)
    k = len(domain)
    index = {float(v): i for i, v in enumerate(domain)}
    o = np.zeros((k, k))
    for col in m.T:
        vals = col[~np.isnan(col)]
        mu = len(vals)
        if mu < 2:
            continue
        counts = np.zeros(k)
        for v in vals:
            counts[index[float(v)]] += 1
        pairs = np.outer(counts, counts) - np.diag(counts)   # ordered pairs within the unit
        o += pairs / (mu - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    if n <= 1:
        return math.nan
    cum = np.concatenate([[0.0], np.cumsum(n_c)])
    delta = np.zeros((k, k))
    for c in range(k):
        for j in range(k):
            lo, hi = min(c, j), max(c, j)
            delta[c, j] = (cum[hi + 1] - cum[lo] - (n_c[c] + n_c[j]) / 2) ** 2
    d_e = (np.outer(n_c, n_c) * delta).sum()
    if d_e == 0:
        return math.nan
    return float(1 - (n - 1) * (o * delta).sum() / d_e)


def icc_oneway(x: np.ndarray) -> tuple[float, float]:
    """(ICC(1,1), ICC(1,k)) from a complete targets x k matrix (one-way random effects)."""
    x = np.asarray(x, dtype=float)
    n, k = x.shape
    if n < 2 or k < 2:
        return math.nan, math.nan
    grand = x.mean()
    msb = k * ((x.mean(axis=1) - grand) ** 2).sum() / (n - 1)
    msw = ((x - x.mean(axis=1, keepdims=True)) ** 2).sum() / (n * (k - 1))
    if msb + (k - 1) * msw == 0 or msb == 0:
        return math.nan, math.nan
    return float((msb - msw) / (msb + (k - 1) * msw)), float((msb - msw) / msb)


def spearman_brown(r: float, k: int) -> float:
    """Reliability of the mean of k draws from single-draw reliability r."""
    if not math.isfinite(r):
        return math.nan
    return k * r / (1 + (k - 1) * r)


def cohen_chance(a: np.ndarray, b: np.ndarray, labels: np.ndarray = SCALE) -> float:
    """Cohen's chance agreement p_e = sum_c p_a(c) p_b(c) of two raters' marginals."""
    pa = pd.Series(a).value_counts(normalize=True).reindex(labels, fill_value=0).to_numpy()
    pb = pd.Series(b).value_counts(normalize=True).reindex(labels, fill_value=0).to_numpy()
    return float(pa @ pb)


def self_agreement(units: pd.DataFrame) -> dict:
    """Agreement between draws of one path over ticker-nights (grades pivoted by draw).

    Exact and chance agreement are means over draw pairs; chance agreement is each pair's
    Cohen p_e (the one the QWK beside it uses), and kappa_exact the mean pairwise unweighted
    Cohen kappa (exact agreement corrected for chance).
    """
    g = units[units["grade"].notna()]
    wide = g.pivot_table(index=["night", "ticker"], columns="draw", values="grade",
                         aggfunc="first").astype(float)
    draws = list(wide.columns)
    out = {"ticker_nights": len(wide), "draws": len(draws), "exact_agreement": math.nan,
           "chance_agreement": math.nan, "kappa_exact": math.nan, "mean_qwk": math.nan,
           "krippendorff_alpha": math.nan, "icc_1_1": math.nan, "icc_1_k": math.nan,
           "spearman_brown_k": math.nan, "note": ""}
    if len(draws) < 2 or len(wide) < 2:
        out["note"] = "needs >= 2 draws of >= 2 ticker-nights"
        return out
    exact, chance, kappas, qwks = [], [], [], []
    for a, b in itertools.combinations(draws, 2):
        pair = wide[[a, b]].dropna()
        if len(pair) == 0:
            continue
        po = float((pair[a] == pair[b]).mean())
        pe = cohen_chance(pair[a].astype(int), pair[b].astype(int))
        exact.append(po)
        chance.append(pe)
        kappas.append((po - pe) / (1 - pe) if pe < 1 else math.nan)
        qwks.append(quadratic_kappa(pair[a].astype(int), pair[b].astype(int)))
    out["exact_agreement"] = float(np.mean(exact)) if exact else math.nan
    out["chance_agreement"] = float(np.mean(chance)) if chance else math.nan
    out["kappa_exact"] = _finite_mean(kappas)
    out["mean_qwk"] = _finite_mean(qwks)
    out["krippendorff_alpha"] = krippendorff_alpha_ordinal(wide.to_numpy().T)
    complete = wide.dropna()
    out["icc_1_1"], out["icc_1_k"] = icc_oneway(complete.to_numpy())
    out["spearman_brown_k"] = spearman_brown(out["icc_1_1"], len(draws))
    if wide.stack().nunique() == 1:
        out["note"] = "every grade is the same: agreement statistics are undefined"
    return out


def _finite_mean(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def grade_labels(grade: pd.Series) -> pd.Series:
    """'1'..'5', or 'failed' for a draw without a grade (<NA>/NaN, any dtype)."""
    g = pd.to_numeric(grade, errors="coerce").astype(float)
    # not Int64.astype(str): pandas 3 writes 'nan' for <NA>, and the failures vanished
    return pd.Series(np.where(g.isna(), "failed", g.fillna(0).astype(int).astype(str)),
                     index=grade.index)


def grade_distribution(units: pd.DataFrame) -> pd.DataFrame:
    """path, units, share of each grade 1-5 and of failed draws (no grade), per path."""
    g = units.assign(label=grade_labels(units["grade"]))
    table = pd.crosstab(g["path"], g["label"], normalize="index")
    cols = [str(v) for v in SCALE] + ["failed"]
    table = table.reindex(columns=cols, fill_value=0.0)
    table.insert(0, "units", g.groupby("path").size())
    table.columns.name = None
    return table.reset_index()


@table("self_agreement", "Self-reproducibility between draws (pooled over nights; chance = "
       "mean pairwise Cohen p_e)",
       ["path", "ticker_nights", "draws", "exact_agreement", "chance_agreement", "kappa_exact",
        "mean_qwk", "krippendorff_alpha", "icc_1_1", "icc_1_k", "spearman_brown_k", "note"],
       ["path", "ticker_nights", "draws", "exact_agreement", "chance_agreement", "mean_qwk",
        "icc_1_k", "note"],
       gloss={"mean_qwk": "quadratic-weighted kappa between draws: 0 chance, 1 identical"},
       kinds={"ticker_nights": "int", "draws": "int"}, order=40, section="quality",
       empty="no self-reproducibility yet: no complete run's units")
def self_agreement_table(d: MetricInputs) -> pd.DataFrame:
    """`self_agreement` per path, pooled over nights (a per-night table was computed on
    every call, ~18% of a study on the seeded warehouse, and read by nothing)."""
    return pd.DataFrame([{"path": p, **self_agreement(g)} for p, g in d.usable.groupby("path")])


@table("grades", "Grade distribution (share of units; failed = no grade; shares sum to 1)",
       ["path", "units", "1", "2", "3", "4", "5", "failed"],
       gloss={"units": "count of units the shares are of (not a share)"},
       kinds={"units": "int"}, order=80, section="quality",
       empty="no grade distribution yet: no complete run's units")
def grades_table(d: MetricInputs) -> pd.DataFrame:
    """`grade_distribution` of the usable units."""
    return grade_distribution(d.usable) if len(d.usable) else pd.DataFrame()
