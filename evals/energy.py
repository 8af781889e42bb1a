"""What a ticker costs in energy on each path: board joules per ticker, their ratio over
paired nights, and the night it implies in kWh (and money, with a price).

Input: the ``runs`` frame (`evals` contract) with the energy columns `joules` (J over the
run's scoring window, NULL when unknown), `energy_s`, `idle_w` (the idle floor read before
the night), `energy_unknown` (why not) and, where stored, the basis: `energy_basis`
(counter | sampled), `energy_hz` (samples a second) and `energy_error_j` (the integral's
error bound), and the ``speed_runs`` frame of
`evals.speed.run_speed` (run_id, path, night, is_result, tickers). Only runs whose speed is a
result count (complete, one segment, undisturbed — a GPU whose power limit, link or tenants
changed mid-night disturbs its run).

The ratio is the geometric mean of nightly ratios (candidate ÷ baseline J/ticker, both runs
results on the same night; per unit, each run at its own draws, where the paired runs' draws
differ: `evals.draws`) with a t interval on their logs; the interval's coverage is checked by
simulation in the tests (independent nights: unlike the slowdown's it is not widened for
slow drift).
The basis is stated every time: board energy, the scoring window only (not the server's
start-up or the ingest), idle floor included, and how each path's joules were measured
(`basis_words`: the GPU's energy counter, or power sampled at N Hz and integrated within a
bound; amdgpu's hwmon has no energy counter, so an AMD card's joules are integrated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dualpath.evals import dist      # scipy: `dualpath runs` imports `basis_words` lazily
from dualpath.evals import draws as rd
from dualpath.evals.format import draws_words

BASIS = "board energy, scoring only, idle floor included"


def basis_words(basis: str | None, hz: float | None = None,
                error_pct: float | None = None) -> str:
    """How joules were measured, in words: 'the GPU's energy counter' or 'power sampled at
    10 Hz and integrated (error ≤ 0.4%)'."""
    if basis == "counter":
        return "the GPU's energy counter"
    if basis != "sampled":
        return "basis not stored"
    rate = f" at {hz:.3g} Hz" if hz is not None and not pd.isna(hz) else ""
    bound = f" (error ≤ {error_pct:.1%})" if error_pct is not None and not pd.isna(error_pct) \
        else ""
    return f"power sampled{rate} and integrated{bound}"


def run_energy(runs: pd.DataFrame, speed_runs: pd.DataFrame) -> pd.DataFrame:
    """Per run: path, night, is_result, J per ticker (all of its draws), J per ticker above
    the idle floor, mean and idle watts, why its energy is unknown, and its basis (the
    error bound as a share of the joules)."""
    cols = ["run_id", "path", "night", "is_result", "draws", "j_per_ticker", "j_per_unit",
            "j_above_idle_per_ticker", "mean_w", "idle_w", "energy_unknown", "energy_basis",
            "energy_hz", "energy_error_pct"]
    if not len(speed_runs) or "joules" not in runs:
        return pd.DataFrame(columns=cols)
    runs = runs.assign(**{c: runs[c] if c in runs else None
                          for c in ("energy_basis", "energy_hz", "energy_error_j")})
    e = runs.set_index("run_id")[["joules", "energy_s", "idle_w", "energy_unknown",
                                  "energy_basis", "energy_hz", "energy_error_j"]]
    s = speed_runs.set_index("run_id")
    s = s.assign(draws=s["draws"] if "draws" in s else np.nan)[
        ["path", "night", "is_result", "tickers", "draws"]].join(e)
    t = s["tickers"].astype(float)
    j = s["joules"].astype(float)
    # per unit: the run's joules over its own tickers x draws (`evals.draws`)
    out = s.assign(j_per_ticker=j / t, j_per_unit=j / (t * s["draws"].astype(float)),
                   j_above_idle_per_ticker=(j - s["idle_w"].astype(float)
                                            * s["energy_s"].astype(float)) / t,
                   mean_w=j / s["energy_s"].astype(float),
                   energy_error_pct=s["energy_error_j"].astype(float) / j)
    return out.reset_index()[cols]


def path_basis(known: pd.DataFrame, path: str) -> str:
    """A path's basis over its result runs: the counter where every run had one, else the
    slowest sampling and the widest error bound among them."""
    p = known[known["path"] == path]
    if "energy_basis" not in p or not len(p):
        return basis_words(None)
    if p["energy_basis"].eq("counter").all():
        return basis_words("counter")
    sampled = p[p["energy_basis"].eq("sampled")]
    if not len(sampled):
        return basis_words(None)
    return basis_words("sampled", sampled["energy_hz"].astype(float).min(),
                       sampled["energy_error_pct"].astype(float).max())


