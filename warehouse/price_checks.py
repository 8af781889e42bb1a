"""Plausibility checks of validated prices: each appends its warnings, none raises for a
move (a real 30% limit-down day exists; a user decides).

- off-session rows: a price on a date that is not a session is left out, so that a vendor's
  holiday row cannot shift the horizon calendar;
- moves: |log return| of adj_close above the threshold, one-day spikes (up and back), and a
  split in `close` that `adj_close` does not mirror (noted: returns use adj_close);
- gaps: days missing inside a ticker's span (against the calendar's sessions).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dualpath.calendar import MarketCalendar
from dualpath.errors import DataError

TARGETS = ("ticker", "date", "close", "adj_close")
MAX_ABS_LOG_RETURN = round(math.log(1.4), 4)     # a 40% day
SHOWN = 5


def _more(items: list[str], limit: int = SHOWN) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def off_session(df: pd.DataFrame, calendar: MarketCalendar, source: str,
                 warnings: list[str]) -> pd.DataFrame:
    days = pd.Series(df["date"].dt.date.unique())
    outside = [d for d in days if not calendar.first <= d <= calendar.last]
    if outside:
        raise DataError(f"{source}: dates {_more(sorted(map(str, outside)))} lie outside the "
                        f"{calendar.name} calendar ({calendar.first} .. {calendar.last})")
    off = {d for d in days if not calendar.is_session(d)}
    if not off:
        return df
    mask = df["date"].dt.date.isin(off)
    rows = df[mask].sort_values(["date", "ticker"])
    named = [f"{t} {d.date()} ({calendar.day_kind(d.date())})"
             for t, d in zip(rows["ticker"], rows["date"])]
    warnings.append(f"{source}: {int(mask.sum())} price row(s) on dates that are not "
                    f"{calendar.name} sessions were left out (a price there would shift the "
                    f"horizon calendar): {_more(named)}")
    return df[~mask]


def moves(df: pd.DataFrame, prior: pd.DataFrame | None, threshold: float, source: str,
           warnings: list[str]) -> None:
    """Suspicious moves, one-day spikes and splits in close not mirrored in adj_close."""
    if prior is not None and len(prior):
        p = prior[list(TARGETS)].assign(date=pd.to_datetime(prior["date"]), _prior=True)
        df = pd.concat([p, df.assign(_prior=False)], ignore_index=True)
    else:
        df = df.assign(_prior=False)
    df = df.sort_values(["ticker", "date"]).reset_index(drop=True)
    g = df.groupby("ticker", sort=False)
    la = np.log(df["adj_close"] / g["adj_close"].shift())
    lc = np.log(df["close"] / g["close"].shift())
    la_next = la.groupby(df["ticker"]).shift(-1)
    prev_a, prev_c = g["adj_close"].shift(), g["close"].shift()
    big = (la.abs() > threshold) & ~df["_prior"]
    spike = big & (la_next.abs() > threshold) & ((la + la_next).abs() < threshold)
    after_spike = spike.shift(fill_value=False) & big
    split = (lc.abs() > threshold) & ((lc - la).abs() > threshold) & ~df["_prior"] & ~big
    found = {"spike": [], "suspicious": [], "split": []}
    for i in np.flatnonzero(spike):
        found["spike"].append(f"{df.at[i, 'ticker']} on {df.at[i, 'date'].date()} "
                              f"({prev_a[i]:g} -> {df.at[i, 'adj_close']:g} -> "
                              f"{df.at[i + 1, 'adj_close']:g})")
    for i in np.flatnonzero(big & ~spike & ~after_spike):
        found["suspicious"].append(f"{df.at[i, 'ticker']} on {df.at[i, 'date'].date()} "
                                   f"({prev_a[i]:g} -> {df.at[i, 'adj_close']:g}, "
                                   f"x{math.exp(la[i]):.2f})")
    for i in np.flatnonzero(split):
        found["split"].append(f"{df.at[i, 'ticker']} on {df.at[i, 'date'].date()} (close "
                              f"{prev_c[i]:g} -> {df.at[i, 'close']:g}, x{math.exp(lc[i]):.2f}; "
                              f"adj_close x{math.exp(la[i]):.2f})")
    limit = f"|log return| > {threshold:g}"
    if found["spike"]:
        warnings.append(f"{source}: one-day spike in adj_close (up and back, each {limit}): "
                        f"{_more(found['spike'])}; a bad print? correct it in the source")
    if found["suspicious"]:
        warnings.append(f"{source}: suspicious move in adj_close ({limit}): "
                        f"{_more(found['suspicious'])}; if it is a split, adj_close is not "
                        "adjusted for it")
    if found["split"]:
        warnings.append(f"{source}: unadjusted split in close, not mirrored in adj_close: "
                        f"{_more(found['split'])}; returns use adj_close, so this is only "
                        "noted")


def gaps(df: pd.DataFrame, calendar: MarketCalendar | None, halts: list, source: str,
          warnings: list[str]) -> None:
    """Tickers missing days inside their own span: sessions of the calendar when given, else
    the days the file itself has (missing days are missing returns, never zero)."""
    if df.empty:
        return
    halted = {(t, pd.Timestamp(d)) for t, d in halts}
    if calendar is not None:
        lo, hi = df["date"].min().date(), df["date"].max().date()
        days = pd.DatetimeIndex(pd.to_datetime(calendar.sessions(lo, hi)))
    else:
        days = pd.DatetimeIndex(df["date"].unique()).sort_values()
    gaps = []
    for t, dates in df.groupby("ticker")["date"]:
        span = days[(days >= dates.min()) & (days <= dates.max())]
        lacking = [d for d in span.difference(pd.DatetimeIndex(dates)) if (t, d) not in halted]
        if lacking:
            gaps.append(f"{t} ({len(lacking)} day(s), e.g. {lacking[0].date()})")
    if gaps:
        against = f"{calendar.name} sessions" if calendar else "the file's own calendar"
        warnings.append(f"{source}: gaps against {against} (missing days are missing returns, "
                        f"never zero): {_more(gaps)}")


def move_warnings(frame: pd.DataFrame, prior: pd.DataFrame | None = None,
                  threshold: float = MAX_ABS_LOG_RETURN, source: str = "prices") -> list[str]:
    """Suspicious moves, spikes and unadjusted splits of a validated frame, checked from the
    `prior` rows (`prior_prices`) on."""
    out: list[str] = []
    f = frame[list(TARGETS)].assign(date=pd.to_datetime(frame["date"]))
    moves(f.sort_values(["ticker", "date"]).reset_index(drop=True), prior, threshold, source, out)
    return out


def file_conflicts(frames: list[pd.DataFrame], names: list[str], source: str) -> str | None:
    """Why files of one folder cannot be imported together: two of them give different
    prices for one (ticker, date) (each frame carries `_order`, its index in `names`).
    Which file is right is the user's call: nothing of the folder is imported, and the
    message names both files and the rows (once, the later name won without a word)."""
    if len(frames) < 2:
        return None
    rows = pd.concat(frames)[["ticker", "date", "close", "adj_close", "_order"]]
    rows = rows.drop_duplicates(["ticker", "date", "close", "adj_close"])
    clash = rows[rows.duplicated(["ticker", "date"], keep=False)].sort_values(
        ["ticker", "date", "_order"], kind="stable")
    if clash.empty:
        return None
    firsts = clash.groupby(["ticker", "date"], sort=False).nth([0, 1])
    pairs = {}
    for (t, d), g in firsts.groupby(["ticker", "date"], sort=False):
        a, b = g.iloc[0], g.iloc[1]
        pairs.setdefault((names[int(a["_order"])], names[int(b["_order"])]), []).append(
            f"{t} {d.date()} adj_close {a['adj_close']:g} vs {b['adj_close']:g}")
    (fa, fb), shown = next(iter(pairs.items()))
    n = sum(len(v) for v in pairs.values())
    more = f" (and {len(pairs) - 1} other pair(s) of files)" if len(pairs) > 1 else ""
    return (f"{source}: files {fa} and {fb} give different prices for {n} (ticker, date) "
            f"row(s){more}: {_more(shown)}; nothing from the folder was imported: remove or "
            "correct one of them (to revise a price, change the file that gave it)")
