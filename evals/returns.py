"""Forward returns on the trading calendar the price data implies.

The calendar is every date on which any ticker has a price. The h-day forward return of a
ticker on night t runs from the close of t (or of the last trading day before t, if t is not
one) to the close h trading days later. A missing price is a missing return, never a zero;
a horizon whose end lies beyond the last priced day is *pending*, never a value.
Takes the ``prices`` frame (see `evals`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

OK, MISSING, PENDING = "ok", "missing", "pending"


def forward_returns(prices: pd.DataFrame, nights: pd.Series | list, horizons: list[int]) -> pd.DataFrame:
    """One row per night x ticker x horizon: fwd_return (NaN unless status == 'ok'), status.

    Columns: night, ticker, horizon, start_date, end_date, fwd_return, status.
    """
    px = prices.pivot(index="date", columns="ticker", values="adj_close").sort_index()
    calendar = px.index.values.astype("datetime64[ns]")
    nights = pd.to_datetime(pd.Series(list(nights))).drop_duplicates().sort_values()
    rows = []
    for night in nights:
        pos = np.searchsorted(calendar, np.datetime64(night, "ns"), side="right") - 1
        if pos < 0:
            continue   # a night before any price: nothing to measure from
        start = px.iloc[pos]
        for h in horizons:
            if pos + h >= len(calendar):
                rows.append(pd.DataFrame({"night": night, "ticker": px.columns, "horizon": h,
                                          "start_date": calendar[pos], "end_date": pd.NaT,
                                          "fwd_return": np.nan, "status": PENDING}))
                continue
            end = px.iloc[pos + h]
            ret = end / start - 1.0
            rows.append(pd.DataFrame({"night": night, "ticker": px.columns, "horizon": h,
                                      "start_date": calendar[pos], "end_date": calendar[pos + h],
                                      "fwd_return": ret.values,
                                      "status": np.where(ret.isna().values, MISSING, OK)}))
    if not rows:
        return pd.DataFrame(columns=["night", "ticker", "horizon", "start_date", "end_date",
                                     "fwd_return", "status"])
    return pd.concat(rows, ignore_index=True)
