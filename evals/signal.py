"""What the grades carry besides the IC: how many draws pay for themselves, and signal shape.

``draws_analysis``: the IC of the mean of k draws for k = 1..draws (averaged over every
k-subset of draws), and its Spearman-Brown projection beyond the draws taken. Draw noise
attenuates a correlation by sqrt(reliability) (Spearman 1904), and the reliability of a mean
of k draws is SB(ICC(1,1), k) (Spearman-Brown), so IC_k ≈ IC_∞ · sqrt(SB(r1, k)).
``signal_shape``: mean forward return by grade, top-minus-bottom spread, and the rank
autocorrelation of scores night to night (what alphalens tear sheets show beside the IC).
Takes a ``units`` frame (usable units) and `evals.returns.forward_returns` output.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from dualpath.evals.draws import run_draws
from dualpath.evals.inputs import MetricInputs
from dualpath.evals.registry import table

from dualpath.evals.agreement import icc_oneway, spearman_brown
from dualpath.evals.inference import mean_test
from dualpath.evals.rankic import MIN_TICKERS, grouped_spearman
from dualpath.evals.returns import OK


def _graded(units: pd.DataFrame) -> pd.DataFrame:
    g = units.assign(grade=pd.to_numeric(units["grade"], errors="coerce").astype(float),
                     night=pd.to_datetime(units["night"]))
    return g[g["grade"].notna()]


def _ok(returns: pd.DataFrame) -> pd.DataFrame:
    r = returns[returns["status"] == OK]
    return r.assign(night=pd.to_datetime(r["night"]))[["night", "ticker", "horizon", "fwd_return"]]


def scored_draws(units: pd.DataFrame, run_draws: pd.Series | None = None) -> pd.Series:
    """The draws each path scored on each night, indexed (path, night): its run's own
    (`run_draws`, run_id -> draws, from `evals.draws.run_draws`), else the highest draw
    among its units (failed draws included)."""
    u = units.assign(night=pd.to_datetime(units["night"]))
    seen = u.groupby(["path", "night"])["draw"].max().astype(float)
    if run_draws is None or "run_id" not in u:
        return seen
    own = u.assign(d=u["run_id"].map(run_draws)).groupby(["path", "night"])["d"].max()
    return own.astype(float).fillna(seen)


def subset_ics(units: pd.DataFrame, returns: pd.DataFrame,
               run_draws: pd.Series | None = None) -> pd.DataFrame:
    """path, horizon, k, subsets, nights, mean_ic: IC of the mean of k draws, k = 1..draws,
    each subset of draws on the nights whose run scored all of them (`scored_draws`)."""
    g = _graded(units)
    wide = g.pivot_table(index=["path", "night", "ticker"], columns="draw", values="grade",
                         aggfunc="first")
    scored = scored_draws(units, run_draws)
    frames = []
    for _, pw in wide.groupby(level="path"):
        # each path's own draws (paths.<name>.draws): a draw another path scored is not one
        # of this path's, or a backup at 2 draws would read a "k = 3" that is its k = 2
        draws = [d for d in wide.columns if pw[d].notna().any()]
        # and each night's own: a night scored with 2 draws is no "k = 3" after a change
        night_draws = scored.reindex(pw.index.droplevel("ticker")).to_numpy()
        for k in range(1, len(draws) + 1):
            for i, sub in enumerate(itertools.combinations(draws, k)):
                # a ticker's score from this subset: the mean of its graded draws in it
                rows = pw[~(night_draws < max(sub))]
                s = rows[list(sub)].mean(axis=1).dropna().rename("score").reset_index()
                frames.append(s.assign(k=k, subset=i))
    if not frames:
        return pd.DataFrame(columns=["path", "horizon", "k", "subsets", "nights", "mean_ic"])
    j = pd.concat(frames, ignore_index=True).merge(_ok(returns), on=["night", "ticker"])
    keys = ["path", "horizon", "k", "subset", "night"]
    ic = grouped_spearman(j, keys, "score", "fwd_return")
    ic = ic[ic["n"] >= MIN_TICKERS].dropna(subset=["ic"])
    per_subset = ic.groupby(["path", "horizon", "k", "subset"])["ic"].mean()
    out = per_subset.groupby(["path", "horizon", "k"]).agg(subsets="size", mean_ic="mean")
    nights = ic.groupby(["path", "horizon", "k"])["night"].nunique().rename("nights")
    return out.join(nights).reset_index()


def _half_width(nightly_ic: pd.DataFrame | None, path: str, h: int,
                alpha: float) -> tuple[float, int]:
    """(t half-width of the mean IC at all draws, non-overlapping nights) for one path and
    horizon, from the nightly RankIC (`evals.rankic.nightly_rank_ic`)."""
    if nightly_ic is None or not len(nightly_ic):
        return math.nan, 0
    g = nightly_ic[(nightly_ic["path"] == path) & (nightly_ic["horizon"] == h)
                   & (nightly_ic["status"] == OK)].sort_values("night")
    t = mean_test(g["ic"].to_numpy(float), h, g["start_pos"].to_numpy(), alpha=alpha)
    return (t["ci_high"] - t["ci_low"]) / 2, int(t["n_independent"])


def draws_analysis(units: pd.DataFrame, returns: pd.DataFrame,
                   project_to: int | None = None, nightly_ic: pd.DataFrame | None = None,
                   alpha: float = 0.05, run_draws: pd.Series | None = None) -> pd.DataFrame:
    """path, horizon, k, basis ('measured' | 'projected'), mean_ic, reliability, attenuation,
    projected_ic and its interval: what each extra draw buys, measured for k <= draws and
    projected beyond (to ``project_to`` draws; default twice the draws taken, at least 4).

    The projection scales the measured IC at all draws by f_k = sqrt(SB(r1, k) / SB(r1, K)).
    Its (1-alpha) interval: projected_ic ± f_k times the t half-width of the mean nightly IC
    at all draws on non-overlapping nights (``nightly_ic``); the reliability r1 is treated as
    known (it is estimated over every ticker-night, the IC over a few nights).
    """
    measured = subset_ics(units, returns, run_draws)
    scored = scored_draws(units, run_draws)
    rows = []
    for path, g in _graded(units).groupby("path"):
        wide = g.pivot_table(index=["night", "ticker"], columns="draw", values="grade",
                             aggfunc="first")
        # the draws every night of the path scored, so a change of draws keeps every night
        every = scored.xs(path, level="path").min() if path in scored.index else math.nan
        wide = wide[[d for d in wide.columns if not d > every]].dropna()
        r1 = icc_oneway(wide.to_numpy())[0] if wide.shape[1] >= 2 else math.nan
        m = measured[measured["path"] == path]
        for h, mh in m.groupby("horizon"):
            # the projection starts from the k measured on the most nights (the largest
            # such): after a change of draws the top k has only the later nights
            top = mh.sort_values(["nights", "k"]).iloc[-1]
            rel_top = spearman_brown(r1, int(top["k"]))
            ic_inf = top["mean_ic"] / math.sqrt(rel_top) if rel_top > 0 else math.nan
            half, n_ind = _half_width(nightly_ic, path, int(h), alpha)
            last = project_to or max(4, 2 * int(top["k"]))
            ks = sorted(set(mh["k"].astype(int)) | set(range(int(top["k"]) + 1, last + 1)))
            for k in ks:
                rel = spearman_brown(r1, k)
                att = math.sqrt(rel) if rel > 0 else math.nan
                got = mh[mh["k"] == k]
                proj = ic_inf * att
                scale = att / math.sqrt(rel_top) if rel_top > 0 else math.nan
                rows.append({"path": path, "horizon": int(h), "k": k,
                             "basis": "measured" if len(got) else "projected",
                             "nights": int(got["nights"].iloc[0]) if len(got) else 0,
                             "mean_ic": float(got["mean_ic"].iloc[0]) if len(got) else math.nan,
                             "reliability": rel, "attenuation": att, "projected_ic": proj,
                             "projected_ci_low": proj - scale * half,
                             "projected_ci_high": proj + scale * half,
                             "projected_ci": f"{1 - alpha:.0%} two-sided t on {n_ind} "
                             "non-overlapping nights, scaled by Spearman-Brown, reliability "
                             "taken as known" if math.isfinite(half) else
                             "insufficient nights"})
    return pd.DataFrame(rows)


def by_grade(scores: pd.DataFrame, returns: pd.DataFrame) -> pd.DataFrame:
    """path, horizon, grade (mean score rounded half up), ticker_nights, mean_fwd_return."""
    s = scores[scores["n_draws"] > 0].assign(night=lambda f: pd.to_datetime(f["night"]))
    j = s.merge(_ok(returns), on=["night", "ticker"])
    j = j.assign(grade=np.floor(j["score"] + 0.5).astype(int))
    return j.groupby(["path", "horizon", "grade"]).agg(
        ticker_nights=("fwd_return", "size"), mean_fwd_return=("fwd_return", "mean")).reset_index()


def rank_autocorrelation(scores: pd.DataFrame) -> pd.DataFrame:
    """path, nights, rank_autocorr: mean Spearman of scores on consecutive nights (common
    tickers). Near 1: the grades barely move, so nightly ICs are far from independent."""
    s = scores[scores["n_draws"] > 0].assign(night=lambda f: pd.to_datetime(f["night"]))
    rows = []
    for path, g in s.groupby("path"):
        wide = g.pivot_table(index="ticker", columns="night", values="score").sort_index(axis=1)
        prev = wide.iloc[:, :-1].to_numpy()
        cur = wide.iloc[:, 1:].to_numpy()
        pairs = pd.DataFrame({"pair": np.tile(np.arange(prev.shape[1]), prev.shape[0]),
                              "a": prev.ravel(), "b": cur.ravel()}).dropna()
        ic = grouped_spearman(pairs, ["pair"], "a", "b") if len(pairs) else pd.DataFrame()
        ic = ic[ic["n"] >= MIN_TICKERS]["ic"].dropna() if len(ic) else pd.Series(dtype=float)
        rows.append({"path": path, "night_pairs": len(ic),
                     "rank_autocorr": float(ic.mean()) if len(ic) else math.nan})
    return pd.DataFrame(rows)


def signal_shape(scores: pd.DataFrame, returns: pd.DataFrame,
                 quantile: float = 0.2) -> pd.DataFrame:
    """path, horizon, nights, top_minus_bottom (mean over nights of the mean forward return of
    the top score quantile minus the bottom one), rank_autocorr."""
    s = scores[scores["n_draws"] > 0].assign(night=lambda f: pd.to_datetime(f["night"]))
    j = s.merge(_ok(returns), on=["night", "ticker"])
    keys = ["path", "horizon", "night"]
    pct = j.groupby(keys)["score"].rank(pct=True, method="average")
    j = j.assign(top=pct > 1 - quantile, bottom=pct <= quantile)
    top = j[j["top"]].groupby(keys)["fwd_return"].mean()
    bot = j[j["bottom"]].groupby(keys)["fwd_return"].mean()
    spread = (top - bot).dropna().rename("spread").reset_index()
    out = spread.groupby(["path", "horizon"]).agg(nights=("spread", "size"),
                                                  top_minus_bottom=("spread", "mean")).reset_index()
    return out.merge(rank_autocorrelation(scores)[["path", "rank_autocorr"]], on="path", how="left")


@table("draws", "What each draw buys: IC of the mean of k draws (measured), Spearman-Brown "
       "projection beyond",
       ["path", "horizon", "k", "basis", "nights", "mean_ic", "reliability", "attenuation",
        "projected_ic", "projected_ci_low", "projected_ci_high", "projected_ci"],
       ["path", "horizon", "k", "basis", "nights", "mean_ic", "reliability", "projected_ic",
        "projected_ci_low", "projected_ci_high", "projected_ci"],
       kinds={"horizon": "int", "k": "int", "nights": "int"}, order=50, section="quality",
       collapsed=True, empty="no draw analysis yet: no night's forward return has matured")
def draws_table(d: MetricInputs) -> pd.DataFrame:
    """`draws_analysis` of the usable units against the forward returns."""
    if not len(d.returns):
        return pd.DataFrame()
    # each run's own draws: a night scored with 2 draws is no k = 3 sample (`evals.draws`)
    own = pd.Series(run_draws(d.runs).to_numpy(), index=d.runs["run_id"]) if len(d.runs) \
        else None
    return draws_analysis(d.usable, d.returns, nightly_ic=d.nightly, run_draws=own)


@table("signal_shape", "Signal shape: top-minus-bottom quintile forward return, score rank "
       "autocorrelation night to night",
       ["path", "horizon", "nights", "top_minus_bottom", "rank_autocorr"],
       kinds={"horizon": "int", "nights": "int"}, order=60, section="quality",
       collapsed=True, empty="no signal shape yet: no night's forward return has matured")
def signal_shape_table(d: MetricInputs) -> pd.DataFrame:
    """`signal_shape` of the scores against the forward returns."""
    return signal_shape(d.scores, d.returns) if len(d.returns) else pd.DataFrame()


@table("by_grade", "Mean forward return by grade (mean score rounded)",
       ["path", "horizon", "grade", "ticker_nights", "mean_fwd_return"],
       kinds={"horizon": "int", "ticker_nights": "int"}, order=70, section="quality",
       collapsed=True, empty="no returns by grade yet: no night's forward return has matured")
def by_grade_table(d: MetricInputs) -> pd.DataFrame:
    """`by_grade` of the scores against the forward returns."""
    return by_grade(d.scores, d.returns) if len(d.returns) else pd.DataFrame()
