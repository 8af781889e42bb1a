"""Nights for the interchangeability test's power, from a pilot's own grades.

How many nights the test (`evals.interchange`) needs is a property of the grades, not of the
test: the per-ticker-night variance of g and main's draw-to-draw agreement ρ_RR set it, and
both move with the grades' tails, ties and persistence (on a heavy-tailed, persistent latent
at the user's QWK 0.12, 2 x 2 draws need 14 / 18 nights where Gaussian grades need 9 / 12).
So the plan's nights come from resampling the pilot's own grades.

The resampling (`pilot_nights`) is a ticker-block bootstrap of main's pilot draws: each
ticker's pool is every draw main gave it over the pilot's nights (failed draws kept, as NaN,
so the failure rate travels), which keeps its level, its tails, its ties and its own draw
noise. A simulated window of n nights draws K tickers with replacement and, each night, the
draws of a ticker without replacement from its pool (the same draw twice would be perfect
agreement): main's m draws, and the candidate's b draws — from the same pool for the equal
alternative (an equal backup, built from main's own draws), from another ticker's pool,
the same shuffle every night, for the noise alternative (a backup whose wrong order
persists). A slot keeps its ticker from one night to the next with probability φ and
otherwise takes another of the pilot's (`persistence`: φ fitted to the pilot's lags, within
`STAY`), so its level correlates φ^k at lag k; the products g adds up then correlate φ^k
where an AR(1) latent's squared level correlates φ^2k: more persistent, so the nights err
long. Each window is read by the test itself (`evals.icr_panels`, the fixed-sample t on
K − 1 df), and the nights are the fewest at which both decisions reach the power asked
over all windows of all resamples (predictive: a 5-night pilot's ρ_RR is uncertain by
about ±0.05 around 0.12, and the plan averages over it). On the bench's three DGPs, nights
proposed from a 5-night pilot deliver 0.95-0.99 mean power (goal 0.8): they err long, 2-4x
the need at the median and past `CAP` for some pilots (`bench/calibration.py`:
`planner_power_worst`).

How sure: the pilot's tickers are resampled `RESAMPLES` times (an outer bootstrap), each
drawing `PANELS` windows; the printed range is the 10th-90th percentile of the nights over
those resamples (each from a normal fit to its windows' g / se), beside the power at the
proposed nights over all windows. Seeded: the same pilot gives the same plan.

Without a pilot the plan is assumed: `evals.interchange.ASSUMED_VARS`, measured on the
heavy-tailed persistent grades of `bench/dgps.py` (t3 latent, AR(1) 0.9, QWK 0.12), the
worst of the three generating processes the bench checks, in the normal approximation.
`bench/calibration.py` checks that nights proposed from a 5-night pilot deliver the power on
each (`planner_power_worst`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dualpath.evals import dist
from dualpath.evals import icr_panels as ip

RESAMPLES, PANELS, CAP, CHUNK = 8, 20, 60, 10
STAY = (0.5, 0.9)       # the night-to-night persistence a pilot's lags are fitted within


@dataclass(frozen=True)
class NightsPlan:
    """Nights for power in both decisions, and how sure that is."""

    nights: int | None            # None: beyond `cap` nights
    low: int | None               # 10th-90th percentile over pilot resamples
    high: int | None
    power_equal: float            # at `nights`, over every simulated window
    power_noise: float
    source: str                   # "pilot: ..." or "assumed: ..."
    cap: int = CAP
    power: float = 0.8

    def text(self) -> str:
        """The plan's nights in words."""
        if self.nights is None:
            return f"more than {self.cap} nights for power {self.power:g} ({self.source})"
        head = f"{self.nights} nights for power {self.power:g} in both decisions"
        if self.low is None:
            return f"{head} ({self.source})"
        high = f">{self.cap}" if self.high is None else str(self.high)
        span = str(self.low) if high == str(self.low) else f"{self.low}–{high}"
        return (f"{head} (there {self.power_equal:.2f} equal, {self.power_noise:.2f} noise; "
                f"{span} over resamples of the pilot's tickers; {self.source})")


