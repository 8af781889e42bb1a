"""Group-sequential looks: each weekly report's verdict keeps its error rate.

The user reads the report every week and acts on it; a fixed-sample test read at every look
rejects a true null far more often than α (a user who stopped at the first weekly
'non-inferior' had a type I error of 0.12-0.16). The planned looks (nights) get
Lan-DeMets O'Brien-Fleming-type alpha spending, α(t) = 2 - 2Φ(z_{1-α/2} / √t) at information
fraction t = nights / window nights, and the one-sided boundary at look k is the z with
P(no crossing before k, Z_k >= b_k | null) = α(t_k) - α(t_{k-1}), by the recursive numerical
integration of Jennison & Turnbull (2000, ch. 19) as `gsdesign` implements it (a numpy port
of R gsDesign's gridpts/h1/hupdate). Chosen over `spotify-confidence` (its solver needs
chartify and ipywidgets and pins pandas < 3), `confseq` (a C++ build, last release 2023,
for anytime-valid sequences whose boundaries are wider than a design with few planned looks
needs) and `expectation` (e-processes: valid at any stopping time, but conservative at
planned weekly looks); a design fixed in the plan is what the preregistration needs.
Checked against gsDesign's published bounds (5 equal looks, one-sided α = 0.025:
4.877, 3.357, 2.680, 2.290, 2.031) and rpact's (4 looks: 4.333, 2.963, 2.359, 2.014; 3:
3.710, 2.511, 1.993), and, independently of the grid, against the looks' joint normal law
(the null's chance of crossing by each look of the plan's designs is the spending there).
By simulation on Gaussian grades at 100 tickers (`bench/calibration_icr.py`, 8,000 panels
at the boundary, two runs, z boundaries) the plan's overall type I error across all looks was
0.051-0.055 (20 nights, looks 5/10/15/20) and 0.055 (30 nights).

Both of the interchangeability test's decisions are one-sided tests of g at level α, so each
uses these bounds on g / se. That ratio is t on K − 1 degrees of freedom (K tickers, the
clusters), not normal: read against z boundaries at 20 tickers the early looks crossed
1.4–10× their spending and the plan's type I error over all looks was 0.070–0.076. So
`bounds(..., df=K − 1)` maps each look's z boundary b to the t quantile with the same tail,
t_{K−1}^{-1}(Φ(b)): each look keeps its own spending under the statistic's real law, and the
looks' dependence (their nested nights) is the normal design's. That alone left 0.065-0.070
at 20 tickers on the bench's processes: g's upper tail is heavier than t's there. So the
looks read g over its standard error about the null value 0 (`Interchange.z_null`, the
score test's null-imposed variance; se² + g²/(K − 1) for balanced tickers). On three
generating processes (`bench/dgps.py`: Gaussian, heavy-tailed t3 and tied ordinal grades,
each with failed draws and a universe change) the type I error over all looks is then
≤ 0.06 at 20 and at 100 tickers (`bench/calibration.py`: `icr_seq_size_20`,
`icr_seq_size_100`).
"""

from __future__ import annotations

import math

import numpy as np

from dualpath.evals import dist
from dualpath.evals.roots import brentq

GRID = 18       # gsDesign's default grid size r


