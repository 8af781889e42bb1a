"""Power of the project's ΔIC tests: the t on non-overlapping nights (`evals.inference`).

A window of n consecutive nights at horizon h gives m = ceil(n / h) nights whose h-session
return windows share nothing; the test is Student's t on those m ΔICs (m - 1 df). With a
nightly ΔIC of standard deviation σ and true mean Δ, its statistic is noncentral t with
noncentrality (Δ - θ0)·√m / σ, so power is exact for Gaussian ΔICs:

- non-inferiority (one-sided α, margin δ): "non-inferior" when the one-sided upper-tail t
  against -δ rejects: P = nct.sf(t_{1-α}, m-1, (Δ + δ)√m/σ); "inferior" (the upper bound below
  -δ): P = nct.cdf(-t_{1-α}, m-1, (Δ + δ)√m/σ);
- equivalence (TOST, α each side): both one-sided tests reject; computed by integrating over
  the sample sd (no closed form);
- difference (two-sided α): P(|t| > t_{1-α/2}) with noncentrality Δ√m/σ.

That is power at a known σ. When σ is a pilot's estimate s on ν degrees of freedom the
plan is sized by the *predictive* power instead (`predictive_power`): the exact power
averaged over σ² = ν s² / χ²_ν, the distribution of σ given s under the reference prior
p(σ) ∝ 1/σ (Spiegelhalter & Freedman 1986's "assurance"; O'Hagan, Stevens & Campbell 2005).
A plug-in power at s is optimistic: its plans' margins are sized to a σ that is as often
too small as too large, and power falls faster below σ than it rises above it (a 5-night
pilot's plans claimed 0.83 and delivered 0.71). ν is n - 1 for h = 1; nightly ΔICs at h > 1
overlap, and the sd of such a series has about (n - 1) / (1 + 2 Σ_k (1 - k/h)²) degrees of
freedom (Bartlett's variance of a sample autocovariance under MA(h - 1) overlap; `sd_df`).

`bench/calibration.py` compares these predictions with simulated rejection rates on panels
shaped like the study (`worst_power_gap` in its last line).
"""

from __future__ import annotations

import math

import numpy as np

from dualpath.evals import dist
from dualpath.evals.inference import MIN_INDEPENDENT
from dualpath.evals.roots import brentq

TESTS = ("non-inferiority", "equivalence", "difference")


def independent_count(nights: int, horizon: int) -> int:
    """Non-overlapping nights among `nights` consecutive sessions at `horizon`."""
    return 0 if nights <= 0 else (nights - 1) // max(horizon, 1) + 1


def _tost(sd: float, m: int, margin: float, alpha: float, delta: float) -> float:
    df, se = m - 1, sd / math.sqrt(m)
    q = dist.t_ppf(1 - alpha, df)
    # both bounds inside ±δ needs s < δ√m/q; integrate P(mean in the band | s) over s
    v_max = df * (margin * math.sqrt(m) / (q * sd)) ** 2
    # the integrand in plain floats, the formulas scipy.stats uses (Φ(x) = erfc(-x/√2)/2; the
    # χ² density from its log): scipy's per-call overhead (~0.1 ms a call, three a point)
    # was most of the demo's report, whose `min_detectable` root search calls this 100 times
    # a step (`predictive_power`)
    log_c, k, r2 = -df / 2 * math.log(2) - math.lgamma(df / 2), df / 2 - 1, math.sqrt(2)

    def given(v: float) -> float:
        if not v > 0:
            # the χ² density at 0: 0 above 2 df, 1/2 at 2, unbounded at 1
            return 0.0 if df > 2 else 0.5 if df == 2 else math.inf
        half = margin - q * sd * math.sqrt(v / df) / math.sqrt(m)
        p = 0.5 * (math.erfc(-(half - delta) / se / r2) - math.erfc(-(-half - delta) / se / r2))
        return max(p, 0.0) * math.exp(k * math.log(v) - v / 2 + log_c)

    from scipy import integrate   # only the equivalence test's power needs it (~0.2 s to import)

    return float(min(1.0, integrate.quad(given, 0, v_max, limit=200)[0]))