def pools(units: pd.DataFrame, baseline: str) -> list[np.ndarray]:
    """Each ticker's pilot draws on the baseline (grade codes, NaN for a failed draw)."""
    u = units[units["path"] == baseline]
    g = pd.to_numeric(u["grade"], errors="coerce").astype(float)
    levels = np.unique(g.dropna())
    codes = pd.Series(np.searchsorted(levels, g.fillna(levels[0] if len(levels) else 0)),
                      index=u.index).astype(float).where(g.notna())
    return [v.to_numpy() for _, v in codes.groupby(u["ticker"])]


def _distinct(rng: np.random.Generator, size: np.ndarray, k: int, shape: tuple) -> np.ndarray:
    """k distinct indices below `size` (broadcast to `shape`) per cell: sequential selection,
    each pick skipping the ones already taken."""
    picks = []
    for j in range(k):
        r = np.floor(rng.random(shape) * (size - j)).astype(np.int64)
        for p in sorted_picks(picks):
            r = r + (r >= p)
        picks.append(r)
    return np.stack(picks, axis=-1)


def sorted_picks(picks: list[np.ndarray]) -> list[np.ndarray]:
    """The picks so far, sorted cell by cell (the skip must run in increasing order)."""
    if not picks:
        return []
    return list(np.moveaxis(np.sort(np.stack(picks, -1), axis=-1), -1, 0))


def _windows(rng: np.random.Generator, pool: np.ndarray, size: np.ndarray, slots: np.ndarray,
             other: np.ndarray, draws: tuple[int, int]) -> dict:
    """Grade codes (panels, nights, K, draws) of main and of the two alternatives, the
    ticker slots' sources (panels, nights, K) given: `slots` main's (and an equal
    backup's), `other` a noise backup's."""
    m, b = draws
    idx = _distinct(rng, size[slots], m + b, slots.shape)
    take = lambda who, i: pool[who[..., None], i]
    own = _distinct(rng, size[other], b, other.shape)
    return {"main": take(slots, idx[..., :m]), "equal": take(slots, idx[..., m:]),
            "noise": take(other, own)}


def _sources(rng: np.random.Generator, start: np.ndarray, choices: np.ndarray, nights: int,
             stay: float, first: bool) -> np.ndarray:
    """Each slot's source ticker night by night (panels, nights, K) from `start` (panels,
    K): kept with probability `stay`, else redrawn from its panel's `choices` (panels, J), so
    a slot's level has night-to-night correlation stay^k at lag k, the pilot's tickers its
    stationary law. `first`: the window's first night is `start` itself."""
    out = np.empty(start.shape[:1] + (nights,) + start.shape[1:], dtype=np.int64)
    cur = start
    for t in range(nights):
        if t or not first:
            new = np.take_along_axis(choices, rng.integers(0, choices.shape[1], cur.shape), 1)
            cur = np.where(rng.random(cur.shape) < stay, cur, new)
        out[:, t] = cur
    return out


def persistence(units: pd.DataFrame, baseline: str) -> float:
    """The night-to-night correlation of a ticker's level on the baseline, from the pilot:
    φ_k = mean z̄_t z̄_(t+k) over tickers (z̄ a ticker-night's mean standardised rank) over
    ρ_RR (what two draws of one night share), fitted as φ^k over the pilot's lags, within
    `STAY` (a 5-night pilot's lags are noisy, and its decay beyond them is extrapolated);
    0.9 where the pilot has one night or no agreement."""
    z = _zbar(units, baseline)
    rr = _rho_rr(units, baseline)
    if z is None or z.shape[1] < 2 or not rr > 0:
        return 0.9
    lags = {}
    for k in range(1, z.shape[1]):
        v = (z[:, k:] * z[:, :-k]).ravel()
        v = v[~np.isnan(v)]
        if len(v):
            lags[k] = float(v.mean()) / rr
    grid = np.linspace(*STAY, 46)
    err = [sum((lags[k] - f ** k) ** 2 for k in lags) for f in grid]
    return float(grid[int(np.argmin(err))])


