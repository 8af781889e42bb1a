"""Interchangeability of grades: does a backup draw differ from a main draw no more than two
main draws differ from each other?

Takes a ``units`` frame (grades per ticker x draw on each path and night). It answers "is the
backup as good?" from the draws alone, free of the market's noise in RankIC, in the sense of
*switchability* in individual bioequivalence (a replicate design compares the test-reference
difference with the reference's own within-subject variability) and of the coefficient of
individual agreement (Barnhart, Haber & Kosinski 2007: ψ = reference-reference disagreement
over test-reference disagreement, with replicates of the reference).

What is compared is what RankIC uses: each night's cross-sectional order. Every draw (one
path, night and draw number; its graded tickers only) is turned into standardised mid-ranks
z (mean 0, sd 1 across the tickers it graded), so a constant shift or any monotone rescaling
of one path's grades is no disagreement; the shift and the spread are reported apart on the
grade scale. A draw whose grades are all equal ranks no ticker above another: its z are 0, so
it agrees with nothing (a backup that always says 3 is no signal, not a perfect match).

With ρ_XY the mean over ticker-nights and draw pairs of z_X z_Y (a rank correlation), the
disagreement of two draws is E(z_X - z_Y)² = 2(1 - ρ_XY), and

  ratio        = (1 - ρ_TR) / (1 - ρ_RR)      backup-main over main-main disagreement (1/ψ)
  share        = ρ_TR / ρ_RR                  of main's reproducible order the backup keeps
  interaction  = ρ_TT + ρ_RR - 2 ρ_TR          ticker x path (IBE's subject-by-formulation σ²_D)
  noise_excess = ρ_RR - ρ_TT                   backup's within-draw variance over main's

so that ratio - 1 = (interaction + noise_excess) / (2 (1 - ρ_RR)) — the IBE decomposition
in standardised-rank units, where the means are 0 by construction.

The test is against a preregistered share f (the backup keeps at least f of main's
draw-to-draw agreement): g = ρ_TR - f ρ_RR. 'interchangeable' when g's one-sided (1 - α)
lower bound is > 0; 'not interchangeable' when its upper bound is < 0; else 'inconclusive'.
g is linear in the three means, so its variance has no ratio in it (a test on the ratio's
own interval has ~1.6x its sd at the user's ρ_RR ≈ 0.12: the ratio's denominator is noisy).

Intervals are cluster-robust by ticker (each ticker's terms over all nights are one cluster,
so a ticker whose grades persist from night to night is not counted as independent nights)
with t on K - 1 degrees of freedom: the delta method on log(ratio) and exactly linear for g.
Chosen over a bootstrap for being exact-in-form, fast enough to calibrate at 10^4 panels,
and calibrated by `bench/calibration_icr.py` (size and coverage at 1-3 draws, 100 tickers,
5-30 nights, self-agreement QWK ≈ 0.12) and `bench/calibration_dgps.py` (three generating
processes, `bench/dgps.py`; at 8 tickers the size reached 0.09, so below `MIN_TICKERS` the
estimates are given without interval or verdict). Main needs >= 2 draws on a night for ρ_RR.

Each path may score its own number of draws (`paths.<name>.draws`): ρ_RR comes from main's
C(m, 2) draw pairs and ρ_TR from all m x b cross pairs of a ticker-night, each ticker-night's
mean over its pairs weighing once (every pair's product has the same expectation, so the mean
is unbiased whatever m and b, and a ticker-night with more pairs does not count more; the
cross-pair mean is z̄_T z̄_R, the means of each path's draws). With one backup draw there is
no ρ_TT (and no interaction or noise excess) but the test stands; with one main draw there is
no ρ_RR and no test, and the note says what main needs. Calibrated as above at 100 tickers,
5-30 nights (2,000 panels a cell, `bench/calibration_icr.py`'s simulation at the boundary):
size 0.051-0.058 and coverage of g's and the ratio's 95% intervals 0.937-0.961 at main 3 /
backup 2; size 0.051-0.069, coverage 0.944-0.960 at 3 / 1 and 2 / 1. The nights the test
needs for power are a property of the grades, not of the test (their tails, ties and
persistence set g's variance): a plan takes them from the pilot's own grades
(`evals.icr_plan`), and assumes the heavy-tailed DGP's `ASSUMED_VARS` without one.

Failed draws (no grade: parse failures, call failures, runaways that left no grade) are
counted per path and never imputed: a ticker-night uses the pairs of draws that have grades.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dualpath.evals import dist

LIMIT_SHARE = 0.5      # default preregistered share of main's agreement the backup must keep
MIN_TICKERS = 20       # clusters: at 8 tickers the test's size was 0.08-0.09 (bench/calibration_dgps)
VERDICTS = ("interchangeable", "not interchangeable", "inconclusive", "insufficient tickers")


@dataclass(frozen=True)
class Interchange:
    """Interchangeability of one backup's grades with main's, over some nights."""

    baseline: str
    candidate: str
    nights: int
    ticker_nights: int
    tickers: int
    rho_rr: float
    rho_tr: float
    rho_tt: float
    ratio: float
    ratio_low: float
    ratio_high: float
    share: float
    g: float
    g_low: float                  # one-sided (1 - alpha) lower bound of g
    g_high: float                 # one-sided (1 - alpha) upper bound of g
    interaction: float
    noise_excess: float
    shift: float                  # mean grade, candidate minus baseline (grade scale)
    spread: float                 # cross-sectional grade sd, candidate over baseline
    limit: float
    alpha: float
    level: float
    verdict: str
    failed: dict = field(default_factory=dict)      # path -> draws without a grade
    flat: dict = field(default_factory=dict)        # path -> draws with one grade for all
    note: str = ""
    se_g: float = math.nan        # g's cluster-robust standard error
    g_noise: float = math.nan     # g's mean were the candidate's grades noise (`noise_terms`)
    se_noise: float = math.nan    # the test's se then
    sd_noise_tr: float = math.nan  # ρ_TR's sd then, given the baseline's draws
    se_null: float = math.nan     # g's se about the null g = 0 (the looks' statistic: z_null)

    @property
    def z_null(self) -> float:
        """g / its se about the null value 0: what the group-sequential looks read (`evals.
        sequential`). Each cluster's term is taken about 0, not about g (the score test's
        null-imposed variance): at 20 tickers g / se_g crossed 'interchangeable' 0.065-0.070
        of the time at the boundary over all looks, g's upper tail being heavier than t's;
        about the null it is 0.04-0.05 (`bench/calibration_dgps.py`). Costs little power
        with many tickers: se_null² ≈ se_g² + g² / (K − 1)."""
        if not (math.isfinite(self.se_null) and self.se_null > 0):
            return math.nan
        return self.g / self.se_null


def standardized_ranks(units: pd.DataFrame) -> pd.DataFrame:
    """night, ticker, path, draw, z: each draw's graded tickers as standardised mid-ranks
    (0 for a draw whose grades are all equal); columns ``flat`` mark those draws."""
    g = units[units["grade"].notna()][["night", "path", "draw", "ticker", "grade"]].copy()
    g["grade"] = g["grade"].astype(float)
    keys = ["night", "path", "draw"]
    r = g.groupby(keys)["grade"].rank(method="average")
    mean = r.groupby([g[k] for k in keys]).transform("mean")
    sd = r.groupby([g[k] for k in keys]).transform(lambda x: x.std(ddof=0))
    g["flat"] = sd.eq(0) | sd.isna()
    g["z"] = np.where(g["flat"], 0.0, (r - mean) / sd.where(~g["flat"], 1.0))
    return g


def _pair_means(wide: pd.DataFrame, a: list, b: list | None) -> pd.DataFrame:
    """Per ticker-night: the sum and count of z products over draw pairs (a x b, or the
    pairs within a when b is None)."""
    pairs = itertools.combinations(a, 2) if b is None else itertools.product(a, b)
    prods = [wide[x] * wide[y] for x, y in pairs]
    if not prods:
        return pd.DataFrame({"s": 0.0, "n": 0}, index=wide.index)
    m = pd.concat(prods, axis=1)
    n = m.notna().sum(axis=1)
    # each ticker-night weighs once, whatever its number of pairs
    return pd.DataFrame({"s": (m.sum(axis=1) / n.where(n > 0)).fillna(0.0),
                         "n": (n > 0).astype(int)})


def cluster_terms(units: pd.DataFrame, baseline: str, candidate: str) -> pd.DataFrame:
    """Per ticker (the cluster): sums and counts of the RR, TR and TT ticker-night means."""
    z = standardized_ranks(units[units["path"].isin([baseline, candidate])])
    wide = z.pivot_table(index=["night", "ticker"], columns=["path", "draw"], values="z",
                         aggfunc="first")
    cols = lambda p: [c for c in wide.columns if c[0] == p]
    parts = {"rr": _pair_means(wide, cols(baseline), None),
             "tr": _pair_means(wide, cols(candidate), cols(baseline)),
             "tt": _pair_means(wide, cols(candidate), None)}
    out = pd.concat({k: v for k, v in parts.items()}, axis=1)
    out.columns = [f"{k}_{c}" for k, c in out.columns]
    return out.groupby(level="ticker").sum()


def noise_terms(z: pd.DataFrame, baseline: str, candidate: str, limit: float,
                i_rr: np.ndarray, n_tr: int, rr: float) -> tuple[float, float, float]:
    """(g's mean, the test's se, ρ_TR's sd given the baseline's draws) were the candidate's
    grades noise of the same marginal: its ticker
    labels shuffled, the same shuffle every night, so its own night-to-night persistence is
    kept (a noise backup that grades a ticker the same wrong way night after night) and its
    agreement with the baseline is gone. ρ_TR's sum over ticker-nights is then the linear
    assignment statistic Σ_i S_i,π(i), S_ij = Σ_t z̄_base(i,t) z̄_cand(j,t), whose mean and
    variance over the shuffles are Hoeffding's (1951): ΣS/K and Σ d_ij² / (K - 1), d the
    doubly centred S. ρ_RR's variance is its own, cluster-robust; the two are uncorrelated
    under the shuffle. Given the baseline's draws (ρ_RR as observed) only ρ_TR varies."""
    zbar = z.groupby(["path", "ticker", "night"])["z"].mean()
    r = zbar.loc[baseline].unstack("night")
    c = zbar.loc[candidate].unstack("night").reindex(index=r.index, columns=r.columns)
    s = r.fillna(0.0).to_numpy() @ c.fillna(0.0).to_numpy().T
    k = s.shape[0]
    d = s - s.mean(axis=1, keepdims=True) - s.mean(axis=0, keepdims=True) + s.mean()
    var_tr = float((d ** 2).sum()) / (k - 1) / n_tr ** 2
    mean_tr = float(s.sum()) / k / n_tr
    return (mean_tr - limit * rr, math.sqrt(var_tr + limit ** 2 * _se(i_rr) ** 2),
            math.sqrt(var_tr))