def decision_probability(test: str, decision: str, sd: float, m: int, margin: float,
                         alpha: float, delta: float = 0.0) -> float:
    """P(the test returns `decision`) when the true mean ΔIC is `delta`; NaN below 4 nights.

    decisions: non-inferiority 'non-inferior' | 'inferior'; equivalence 'equivalent';
    difference 'different' (either side).
    """
    if m < MIN_INDEPENDENT or not sd > 0 or not math.isfinite(sd):
        return math.nan
    df, root = m - 1, math.sqrt(m)
    if test == "non-inferiority":
        q = dist.t_ppf(1 - alpha, df)
        ncp = (delta + margin) * root / sd
        return float(dist.nct_sf(q, df, ncp) if decision == "non-inferior"
                     else dist.nct_cdf(-q, df, ncp))
    if test == "equivalence":
        return _tost(sd, m, margin, alpha, delta)
    if test == "difference":
        q = dist.t_ppf(1 - alpha / 2, df)
        ncp = delta * root / sd
        return float(dist.nct_sf(q, df, ncp) + dist.nct_cdf(-q, df, ncp))
    raise ValueError(f"unknown test {test!r}; one of {TESTS}")


SD_GRID = 100       # quantile midpoints of σ's distribution: within 0.002 of 1,000 of them


def sd_df(nights: int, horizon: int) -> float:
    """Degrees of freedom of the sd of `nights` consecutive nightly ΔICs at `horizon`."""
    h = max(horizon, 1)
    overlap = 1 + 2 * sum((1 - k / h) ** 2 for k in range(1, h))
    return max(nights - 1, 0) / overlap


def planned_power(test: str, sd: float, m: int, margin: float, alpha: float,
                  df: float | None = None) -> float:
    """The power a plan is sized by: to show non-inferiority (or equivalence) when the paths
    are equal, or to detect a difference of δ; predictive over σ when `sd` is an estimate on
    `df` degrees of freedom (None: σ = sd is known or assumed)."""
    if df is not None:
        return predictive_power(test, sd, df, m, margin, alpha)
    if test == "difference":
        return decision_probability(test, "different", sd, m, margin, alpha, margin)
    decision = "non-inferior" if test == "non-inferiority" else "equivalent"
    return decision_probability(test, decision, sd, m, margin, alpha, 0.0)


def predictive_power(test: str, sd: float, df: float, m: int, margin: float,
                     alpha: float) -> float:
    """`planned_power` averaged over σ given a pilot's sd on `df` degrees of freedom."""
    if not df > 0 or m < MIN_INDEPENDENT or not sd > 0:
        return math.nan
    q = dist.chi2_ppf((np.arange(SD_GRID) + 0.5) / SD_GRID, df)
    sigmas = sd * np.sqrt(df / q)
    if test == "non-inferiority":          # vectorised: the noncentral t takes an array
        ncp = margin * math.sqrt(m) / sigmas
        return float(dist.nct_sf(dist.t_ppf(1 - alpha, m - 1), m - 1, ncp).mean())
    return float(np.mean([planned_power(test, s, m, margin, alpha) for s in sigmas]))


def power_text(test: str) -> str:
    """What `planned_power` is the probability of, in words."""
    return {"non-inferiority": "to show non-inferiority if ΔIC = 0",
            "equivalence": "to show equivalence if ΔIC = 0",
            "difference": "to detect |ΔIC| = δ"}[test]


def min_detectable(test: str, sd: float, m: int, alpha: float, power: float,
                   df: float | None = None) -> float:
    """The smallest δ this design shows at `power` (NaN below 4 nights)."""
    if m < MIN_INDEPENDENT or not sd > 0:
        return math.nan
    f = lambda d: planned_power(test, sd, m, d, alpha, df) - power
    hi = sd
    while f(hi) < 0:
        hi *= 2
    return brentq(f, 1e-9, hi, xtol=1e-7)


