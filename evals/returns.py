"""Forward returns on a trading calendar, vectorised over night x ticker.

The calendar is the exchange's sessions when given, else every date on which any ticker has
a price. The h-day forward return of a ticker on night t runs from the close of t (or of the
last session before t, if t is not one) to the close h sessions later. A missing price is a
missing return, never a zero; a horizon whose end lies beyond the last priced session is
*pending*, never a value. Takes the ``prices`` frame (see `evals`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

OK, MISSING, PENDING = "ok", "missing", "pending"
COLUMNS = ["night", "ticker", "horizon", "start_date", "end_date", "start_pos", "fwd_return",
           "status"]


def _calendar(prices: pd.DataFrame, sessions: Sequence | None) -> tuple[pd.DataFrame, int]:
    """(close matrix session x ticker, rows dropped for lying off the session calendar)."""
    px = prices.pivot(index="date", columns="ticker", values="adj_close").sort_index()
    if sessions is None:
        return px, 0
    cal = pd.DatetimeIndex(pd.to_datetime(list(sessions))).unique().sort_values()
    off = ~pd.to_datetime(prices["date"]).isin(cal)
    # a price on a non-session date (a vendor's holiday row) is ignored, not used as a close
    return px.reindex(cal), int(off.sum())


def forward_returns(prices: pd.DataFrame, nights: pd.Series | list, horizons: list[int],
                    sessions: Sequence | None = None) -> pd.DataFrame:
    """One row per night x horizon x ticker: fwd_return (NaN unless status == 'ok'), status.

    Columns: night, ticker, horizon, start_date, end_date, start_pos (the start's index on the
    calendar: nights whose start_pos differ by >= h have non-overlapping h-day windows),
    fwd_return, status. ``sessions``: sorted exchange session dates; horizons then step over
    sessions and price rows on other dates are ignored, their count in
    ``result.attrs["off_session_rows"]``.
    """
    px, off = _calendar(prices, sessions)
    calendar = px.index.values.astype("datetime64[ns]")
    close = px.to_numpy(dtype=float)
    priced = np.flatnonzero(~np.isnan(close).all(axis=1))
    last_priced = priced[-1] if len(priced) else -1
    nights = pd.to_datetime(pd.Series(list(nights), dtype=object)).drop_duplicates().sort_values()
    nv = nights.to_numpy(dtype="datetime64[ns]")
    pos = np.searchsorted(calendar, nv, side="right") - 1
    keep = pos >= 0                      # a night before the calendar has nothing to measure from
    nv, pos = nv[keep], pos[keep]
    tickers = px.columns.to_numpy()
    k, frames = len(tickers), []
    for h in horizons:
        end = pos + h
        matured = end <= last_priced
        safe = np.where(matured, end, pos)
        with np.errstate(invalid="ignore", divide="ignore"):
            ret = close[safe] / close[pos] - 1.0
        ret[~matured] = np.nan
        status = np.where(~matured[:, None], PENDING, np.where(np.isnan(ret), MISSING, OK))
        end_date = np.where(matured, calendar[safe], np.datetime64("NaT", "ns"))
        frames.append(pd.DataFrame({
            "night": np.repeat(nv, k), "ticker": np.tile(tickers, len(nv)), "horizon": h,
            "start_date": np.repeat(calendar[pos], k), "end_date": np.repeat(end_date, k),
            "start_pos": np.repeat(pos, k), "fwd_return": ret.ravel(),
            "status": status.ravel()}))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    out.attrs["off_session_rows"] = off
    return out