def _estimates(t: pd.DataFrame) -> dict:
    tot = t.sum()
    mean = lambda k: tot[f"{k}_s"] / tot[f"{k}_n"] if tot[f"{k}_n"] > 0 else math.nan
    return {k: mean(k) for k in ("rr", "tr", "tt")}


def _influence(t: pd.DataFrame, k: str, m: float) -> np.ndarray:
    """Each cluster's influence on the ratio-of-sums mean of pair kind k."""
    return ((t[f"{k}_s"] - m * t[f"{k}_n"]) / t[f"{k}_n"].sum()).to_numpy(dtype=float)


def _se(psi: np.ndarray) -> float:
    k = len(psi)
    return math.sqrt(k / (k - 1) * float((psi ** 2).sum())) if k > 1 else math.nan


def interchange(units: pd.DataFrame, baseline: str, candidate: str, limit: float = LIMIT_SHARE,
                alpha: float = 0.05, level: float = 0.95,
                min_tickers: int = MIN_TICKERS) -> Interchange:
    """The candidate's grades against the baseline's over every night of ``units`` (an
    interval and a verdict from ``min_tickers`` tickers up)."""
    pu = units[units["path"].isin([baseline, candidate])]
    failed = {p: int(pu[(pu["path"] == p) & pu["grade"].isna()].shape[0])
              for p in (candidate, baseline)}
    z = standardized_ranks(pu)
    flat = {p: int(z[z["path"] == p].drop_duplicates(["night", "draw"])["flat"].sum())
            for p in (candidate, baseline)}
    t = cluster_terms(pu, baseline, candidate) if len(z) else pd.DataFrame()
    shift, spread = grade_shift(pu, baseline, candidate)
    base = dict(baseline=baseline, candidate=candidate,
                nights=int(pu["night"].nunique()), tickers=len(t),
                shift=shift, spread=spread, limit=limit, alpha=alpha, level=level,
                failed=failed, flat=flat)
    nan = math.nan
    if not len(t) or t["rr_n"].sum() == 0 or t["tr_n"].sum() == 0 or len(t) < 3:
        why = (f"{baseline} needs >= 2 graded draws of a ticker on a night (its own "
               f"draw-to-draw disagreement is the yardstick; {candidate} may have 1)"
               if len(t) and t["rr_n"].sum() == 0 else "no ticker-night graded on both paths")
        return Interchange(**base, ticker_nights=int(t["tr_n"].sum()) if len(t) else 0,
                           rho_rr=nan, rho_tr=nan, rho_tt=nan, ratio=nan, ratio_low=nan,
                           ratio_high=nan, share=nan, g=nan, g_low=nan, g_high=nan,
                           interaction=nan, noise_excess=nan, verdict="inconclusive",
                           note=why)
    e = _estimates(t)
    rr, tr, tt = e["rr"], e["tr"], e["tt"]
    i_rr, i_tr = _influence(t, "rr", rr), _influence(t, "tr", tr)
    df = len(t) - 1
    ratio = (1 - tr) / (1 - rr)
    se_log = _se(-i_tr / (1 - tr) + i_rr / (1 - rr))
    q = dist.t_ppf(0.5 + level / 2, df)
    g = tr - limit * rr
    se_g = _se(i_tr - limit * i_rr)
    share = (t["tr_n"] / t["tr_n"].sum()).to_numpy(dtype=float)
    se_null = _se(i_tr - limit * i_rr + g * share)
    qa = dist.t_ppf(1 - alpha, df)
    lo, hi = g - qa * se_g, g + qa * se_g
    verdict = "interchangeable" if lo > 0 else "not interchangeable" if hi < 0 else \
        "inconclusive"
    note, ends = "", (ratio * math.exp(-q * se_log), ratio * math.exp(q * se_log))
    g0, se0, sd0 = noise_terms(z, baseline, candidate, limit, i_rr, int(t["tr_n"].sum()), rr)
    if len(t) < min_tickers:
        # estimates stand; an interval is only printed where it was calibrated
        verdict, lo, hi, ends = "insufficient tickers", nan, nan, (nan, nan)
        note = f"insufficient tickers (n={len(t)}, need {min_tickers})"
    return Interchange(**base, ticker_nights=int(t["tr_n"].sum()), rho_rr=rr, rho_tr=tr,
                       rho_tt=tt, ratio=ratio, ratio_low=ends[0], ratio_high=ends[1],
                       share=tr / rr if rr != 0 else nan, g=g, g_low=lo, g_high=hi,
                       interaction=tt + rr - 2 * tr if math.isfinite(tt) else nan,
                       noise_excess=rr - tt if math.isfinite(tt) else nan, verdict=verdict,
                       note=note, se_g=se_g, g_noise=g0, se_noise=se0,
                       sd_noise_tr=sd0, se_null=se_null)