def _zbar(units: pd.DataFrame, baseline: str) -> np.ndarray | None:
    """(tickers, nights) of the baseline's mean standardised rank per ticker-night."""
    from dualpath.evals.interchange import standardized_ranks

    u = units[units["path"] == baseline]
    if not len(u):
        return None
    z = standardized_ranks(u)
    return z.groupby(["ticker", "night"])["z"].mean().unstack("night").to_numpy()


def _rho_rr(units: pd.DataFrame, baseline: str) -> float:
    from dualpath.evals.interchange import cluster_terms

    t = cluster_terms(units[units["path"] == baseline], baseline, baseline)
    return float(t["rr_s"].sum() / t["rr_n"].sum()) if t["rr_n"].sum() else math.nan


def simulate(pools_: list[np.ndarray], tickers: int, draws: tuple[int, int], limit: float,
             alpha: float, power: float, stay: float, seed: int = 0,
             resamples: int = RESAMPLES, panels: int = PANELS, cap: int = CAP) -> dict:
    """The two decisions' g / se (and df) for every night 1..N of `resamples` x `panels`
    simulated windows, N growing by `CHUNK` until both reach `power` (or `cap`)."""
    use = [p for p in pools_ if len(p) >= sum(draws)]
    size = np.array([len(p) for p in use])
    pool = np.full((len(use), size.max()), np.nan)
    for i, p in enumerate(use):
        pool[i, :len(p)] = p
    rng = np.random.default_rng(seed)
    outer = rng.integers(0, len(use), (resamples, len(use)))       # the pilot resampled
    choices = np.repeat(outer, panels, axis=0)
    draw = lambda: np.take_along_axis(choices, rng.integers(0, len(use), (len(choices),
                                                                           tickers)), 1)
    slots, other = draw(), draw()
    parts, z = {"equal": [], "noise": []}, {"equal": [], "noise": []}
    done = 0
    while done < cap:
        main_src = _sources(rng, slots, choices, CHUNK, stay, first=not done)
        noise_src = _sources(rng, other, choices, CHUNK, stay, first=not done)
        slots, other = main_src[:, -1], noise_src[:, -1]
        w = _windows(rng, pool, size, main_src, noise_src, draws)
        for alt in ("equal", "noise"):
            parts[alt].append(ip.terms(w["main"], w[alt]))
            t = ip.cumulative({k: np.concatenate([p[k] for p in parts[alt]], axis=-2)
                               for k in parts[alt][0]})
            z[alt] += [ip.statistic(t, n, limit) for n in range(done + 1, done + CHUNK + 1)]
        done += CHUNK
        if _reached(z, alpha, power) is not None:
            break
    return {"z": z, "resamples": resamples, "panels": panels}


def _power(stats: list[dict], alpha: float, alt: str) -> np.ndarray:
    """Share of windows deciding correctly at each night (rows: nights)."""
    out = []
    for s in stats:
        yes, no = ip.decisions(s, alpha)
        out.append((yes if alt == "equal" else no).mean())
    return np.array(out)


def _reached(z: dict, alpha: float, power: float) -> int | None:
    ok = (_power(z["equal"], alpha, "equal") >= power) & \
        (_power(z["noise"], alpha, "noise") >= power)
    ok[0] = False
    return int(np.argmax(ok)) + 1 if ok.any() else None


def _resample_nights(z: dict, alpha: float, power: float, resamples: int) -> list[float]:
    """Per outer resample: the first night both decisions reach `power` in a normal fit
    to its windows' g / se (a smooth curve from few windows)."""
    nights = []
    for r in range(resamples):
        ok_all = []
        for alt, sign in (("equal", 1), ("noise", -1)):
            row = []
            for s in z[alt]:
                v = sign * s["z"].reshape(resamples, -1)[r]
                df = max(float(np.median(s["df"])), 1.0)
                mu, sd = np.nanmean(v), np.nanstd(v, ddof=1)
                q = float(dist.t_ppf(1 - alpha, df))
                row.append(dist.norm_cdf((mu - q) / sd) if sd > 0 else 0.0)
            ok_all.append(np.array(row) >= power)
        ok = ok_all[0] & ok_all[1]
        ok[0] = False
        nights.append(float(np.argmax(ok) + 1) if ok.any() else math.inf)
    return nights


