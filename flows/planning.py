"""How long a night will take, from speeds measured in the warehouse: the question the user
answered by hand ("100 tickers ≈ 4.8 h"), with an interval and its source labelled.

Seconds per unit (one ticker × one draw) on the throughput basis, from complete one-segment
runs of the same path at the same slot count; with none, the path's `measured` block (a
sweep's replay at the same slots), then a simulated path's time model, and otherwise nothing
(said so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import numpy as np

from dualpath.config import Config
from dualpath.sim.model import expected_unit_seconds
from dualpath.evals.speed import seconds
from dualpath.warehouse.db import reader
from dualpath.warehouse.queries import speed_runs


@dataclass(frozen=True)
class Estimate:
    """Seconds per unit for one path: a median and an interval, and where they come from."""

    path: str
    source: str                 # measured (n runs) | time model | no measurements yet
    runs: int
    s_per_unit: float
    lo: float
    hi: float

    def hours(self, units: int) -> tuple[float, float, float]:
        return tuple(units * s / 3600 for s in (self.s_per_unit, self.lo, self.hi))

    @property
    def known(self) -> bool:
        return bool(self.s_per_unit) and not math.isnan(self.s_per_unit)

    def draws_that_fit(self, seconds: float, tickers: int) -> int | None:
        """Whole draws (draw-major: every ticker once per draw) that fit at the median;
        None when nothing is measured (unknown, not 0)."""
        if not self.known:
            return None
        return int(seconds // (self.s_per_unit * tickers))


def estimates(cfg: Config) -> list[Estimate]:
    """One estimate per path of the config."""
    measured: dict[str, list[float]] = {}
    path = cfg.resolve(cfg.warehouse.path)
    if path.exists():
        with reader(path) as con:
            runs = speed_runs(con)
        runs = runs.assign(s=seconds(runs, "throughput", "unit"))
        for p, slots, s in runs[["path", "slots", "s"]].itertuples(index=False):
            if p in cfg.paths and slots == cfg.paths[p].slots:
                measured.setdefault(p, []).append(s)
    out = []
    for name, sp in cfg.paths.items():
        s = np.array(measured.get(name, []))
        if len(s):
            lo, hi = (np.percentile(s, [10, 90]) if len(s) >= 5 else (s.min(), s.max()))
            out.append(Estimate(name, f"measured ({len(s)} runs, "
                                f"{'p10–p90' if len(s) >= 5 else 'min–max'})", len(s),
                                float(np.median(s)), float(lo), float(hi)))
        elif _swept(sp) is not None:
            m = _swept(sp)
            out.append(Estimate(name, f"measured by sweep {sp.measured.sweep or '?'} (replay "
                                f"set {sp.measured.replay_set or '?'}, "
                                f"{sp.measured.measured_on or 'undated'})", 0, m, m, m))
        elif sp.engine == "sim":
            m = expected_unit_seconds(sp.sim, sp.slots)
            out.append(Estimate(name, "time model (no measurements yet)", 0, m, m, m))
        else:
            out.append(Estimate(name, "no measurements yet", 0, math.nan, math.nan, math.nan))
    return out


def _swept(sp) -> float | None:
    """Seconds per unit from the path's `measured` block, when it was measured at the
    path's slot count (a replay set holds one unit per ticker, so its s/ticker on the
    throughput basis is s/unit)."""
    m = sp.measured
    if m is None or m.ticker_s_throughput is None or m.slots not in (None, sp.slots):
        return None
    return m.ticker_s_throughput


NIGHT_START = "18:30"   # the nightly deployment's start, market time (flows.deploy.NIGHTLY_CRON)


def window_hours(deadline: str | None, start: str = NIGHT_START) -> float | None:
    """Hours from the night's start to `deadline` (the next morning when earlier), or None."""
    if not deadline:
        return None
    (h0, m0), (h1, m1) = (map(int, t.split(":")) for t in (start, deadline))
    minutes = (h1 * 60 + m1) - (h0 * 60 + m0)
    return (minutes if minutes > 0 else minutes + 24 * 60) / 60


def seconds_until(deadline: str, tz: str, now: datetime) -> float:
    """Seconds from `now` to the next HH:MM in the market's time zone."""
    zone = ZoneInfo(tz)
    local = now.astimezone(zone)
    hh, mm = map(int, deadline.split(":"))
    at = datetime.combine(local.date(), time(hh, mm), zone)
    if at <= local:
        at += timedelta(days=1)
    return (at - local).total_seconds()


__all__ = ["Estimate", "estimates", "seconds_until", "window_hours", "date"]
