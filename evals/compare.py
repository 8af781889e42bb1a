"""Path comparison paired on the common cross-section, and the planned test's verdict.

Per night and horizon, ΔIC = IC(candidate) − IC(baseline) with both ICs over the same tickers:
those scored on both paths with a matured return. A ticker or night present on one path only
is left out and counted. Takes a ``scores`` frame and `evals.returns.forward_returns` output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dualpath.evals.inputs import MetricInputs
from dualpath.evals.registry import table

from dualpath.evals.agreement import quadratic_kappa
from dualpath.evals.inference import delta_test, holm, noninferiority, verdict_of
from dualpath.evals.rankic import MIN_TICKERS, grouped_spearman, spearman
from dualpath.evals.returns import OK

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


@dataclass(frozen=True)
class DeltaTest:
    """One planned test of ΔIC at one horizon (a plan's hypothesis, as evals sees it)."""

    horizon: int
    test: str = "non-inferiority"          # 'non-inferiority' | 'equivalence' | 'difference'
    margin: float = 0.03
    alpha: float = 0.05
    sd_plan: float | None = None           # the plan's assumed sd of nightly ΔIC (for power)
    preserve: float | None = None          # margin = (1 − preserve) × baseline_ic_low, if set
    baseline_ic_low: float | None = None   # the baseline's pilot IC, 95% lower bound
    sd_df: float | None = None             # df of sd_plan where a pilot estimated it


def compare_ic(paired: pd.DataFrame, baseline: str, candidate: str, horizon: int, *,
               margin: float, alpha: float, test: DeltaTest | None = None,
               power: float = 0.8) -> dict:
    """ΔIC summary and the planned test for one horizon (see `evals.inference.delta_test`)."""
    t = test or DeltaTest(horizon, margin=margin, alpha=alpha)
    p = paired[paired["horizon"] == horizon].dropna(subset=["delta"]).sort_values("night")
    d = p["delta"].to_numpy(dtype=float)
    out = {"baseline": baseline, "candidate": candidate, "horizon": horizon, "nights": len(d),
           "mean_common_tickers": float(p["n_common"].mean()) if len(p) else math.nan,
           "mean_delta": float(d.mean()) if len(d) else math.nan,
           "sd_delta": float(d.std(ddof=1)) if len(d) > 1 else math.nan,
           "rho_ic": math.nan, "margin": t.margin, "alpha": t.alpha}
    if len(d) > 2 and p["ic_baseline"].std() > 0 and p["ic_candidate"].std() > 0:
        out["rho_ic"] = float(np.corrcoef(p["ic_baseline"], p["ic_candidate"])[0, 1])
    pos = p["start_pos"].to_numpy()
    res = delta_test(d, horizon, t.test, t.margin, t.alpha, pos, power, t.sd_plan,
                     t.sd_df)
    ni = noninferiority(d, horizon, t.margin, t.alpha, pos, power)
    extra = {k: ni[k] for k in ("p_noninferior", "p_inferior", "p_equivalent", "equivalence")}
    return {**out, **res, "estimate": res["tested_mean"], **extra}


def compare_paths(scores: pd.DataFrame, returns: pd.DataFrame, baseline: str, candidate: str,
                  horizons: list[int], primary: int, margin: float, alpha: float, *,
                  tests: dict[int, DeltaTest] | None = None, power: float = 0.8) -> pd.DataFrame:
    """One row per horizon: the primary is confirmatory; the others exploratory, Holm-adjusted.

    ``tests``: the planned test per horizon (a plan's primary and secondaries); a horizon
    without one gets non-inferiority at ``margin`` and ``alpha``. Holm adjusts the claim's and
    the counter-claim's p-values over the exploratory horizons; each row's verdict compares
    the adjusted p-values with its own α.
    """
    tests = tests or {}
    paired = paired_delta_ic(scores, returns, baseline, candidate)
    counts = unpaired_counts(scores, baseline, candidate)
    rows = [{**compare_ic(paired, baseline, candidate, h, margin=margin, alpha=alpha,
                          test=tests.get(h), power=power),
             "role": "primary" if h == primary else "exploratory", **counts} for h in horizons]
    out = pd.DataFrame(rows).astype({"df": "Int64"})
    out["p_claim_holm"] = math.nan
    out["p_counter_holm"] = math.nan
    sec = out["role"] == "exploratory"
    if sec.any():
        out.loc[sec, "p_claim_holm"] = holm(out.loc[sec, "p_claim"].tolist())
        out.loc[sec, "p_counter_holm"] = holm(out.loc[sec, "p_counter"].tolist())
        out.loc[sec, "verdict"] = [
            verdict_of(t, a, b, al) for t, a, b, al in
            zip(out.loc[sec, "test"], out.loc[sec, "p_claim_holm"],
                out.loc[sec, "p_counter_holm"], out.loc[sec, "alpha"])]
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


P_GLOSS = ("chance of a ΔIC this far above −δ if the candidate were worse by δ: small "
           "means non-inferior (it is a p-value, not a share of anything)")


@table("comparison", "ΔIC = IC(candidate) − IC(baseline) on common tickers, each horizon's "
       "planned test (non-inferior when the one-sided lower bound > −margin); the interval "
       "is centred on `estimate`; exploratory rows Holm-adjusted",
       ["baseline", "candidate", "horizon", "role", "test", "nights", "unpaired_nights",
        "unpaired_ticker_nights", "mean_common_tickers", "mean_delta", "sd_delta", "rho_ic",
        "n_independent", "estimate", "tested_mean", "df", "ci_low", "ci_high", "ci_level",
        "ci_method", "ci_text", "basis", "margin", "alpha", "p_claim", "p_claim_holm",
        "p_counter", "p_counter_holm", "p_noninferior", "p_inferior", "verdict",
        "p_equivalent", "equivalence", "mde", "power", "power_basis", "note"],
       ["horizon", "role", "test", "nights", "estimate", "ci_low", "ci_high", "p_claim",
        "verdict", "power", "note"],
       gloss={"p_claim": "p-value of the planned claim (for non-inferiority: a ΔIC this far "
              "above −δ if the candidate were worse by δ); small supports it: a p-value, "
              "not a share of anything",
              "p_noninferior": P_GLOSS,
              "estimate": "mean ΔIC over the non-overlapping nights the test uses",
              "power": "chance the planned test shows its claim with these nights "
                       "(power_basis says under what)"},
       kinds={"horizon": "int", "nights": "int", "unpaired_nights": "int",
              "unpaired_ticker_nights": "int", "n_independent": "int"},
       order=10, section="primary",
       empty="no comparison yet: no matured night on which both paths graded the same tickers")
def comparison_table(d: MetricInputs) -> pd.DataFrame:
    """`compare_paths` of the pair at every horizon, the primary's test as planned."""
    if not (d.pair and len(d.nightly)):
        return pd.DataFrame()
    return compare_paths(d.scores, d.returns, d.pair[0], d.pair[1], d.horizons, d.primary,
                         d.margin, d.alpha, tests=d.tests, power=d.power)


@table("cross_path", "Cross-path agreement of mean scores",
       ["baseline", "candidate", "ticker_nights", "spearman", "qwk_rounded"],
       kinds={"ticker_nights": "int"}, order=30, section="quality",
       empty="no cross-path agreement: the two paths share no graded ticker-night")
def cross_path_table(d: MetricInputs) -> pd.DataFrame:
    """`cross_path_agreement` of the pair, one row."""
    if not (d.pair and len(d.nightly)):
        return pd.DataFrame()
    return pd.DataFrame([{"baseline": d.pair[0], "candidate": d.pair[1],
                          **cross_path_agreement(d.scores, *d.pair)}])