def grade_shift(units: pd.DataFrame, baseline: str, candidate: str) -> tuple[float, float]:
    """(mean grade candidate - baseline, cross-sectional sd candidate / baseline) on the
    grade scale, over the ticker-nights both paths graded: reported, never disagreement."""
    g = units[units["grade"].notna()].assign(grade=lambda d: d["grade"].astype(float))
    mean = g.groupby(["night", "ticker", "path"])["grade"].mean().unstack("path")
    if not {baseline, candidate} <= set(mean.columns):
        return math.nan, math.nan
    both = mean[[baseline, candidate]].dropna()
    if not len(both):
        return math.nan, math.nan
    shift = float((both[candidate] - both[baseline]).mean())
    sd = both.groupby(level="night").std(ddof=1).mean()
    spread = float(sd[candidate] / sd[baseline]) if sd[baseline] > 0 else math.nan
    return shift, spread


def noise_rate(x: Interchange, verdict: str | None = None) -> float:
    """P(a candidate whose grades are noise gets `verdict` (default: x's) from this
    fixed-sample test at x's nights and tickers, given the baseline's draws as observed):
    the normal approximation at `noise_terms`, the test's se read as fixed."""
    verdict = verdict or x.verdict
    if not (math.isfinite(x.sd_noise_tr) and x.sd_noise_tr > 0) or not math.isfinite(x.g_low):
        return math.nan
    qa = dist.t_ppf(1 - x.alpha, x.tickers - 1)
    reach = qa * x.se_noise / x.sd_noise_tr
    z = x.g_noise / x.sd_noise_tr
    up, down = float(dist.norm_cdf(z - reach)), float(dist.norm_cdf(-z - reach))
    return {"interchangeable": up, "not interchangeable": down}.get(verdict, 1 - up - down)


