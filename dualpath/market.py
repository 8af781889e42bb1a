"""The synthetic market of the embedded default: 100 clearly fake tickers with a planted signal.

Each ticker has a hidden daily signal `a[t, i]` (AR(1), unit variance). The next day's return is
`beta_i * market[t+1] + edge * vol_i * a[t, i] + idiosyncratic noise`, so a grade that sees the
signal through noise earns a positive forward RankIC, and a grade that sees only noise earns
none. The edge (0.3: a perfect score would have a daily IC near 0.3) is far stronger than real
markets offer, so that the demo's few weeks of 20 tickers can show it above the noise. The
calendar is `dualpath.calendar`'s 'synthetic' one (weekdays minus every 23rd weekday, as
`[market] calendar = 'synthetic'` gives the nightly flow); one ticker has a 2:1 split, so raw
closes jump while adjusted closes do not (forward returns must use adjusted closes).
"""

from __future__ import annotations

from datetime import date
from functools import cached_property
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

from dualpath.calendar import MarketCalendar

WARMUP_DAYS = 80        # trading days of history before the first night (prompts use up to 60)
SPLIT_TICKER = "SYN007"


def synthetic_calendar(start: date, n_days: int = 0,
                       tz: ZoneInfo = ZoneInfo("Asia/Seoul")) -> MarketCalendar:
    """The 'synthetic' calendar anchored at `start`, long enough for `n_days` sessions."""
    # ~250 sessions a year; two spare years so a market's calendar outlives its prices
    return MarketCalendar.synthetic(start, tz, start.year + n_days // 240 + 2)


def trading_calendar(start: date, n_days: int) -> list[date]:
    """The first `n_days` sessions of the synthetic calendar from `start`."""
    cal = synthetic_calendar(start, n_days)
    return cal.sessions(start, cal.last)[:n_days]


class SyntheticMarket:
    """Seeded prices, calendar and hidden signal; every draw comes from one `np.random.Generator`."""

    def __init__(self, seed: int = 7, n_tickers: int = 100, start: date = date(2027, 1, 4),
                 n_days: int = WARMUP_DAYS + 60 + 25, edge: float = 0.3, phi: float = 0.9):
        self.seed = seed
        self.tickers = [f"SYN{i:03d}" for i in range(n_tickers)]
        self.dates = trading_calendar(start, n_days)
        self._index = {d: k for k, d in enumerate(self.dates)}
        self._col = {t: i for i, t in enumerate(self.tickers)}
        self.edge, self.phi = edge, phi

    @cached_property
    def _paths(self) -> tuple[np.ndarray, np.ndarray]:
        # One generator per component, each drawn row by row, so a longer market is a prefix
        # extension of a shorter one with the same seed (the simulated servers rely on it).
        gen = [np.random.default_rng([self.seed, k]) for k in range(4)]
        T, N = len(self.dates), len(self.tickers)
        shocks = gen[0].standard_normal((T, N))
        signal = np.empty((T, N))
        signal[0] = shocks[0]
        for t in range(1, T):
            signal[t] = self.phi * signal[t - 1] + np.sqrt(1 - self.phi**2) * shocks[t]
        vol = gen[1].uniform(0.012, 0.03, N)
        beta = gen[1].uniform(0.6, 1.4, N)
        level = 20.0 * np.exp(gen[1].uniform(0, 3, N))
        market = gen[2].normal(0.0003, 0.01, T)
        idio = gen[3].standard_normal((T, N)) * vol
        ret = np.zeros((T, N))
        ret[1:] = beta * market[1:, None] + self.edge * vol * signal[:-1] + idio[1:]
        adj = level * np.exp(np.cumsum(ret, axis=0))
        return signal, adj

    def signal(self, ticker: str, night: date) -> float | None:
        """The hidden signal of a ticker on a night; None for an unknown ticker or day."""
        i, t = self._col.get(ticker), self._index.get(night)
        return None if i is None or t is None else float(self._paths[0][t, i])

    def prices(self) -> pd.DataFrame:
        """Long frame: ticker, date, close, adj_close (adj_close continuous across the split)."""
        _, adj = self._paths
        T, N = adj.shape
        close = adj.copy()
        split_at = min(T - 1, WARMUP_DAYS + 10)
        close[:split_at, self._col[SPLIT_TICKER]] *= 2.0  # pre-split raw price is twice as high
        return pd.DataFrame({
            "ticker": np.tile(self.tickers, T),
            "date": np.repeat(np.array(self.dates, dtype="datetime64[D]"), N),
            "close": close.ravel().round(4),
            "adj_close": adj.ravel().round(4),
        })

    def history(self, ticker: str, night: date, days: int) -> pd.DataFrame:
        """The last `days` trading days up to and including `night` (never later)."""
        t, i = self._index[night], self._col[ticker]
        lo = max(0, t - days + 1)
        _, adj = self._paths
        return pd.DataFrame({"date": self.dates[lo:t + 1], "adj_close": adj[lo:t + 1, i].round(4)})

    def nights(self, n: int, max_horizon: int = 20) -> list[date]:
        """`n` consecutive nights after the warm-up whose `max_horizon` returns all mature."""
        first = WARMUP_DAYS
        if first + n + max_horizon > len(self.dates):
            raise ValueError(f"market has {len(self.dates)} days; {n} nights with a "
                             f"{max_horizon}-day horizon need {first + n + max_horizon}")
        return self.dates[first:first + n]


def market_for_nights(seed: int, n_nights: int, n_tickers: int = 100, max_horizon: int = 20,
                      start: date = date(2027, 1, 4)) -> SyntheticMarket:
    """A market long enough for `n_nights` demo nights and their longest horizon to mature."""
    return SyntheticMarket(seed, n_tickers, start, WARMUP_DAYS + n_nights + max_horizon + 5)