@dataclass(frozen=True)
class EnergyCompare:
    """Energy per ticker on two paths, and what a night costs."""

    baseline: str
    candidate: str
    per_ticker: dict                 # path: median J/ticker (NaN: none known)
    above_idle: dict                 # path: median J/ticker above the idle floor
    idle_w: dict                     # path: median idle floor W
    unknown: dict                    # path: why its energy is unknown (no result has any)
    ratio: float | None
    lo: float
    hi: float
    level: float
    nights: int
    tickers: int
    draws: int | dict               # each path's draws now (its latest run's), or one count
    price: float | None = None
    currency: str = ""
    kwh: dict = field(default_factory=dict)      # path: kWh of a `tickers` night
    per: str = "ticker"             # the ratio's unit: "unit" where paired runs' draws differ
    draws_changed: dict = field(default_factory=dict)   # `evals.draws.changes`
    basis: dict = field(default_factory=dict)    # path: how its joules were measured


def compare(energy: pd.DataFrame, baseline: str | None, candidate: str | None,
            draws: int | dict,
            tickers: int = 100, level: float = 0.95, price: float | None = None,
            currency: str = "") -> EnergyCompare | None:
    """The candidate's J/ticker over the baseline's, or None without both paths' runs. Each
    night's runs are read at their own draws (`evals.draws`); `draws` (the config's) only
    where no run recorded them."""
    if not (baseline and candidate) or not len(energy):
        return None
    ok = energy[energy["is_result"].astype(bool)]
    if not {baseline, candidate} <= set(ok["path"]):
        return None
    known = ok[ok["j_per_ticker"].notna()]
    med = lambda col: {p: float(known[known["path"] == p][col].median())
                       for p in (candidate, baseline)}
    unknown = {}
    for p in (candidate, baseline):
        if not (known["path"] == p).any():
            why = ok[ok["path"] == p]["energy_unknown"].dropna()
            unknown[p] = why.iloc[-1] if len(why) else "no GPU reading stored"
    # the ratio compares the same work, one ticker x one draw, where the draws differ
    logs, per = rd.paired_logs(known, baseline, candidate, "j_per_ticker", "j_per_unit", draws)
    n = len(logs)
    ratio, lo, hi = paired_ratio(logs, level)
    pair = (candidate, baseline)
    steps, now = rd.changes(energy, pair), rd.now_draws(energy, pair, draws)
    per_ticker = med("j_per_ticker")
    # a night now: a path whose draws changed is costed per unit at its draws now
    night_j = {p: (med("j_per_unit")[p] * now[p] if p in steps else per_ticker[p])
               for p in pair}
    return EnergyCompare(baseline, candidate, per_ticker, med("j_above_idle_per_ticker"),
                         med("idle_w"), unknown, ratio, lo, hi, level, n, tickers, now, price,
                         currency, {p: v * tickers / 3.6e6 for p, v in night_j.items()},
                         per, steps, {p: path_basis(known, p) for p in pair})


def paired_ratio(logs: np.ndarray, level: float = 0.95) -> tuple[float | None, float, float]:
    """Geometric mean of nightly ratios (given as logs) and its t interval (NaN below 2)."""
    n = len(logs)
    if not n:
        return None, math.nan, math.nan
    mean = float(logs.mean())
    if n < 2:
        return math.exp(mean), math.nan, math.nan
    half = dist.t_ppf(0.5 + level / 2, n - 1) * logs.std(ddof=1) / math.sqrt(n)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _kj(j: float) -> str:
    return "—" if math.isnan(j) else (f"{j / 1e3:.1f} kJ" if j >= 1e3 else f"{j:.0f} J")


def energy_lines(e: EnergyCompare | None, candidate: str | None) -> list[str]:
    """The headline's third answer: energy per ticker on each path with the ratio and its
    interval, the night in kWh (and money), the basis, the idle floor."""
    head = "Energy — how much energy per ticker?"
    if e is None:
        return [f"{head}  unknown: no complete undisturbed run on both paths yet"] \
            if candidate else []
    c, b = e.candidate, e.baseline
    if e.unknown:
        return [f"{head}  unknown"] + [f"  {p}: {why}" for p, why in e.unknown.items()]
    if e.ratio is None:
        first = f"{head}  unknown ratio: no night with both paths' energy"
    else:
        ci = (f"{e.level:.0%} CI {e.lo:.2f}×–{e.hi:.2f}×, {e.nights} paired nights"
              if e.nights >= 2 else f"no interval: {e.nights} paired night(s)")
        first = f"{head}  {c} {e.ratio:.2f}× {b} ({ci})"
        if e.per == "unit":
            first += " per unit"
    kwh = lambda p: f"{e.kwh[p]:.2f} kWh" + (
        f" ({e.kwh[p] * e.price:.2f}{(' ' + e.currency) if e.currency else ''})"
        if e.price is not None else "")
    return [first,
            f"  {BASIS}: {c} {_kj(e.per_ticker[c])}, {b} {_kj(e.per_ticker[b])} per ticker "
            "(medians)",
            f"  a night of {e.tickers} tickers × {draws_words(e.draws, (c, b))}: {c} {kwh(c)}, "
            f"{b} {kwh(b)}",
            f"  idle floor: {c} {e.idle_w[c]:.0f} W, {b} {e.idle_w[b]:.0f} W; above it: "
            f"{c} {_kj(e.above_idle[c])}/ticker, {b} {_kj(e.above_idle[b])}/ticker"] + \
        ([f"  measured: {c} by {e.basis[c]}; {b} by {e.basis[b]}"] if e.basis else [])