def nightly_interchange(units: pd.DataFrame, baseline: str, candidate: str,
                        limit: float = LIMIT_SHARE, alpha: float = 0.05) -> pd.DataFrame:
    """One row per night: that night's `interchange` (clusters are its tickers)."""
    rows = [{"night": n, **_row(interchange(g, baseline, candidate, limit, alpha))}
            for n, g in units.groupby("night")]
    return pd.DataFrame(rows)


def _row(x: Interchange) -> dict:
    keep = ("ticker_nights", "rho_rr", "rho_tr", "rho_tt", "ratio", "ratio_low",
            "ratio_high", "share", "g", "g_low", "g_high", "interaction", "noise_excess",
            "shift", "spread", "verdict", "note")
    return {k: getattr(x, k) for k in keep}


# Per ticker-night variance of g's term, measured by `bench/calibration_dgps.py --assumed` on
# the heavy-tailed persistent DGP of bench/dgps.py (t3 latent, AR(1) 0.9, QWK 0.12, 3% failed
# draws, 5 tickers swapped mid-window; g's variance over 600 panels x 15 nights x 100
# tickers): the slowest of the bench's three processes, so a plan drafted without a pilot
# holds on it (`evals.icr_plan.assumed_nights`, labelled assumed). A pilot replaces them.
ASSUMED_RHO_RR = 0.116         # main's ρ_RR there (the user's QWK 0.12)
# By (main's draws, the backup's draws): (equal, noise). More draws on main shrink both ρ_RR's
# and ρ_TR's noise (z̄_R is a mean of more draws).
ASSUMED_VARS = {(2, 1): (0.79, 1.06), (2, 2): (0.59, 0.81), (2, 3): (0.51, 0.75),
                (3, 1): (0.56, 0.67), (3, 2): (0.39, 0.51), (3, 3): (0.30, 0.50),
                (4, 1): (0.44, 0.64), (4, 2): (0.31, 0.44), (4, 3): (0.24, 0.39)}