def pilot_nights(units: pd.DataFrame, baseline: str, tickers: int, draws: tuple[int, int],
                 power: float = 0.8, limit: float = 0.5, alpha: float = 0.05, seed: int = 0,
                 resamples: int = RESAMPLES, panels: int = PANELS, cap: int = CAP
                 ) -> NightsPlan | None:
    """Nights for `power` in both decisions at `tickers` and `draws` (the baseline's, the
    candidate's), from the pilot ``units``' baseline draws; None where the pilot cannot say
    (fewer than 3 tickers with enough draws, or main has one draw)."""
    if draws[0] < 2 or draws[1] < 1:
        return None
    # one order whatever the warehouse's scan gave (DuckDB returns rows unordered, and the
    # pools' order decides the seeded resamples: `metrics` and `candidate` read 21 and 23)
    keys = [c for c in ("ticker", "night", "draw", "path") if c in units.columns]
    units = units.sort_values(keys, kind="stable").reset_index(drop=True)
    p = pools(units, baseline)
    if sum(len(x) >= sum(draws) for x in p) < 3:
        return None
    stay = persistence(units, baseline)
    sim = simulate(p, tickers, draws, limit, alpha, power, stay, seed, resamples, panels, cap)
    n = _reached(sim["z"], alpha, power)
    per = _resample_nights(sim["z"], alpha, power, resamples)
    per = np.sort(per)       # inf: a resample that reached no power by the last night
    lo, hi = per[int(0.1 * (len(per) - 1))], per[int(math.ceil(0.9 * (len(per) - 1)))]
    nights_in = units[units["path"] == baseline]["night"].nunique()
    source = (f"resampled from {nights_in} pilot night(s) of {baseline}'s grades, "
              f"{resamples * panels} resampled windows")
    at = lambda alt: float(_power(sim["z"][alt], alpha, alt)[n - 1]) if n else math.nan
    fin = lambda v: int(math.ceil(v)) if math.isfinite(v) else None
    return NightsPlan(n, fin(lo), fin(hi), at("equal"), at("noise"), source, cap, power)


ASSUMED_SOURCE = ("assumed, no pilot: heavy-tailed persistent grades (t3 latent, AR(1) 0.9, "
                  "QWK 0.12; bench/dgps.py), normal approximation")


def assumed_nights(tickers: int, draws: tuple[int, int], power: float = 0.8,
                   limit: float = 0.5, alpha: float = 0.05) -> NightsPlan | None:
    """Without a pilot: `evals.interchange.ASSUMED_VARS` (measured on the heavy-tailed
    DGP, the slowest of the bench's three) in the normal approximation; None where main has
    one draw."""
    from dualpath.evals import interchange as ic

    var = ic.assumed_var(*draws)
    if var is None:
        return None
    n = ic.nights_needed(ic.ASSUMED_RHO_RR, var, tickers, limit, alpha, power)
    at = lambda alt: ic.decision_power(ic.ASSUMED_RHO_RR, var[alt], tickers, n, limit,
                                       alpha, alt) if n else math.nan
    return NightsPlan(n, None, None, at("equal"), at("noise"), ASSUMED_SOURCE, 250, power)


def study_nights(units: pd.DataFrame, x, power: float = 0.8) -> NightsPlan | None:
    """The nights a study like this one needs, from its own stored nights as the pilot
    (`pilot_nights` at `x`'s tickers, limit and α and each path's usual draws); None where
    `x` gives no interval (too few tickers, one draw on the baseline)."""
    from dualpath.evals.interchange import MIN_TICKERS

    if x is None or x.tickers < MIN_TICKERS or not np.isfinite(x.rho_rr):
        return None
    per = units[units["path"].isin([x.baseline, x.candidate])]
    draws = per.groupby(["path", "night", "ticker"]).size().groupby("path").median()
    m, b = (int(draws.get(p, 0)) for p in (x.baseline, x.candidate))
    return pilot_nights(units, x.baseline, x.tickers, (m, b), power, x.limit, x.alpha)
