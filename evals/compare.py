"""Path comparison on the nights both paths have: nightly ΔIC = IC(a) - IC(b).

Takes the output of `evals.rankic.nightly_rank_ic` and a ``scores`` frame.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from evals.agreement import quadratic_kappa
from evals.inference import (circular_block_bootstrap_ci, iid_t, newey_west_t,
                             newey_west_variance, power_of_mean)
from evals.rankic import spearman


def compare_ic(nightly: pd.DataFrame, a: str, b: str, horizon: int, *, seed: int,
               delta: float = 0.02, n_boot: int = 2000) -> dict:
    """ΔIC statistics for one horizon: mean, sd, ρ, paired/NW t, block-bootstrap CI, power."""
    ok = nightly[(nightly["horizon"] == horizon) & (nightly["status"] == "ok")]
    wide = ok.pivot(index="night", columns="path", values="ic").sort_index()
    lags = max(horizon - 1, 1)
    out = {"a": a, "b": b, "horizon": horizon, "nights": 0, "mean_delta": math.nan,
           "sd_delta": math.nan, "rho_ic": math.nan, "t_paired": math.nan, "p_paired": math.nan,
           "t_newey_west": math.nan, "ci_low": math.nan, "ci_high": math.nan,
           "block": max(horizon, 1), "mde": math.nan, "power_at_delta": math.nan,
           "delta": delta}
    if a not in wide or b not in wide:
        return out
    both = wide[[a, b]].dropna()
    d = (both[a] - both[b]).to_numpy()
    out["nights"] = len(d)
    if len(d) == 0:
        return out
    out["mean_delta"] = float(d.mean())
    if len(d) >= 2:
        out["sd_delta"] = float(d.std(ddof=1))
        if both[a].std() > 0 and both[b].std() > 0:
            out["rho_ic"] = float(np.corrcoef(both[a], both[b])[0, 1])
        out["t_paired"], out["p_paired"] = iid_t(d)
        out["t_newey_west"] = newey_west_t(lags)(d)
        out["ci_low"], out["ci_high"] = circular_block_bootstrap_ci(d, out["block"], seed, n_boot)
        se = math.sqrt(max(newey_west_variance(d, lags), 0) / len(d))
        p = power_of_mean(se, delta)
        out["mde"], out["power_at_delta"] = p.mde, p.power_at_delta
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
            "spearman": spearman(both[a].to_numpy(), both[b].to_numpy()) if len(both) > 1 else math.nan,
            "qwk_rounded": quadratic_kappa(rounded[:, 0], rounded[:, 1]) if len(both) else math.nan}