ASSUMED_VAR = dict(zip(("equal", "noise"), ASSUMED_VARS[(2, 2)]))


def assumed_var(main_draws: int, candidate_draws: int) -> dict | None:
    """One ticker-night's variance of g at these draws (`ASSUMED_VARS`; counts beyond its
    cells read as its nearest, which overstates the variance: conservative); None when
    main has one draw (ρ_RR needs two)."""
    if main_draws < 2 or candidate_draws < 1:
        return None
    eq, noise = ASSUMED_VARS[(min(main_draws, 4), min(candidate_draws, 3))]
    return {"equal": eq, "noise": noise}


def decision_power(rho_rr: float, var: float, tickers: int, nights: int, limit: float,
                   alpha: float, alternative: str) -> float:
    """Normal-approximation power of the test after `nights` nights: to declare
    'interchangeable' when the paths are (g = (1 - limit) ρ_RR) or 'not interchangeable'
    when the backup is noise (g = -limit ρ_RR); `var` is one ticker-night's variance of g."""
    g = (1 - limit) * rho_rr if alternative == "equal" else limit * rho_rr
    se = math.sqrt(var / (tickers * nights))
    return float(dist.norm_cdf(g / se - dist.norm_ppf(1 - alpha)))


def nights_needed(rho_rr: float, var: dict, tickers: int, limit: float, alpha: float,
                  power: float = 0.8, cap: int = 250) -> int | None:
    """The fewest nights at which both decisions reach `power` (None beyond `cap`)."""
    for n in range(2, cap + 1):
        if all(decision_power(rho_rr, var[a], tickers, n, limit, alpha, a) >= power
               for a in ("equal", "noise")):
            return n
    return None