def obf_spending(t: float, alpha: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type α spent by information fraction t (one-sided α)."""
    if t <= 0:
        return 0.0
    return float(2 - 2 * dist.norm_cdf(dist.norm_ppf(1 - alpha / 2) / math.sqrt(min(t, 1))))


def _cross(grid, info_prev: float, info: float, b: float) -> float:
    """P(continuing to the previous look, then Z >= b now | null) from its subdensity."""
    z_prev, _, h_prev = grid
    delta = info - info_prev
    mean = z_prev * math.sqrt(info_prev)
    return float((h_prev * dist.norm_sf((b * math.sqrt(info) - mean) / math.sqrt(delta))).sum())


def bounds(looks: list[int], total: int, alpha: float, df=None) -> list[float]:
    """The boundary at each look (nights): z, or with `df` (one number, or one per look: K − 1
    at that look) the t quantile of the same one-sided tail (`t_bounds`). The last look is
    the final analysis and spends all of α that is left: at the window's end that is the
    spending function's α(1) = α; at a window that closed short (`closing_looks`) it is α
    less what the earlier looks spent, the usual rule when the final analysis comes before
    its planned information (the design spends exactly α, and the earlier looks keep the
    boundaries they were read against)."""
    z = z_bounds(looks, total, alpha)
    return z if df is None else t_bounds(z, df)


def t_bounds(z: list[float], df) -> list[float]:
    """Each z boundary as the t quantile (df: one, or one per look) with the same upper
    tail: P(T_df ≥ b_t) = P(Z ≥ b_z)."""
    dfs = np.broadcast_to(np.asarray(df, dtype=float), (len(z),))
    return [float(dist.t_ppf(dist.norm_cdf(b), d)) if d >= 1 else math.nan
            for b, d in zip(z, dfs)]


def per_look(df, looks: int):
    """df as one value per look (None stays None; the looks not reached yet take the last)."""
    if df is None:
        return None
    d = list(np.atleast_1d(np.asarray(df, dtype=float)))
    return d + [d[-1]] * (looks - len(d))


def z_bounds(looks: list[int], total: int, alpha: float) -> list[float]:
    """The normal design's z boundaries (`bounds` without df)."""
    from gsdesign import h1, hupdate

    out, grid, prev_info, spent = [], None, 0.0, 0.0
    for i, n in enumerate(looks):
        info = n / total
        target = (alpha if i == len(looks) - 1 else obf_spending(info, alpha)) - spent
        if grid is None:
            b = float(dist.norm_isf(target))
        else:
            f = lambda b, g=grid, ip=prev_info, i=info: _cross(g, ip, i, b) - target
            b = brentq(f, -10, 40, xtol=1e-10)
        grid = h1(GRID, 0.0, info, -np.inf, b) if grid is None else \
            hupdate(GRID, 0.0, info, -np.inf, b, 0.0, prev_info, grid)
        spent += target
        prev_info = info
        out.append(b)
    return out


def planned_looks(window: int, every: int = 5, first: int = 5) -> list[int]:
    """Weekly looks (every 5 sessions) from `first` nights, and the window's end."""
    looks = list(range(first, window, every))
    return looks + [window]


def closing_looks(looks: list[int], collected: int) -> list[int]:
    """The looks of a window that closed with `collected` nights, fewer than its last
    planned look (a window night missing, left out): the planned looks before it, then the
    final look at the nights actually collected. Its boundary is `bounds` of these looks
    over the window's planned nights, so the earlier looks keep their boundaries and the
    final one spends what they left of α: in all the design spends exactly α, as planned
    (`tests/test_icr_short_window.py` computes the overall type I error from the looks'
    joint normal law)."""
    return [n for n in looks if n < collected] + [collected]


def sequential_verdict(zs: list[float], looks: list[int], total: int, alpha: float,
                       df=None) -> tuple[str, int | None]:
    """(verdict, the look index it was reached at) from g / se at each look so far: the
    first look whose z crosses +b ('interchangeable') or -b ('not interchangeable'); else
    'inconclusive' once every planned look is in, and 'no decision yet' before. `df`: the
    t degrees of freedom of g / se at the looks so far (K − 1; `bounds`)."""
    b = bounds(looks, total, alpha, per_look(df, len(looks)))
    for k, z in enumerate(zs):
        if math.isfinite(z) and z >= b[k]:
            return "interchangeable", k
        if math.isfinite(z) and z <= -b[k]:
            return "not interchangeable", k
    return ("inconclusive" if len(zs) >= len(looks) else "no decision yet"), None


NOISE_PATHS = 20_000     # seeded: the rate's Monte Carlo error is <= 0.004


def noise_rate(x, looks: list[int], reached: int, verdict: str, total: int | None = None
               ) -> float:
    """P(a candidate whose grades are noise gets `verdict` by look `reached` of this design),
    given the baseline's draws: ρ_TR's sum grows as a Brownian motion in nights (its looks
    nested, correlation √(n_i / n_j)), each look's g and se scaled from x's `noise_terms` by
    √(nights / n_j); seeded Monte Carlo of the first crossing. 'no decision yet' and
    'inconclusive' are the share that crosses no boundary through `reached`. `total`: the
    window's planned nights (default the last look; a window closed short has its final
    look before it, `closing_looks`, and the same boundaries as its verdict)."""
    if not (math.isfinite(x.sd_noise_tr) and x.sd_noise_tr > 0 and math.isfinite(x.g_low)) \
            or reached < 1:
        return math.nan
    # z here is simulated normal, so its boundaries are z's (each t boundary has z's tail)
    b = np.array(bounds(looks, total or looks[-1], x.alpha))[:reached]
    n = np.array(looks[:reached], dtype=float)
    steps = np.random.default_rng(0).normal(size=(NOISE_PATHS, reached))
    w = (steps * np.sqrt(np.diff(n, prepend=0.0))).cumsum(axis=1) / np.sqrt(n)
    scale = np.sqrt(x.nights / n)
    z = (x.g_noise + x.sd_noise_tr * scale * w) / (x.se_noise * scale)
    up, down = z >= b, z <= -b
    hit = up | down
    first, crossed = hit.argmax(axis=1), hit.any(axis=1)
    rows = np.arange(NOISE_PATHS)
    if verdict == "interchangeable":
        return float((crossed & up[rows, first]).mean())
    if verdict == "not interchangeable":
        return float((crossed & down[rows, first]).mean())
    return float((~crossed).mean())
