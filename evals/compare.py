"""Path comparison paired on the common cross-section, and the non-inferiority verdict.

Per night and horizon, ΔIC = IC(candidate) − IC(baseline) with both ICs over the same tickers:
those scored on both paths with a matured return. A ticker or night present on one path only
is left out and counted. Takes a ``scores`` frame and `evals.returns.forward_returns` output.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from evals.agreement import quadratic_kappa
from evals.inference import holm, noninferiority, verdict
from evals.rankic import MIN_TICKERS, grouped_spearman, spearman
from evals.returns import OK

PAIRED = ["night", "horizon", "ic_baseline", "ic_candidate", "delta", "n_common", "start_pos"]


def _wide(scores: pd.DataFrame, baseline: str, candidate: str) -> pd.DataFrame:
    s = scores[(scores["n_draws"] > 0) & scores["path"].isin([baseline, candidate])]
    s = s.assign(night=pd.to_datetime(s["night"]))
    return s.pivot_table(index=["night", "ticker"], columns="path", values="score")


def unpaired_counts(scores: pd.DataFrame, baseline: str, candidate: str) -> dict:
    """Nights scored on one path only, and ticker-nights scored on one path only."""
    wide = _wide(scores, baseline, candidate).reindex(columns=[baseline, candidate])
    has = wide.notna()
    per_night = has.groupby(level="night").any()
    one_night = int((per_night[baseline] != per_night[candidate]).sum())
    both_nights = per_night.index[per_night.all(axis=1)]
    on_both_nights = has[has.index.get_level_values("night").isin(both_nights)]
    one_ticker = int((on_both_nights[baseline] != on_both_nights[candidate]).sum())
    return {"unpaired_nights": one_night, "unpaired_ticker_nights": one_ticker}


def paired_delta_ic(scores: pd.DataFrame, returns: pd.DataFrame, baseline: str,
                    candidate: str) -> pd.DataFrame:
    """night, horizon, ic_baseline, ic_candidate, delta, n_common, start_pos (matured only)."""
    wide = _wide(scores, baseline, candidate)
    if baseline not in wide or candidate not in wide:
        return pd.DataFrame(columns=PAIRED)
    both = wide[[baseline, candidate]].dropna().reset_index()
    r = returns[returns["status"] == OK].assign(night=lambda f: pd.to_datetime(f["night"]))
    j = both.merge(r[["night", "ticker", "horizon", "fwd_return", "start_pos"]],
                   on=["night", "ticker"])
    if j.empty:
        return pd.DataFrame(columns=PAIRED)
    keys = ["night", "horizon"]
    ib = grouped_spearman(j, keys, baseline, "fwd_return")
    ic = grouped_spearman(j, keys, candidate, "fwd_return")
    pos = j.groupby(keys, sort=True)["start_pos"].first().reset_index()
    out = ib.rename(columns={"ic": "ic_baseline", "n": "n_common"}).merge(
        ic[keys + ["ic"]].rename(columns={"ic": "ic_candidate"}), on=keys).merge(pos, on=keys)
    out = out[out["n_common"] >= MIN_TICKERS]
    return out.assign(delta=out["ic_candidate"] - out["ic_baseline"])[PAIRED]


def compare_ic(paired: pd.DataFrame, baseline: str, candidate: str, horizon: int, *,
               margin: float, alpha: float) -> dict:
    """ΔIC summary and the non-inferiority/TOST test for one horizon (see `evals.inference`)."""
    p = paired[paired["horizon"] == horizon].dropna(subset=["delta"]).sort_values("night")
    d = p["delta"].to_numpy(dtype=float)
    out = {"baseline": baseline, "candidate": candidate, "horizon": horizon, "nights": len(d),
           "mean_common_tickers": float(p["n_common"].mean()) if len(p) else math.nan,
           "mean_delta": float(d.mean()) if len(d) else math.nan,
           "sd_delta": float(d.std(ddof=1)) if len(d) > 1 else math.nan,
           "rho_ic": math.nan, "margin": margin, "alpha": alpha}
    if len(d) > 2 and p["ic_baseline"].std() > 0 and p["ic_candidate"].std() > 0:
        out["rho_ic"] = float(np.corrcoef(p["ic_baseline"], p["ic_candidate"])[0, 1])
    return {**out, **noninferiority(d, horizon, margin, alpha, p["start_pos"].to_numpy())}


def compare_paths(scores: pd.DataFrame, returns: pd.DataFrame, baseline: str, candidate: str,
                  horizons: list[int], primary: int, margin: float, alpha: float) -> pd.DataFrame:
    """One row per horizon: the primary is confirmatory; the others exploratory, Holm-adjusted.

    Holm adjusts each one-sided p-value over the exploratory horizons; their verdicts use the
    adjusted p-values.
    """
    paired = paired_delta_ic(scores, returns, baseline, candidate)
    counts = unpaired_counts(scores, baseline, candidate)
    rows = [{**compare_ic(paired, baseline, candidate, h, margin=margin, alpha=alpha),
             "role": "primary" if h == primary else "exploratory", **counts} for h in horizons]
    out = pd.DataFrame(rows).astype({"df": "Int64"})
    out["p_noninferior_holm"] = math.nan
    out["p_inferior_holm"] = math.nan
    sec = out["role"] == "exploratory"
    if sec.any():
        out.loc[sec, "p_noninferior_holm"] = holm(out.loc[sec, "p_noninferior"].tolist())
        out.loc[sec, "p_inferior_holm"] = holm(out.loc[sec, "p_inferior"].tolist())
        out.loc[sec, "verdict"] = [verdict(a, b, alpha) for a, b in
                                   zip(out.loc[sec, "p_noninferior_holm"],
                                       out.loc[sec, "p_inferior_holm"])]
    return out


def cross_path_agreement(scores: pd.DataFrame, a: str, b: str) -> dict:
    """Agreement of the two paths' mean scores on the same ticker-nights (Spearman, QWK).

    QWK rounds each mean score to the nearest grade (halves up) on the full 1-5 scale.
    """
    wide = scores[scores["n_draws"] > 0].pivot_table(index=["night", "ticker"], columns="path",
                                                     values="score")
    if a not in wide or b not in wide:
        return {"ticker_nights": 0, "spearman": math.nan, "qwk_rounded": math.nan}
    both = wide[[a, b]].dropna()
    rounded = np.floor(both.to_numpy() + 0.5).astype(int)
    return {"ticker_nights": len(both),
            "spearman": spearman(both[a].to_numpy(), both[b].to_numpy())
            if len(both) > 1 else math.nan,
            "qwk_rounded": quadratic_kappa(rounded[:, 0], rounded[:, 1]) if len(both) else math.nan}