def nights_needed_for(test: str, sd: float, horizon: int, margin: float, alpha: float,
                      power: float, cap: int = 100_000, df: float | None = None) -> int | None:
    """Consecutive nights for `power` at δ = margin (None beyond `cap` nights)."""
    if not sd > 0:
        return None
    lo, hi = MIN_INDEPENDENT, MIN_INDEPENDENT
    while planned_power(test, sd, hi, margin, alpha, df) < power:
        lo, hi = hi, hi * 2
        if (hi - 1) * max(horizon, 1) + 1 > cap:
            return None
    while lo < hi:                       # power rises with m: bisect for the first m enough
        mid = (lo + hi) // 2
        if planned_power(test, sd, mid, margin, alpha, df) >= power:
            hi = mid
        else:
            lo = mid + 1
    return (hi - 1) * max(horizon, 1) + 1


def null_sd_delta(tickers: int, rho: float = 0.5) -> float:
    """An assumed sd of nightly ΔIC with no pilot: each path's RankIC over N tickers has sd
    ≈ 1/√(N-1) under no signal, and two paths' ICs correlated by rho differ by
    √(2(1-rho)) of that."""
    return math.sqrt(2 * (1 - rho)) / math.sqrt(max(tickers - 1, 1))


def power_table(sd: dict[int, float], nights: int, margin: float, alpha: float,
                power: float, test: str = "non-inferiority",
                df: dict[int, float] | None = None) -> list[dict]:
    """Per horizon: independent nights in the window, MDE, power at δ, nights needed; power
    is predictive at the horizons whose sd is an estimate on `df[h]` degrees of freedom."""
    rows = []
    for h, s in sorted(sd.items()):
        m, v = independent_count(nights, h), (df or {}).get(h)
        rows.append({"horizon": h, "nights": nights, "independent_nights": m, "sd_delta": s,
                     "mde": min_detectable(test, s, m, alpha, power, v),
                     "power_at_margin": planned_power(test, s, m, margin, alpha, v),
                     "nights_needed": nights_needed_for(test, s, h, margin, alpha, power,
                                                        df=v)})
    return rows


def propose(rows: list[dict], margin: float, power: float, step: float = 0.005) -> tuple[int, float]:
    """(primary horizon, margin): the horizon with the smallest MDE (the most independent
    nights per unit of noise); the margin as given when the window has `power` for it, else
    that MDE rounded up to `step`."""
    ok = [r for r in rows if np.isfinite(r["mde"])]
    if not ok:
        return rows[0]["horizon"], margin
    best = min(ok, key=lambda r: (r["mde"], r["horizon"]))
    if best["mde"] <= margin:             # the window has `power` at this margin already
        return best["horizon"], margin
    return best["horizon"], round(math.ceil(best["mde"] / step - 1e-9) * step, 6)


def false_reassurance(test: str, main_ic: float, sd_main_ic: float, tickers: int, m: int,
                      margin: float, alpha: float) -> float:
    """P(a backup whose grades carry no signal passes the plan), given main's IC.

    With no signal the backup's nightly RankIC is noise of sd ≈ 1/√(N-1) that does not
    co-move with main's, so the nightly ΔIC has mean -main_ic and sd
    √(sd_main_ic² + 1/(N-1)) — larger than a pilot's sd of two correlated paths. NaN below
    4 independent nights or without main's IC and its sd.
    """
    if not (math.isfinite(main_ic) and math.isfinite(sd_main_ic)) or tickers < 3:
        return math.nan
    sd = math.sqrt(sd_main_ic ** 2 + 1 / (tickers - 1))
    passing = "non-inferior" if test == "non-inferiority" else "equivalent"
    if test == "difference":
        return math.nan
    return decision_probability(test, passing, sd, m, margin, alpha, -main_ic)
