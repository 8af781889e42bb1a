"""The freshness gate: does the warehouse hold the prices a night needs?

A night N is a session scored after N's close: the prompts read closes up to and including N,
and forward returns start from N's close. So a ticker is *fresh* for night N when the
warehouse has its price for session N itself; *stale* when its last price is an earlier
session (how many sessions behind is given); *missing* when it has no price on or before N;
*halted* when the warehouse records a halt for N (`price_gaps`, a blank price in a file).
Prices dated on non-sessions are ignored here, as in the forward-return calendar.

The newest price day is *partial* when fewer universe tickers have a price on it than on the
session before it had (a file still arriving). `never_matures` flags a night whose forward
returns could not be completed from the configured source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

import duckdb
import pandas as pd

from dualpath.calendar import SYNTHETIC, MarketCalendar
from dualpath.warehouse.db import has_table

SHOWN = 5


def as_line(message: str) -> str:
    """A freshness message as a line of a log or a report footer: 'prices: ' before it
    unless its first words already say prices ('prices are fresh …', 'stale prices for …'
    read 'prices: prices are fresh …' with the prefix)."""
    head = message.split(": ", 1)[0]
    return message if re.search(r"\bprices?\b", head) else f"prices: {message}"


def _more(items: list[str], limit: int = SHOWN) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


@dataclass(frozen=True)
class Freshness:
    """Per-ticker price freshness for one night; `ok` when no ticker is stale or missing."""

    night: date
    last_priced: dict[str, date | None]        # last priced session <= night, per ticker
    behind: dict[str, int]                     # sessions between that and the night
    stale: list[str]                           # priced, but not on the night's session
    missing: list[str]                         # no price on or before the night
    halted: list[str]                          # known halted on the night (not stale)
    newest: date | None                        # newest priced session <= night (universe)
    partial: bool                              # the newest day covers fewer tickers than before
    never_matures: bool = False
    messages: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.stale and not self.missing

    def frame(self) -> pd.DataFrame:
        """One row per ticker: ticker, last_priced, sessions_behind, status."""
        status = {t: "fresh" for t in self.last_priced}
        status |= {t: "stale" for t in self.stale} | {t: "missing" for t in self.missing}
        status |= {t: "halted" for t in self.halted}
        return pd.DataFrame({"ticker": list(self.last_priced),
                             "last_priced": list(self.last_priced.values()),
                             "sessions_behind": pd.Series([self.behind.get(t) for t in
                                                           self.last_priced], dtype=object),
                             "status": [status[t] for t in self.last_priced]})


def _last_priced(con: duckdb.DuckDBPyConnection, tickers: list[str], night: date,
                 calendar: MarketCalendar) -> tuple[dict, dict]:
    """Per ticker: last priced session <= night; and per session: how many tickers."""
    df = con.execute("SELECT ticker, date FROM prices WHERE date <= ? AND ticker IN "
                     "(SELECT unnest(?))", [night, tickers]).df()
    df["date"] = pd.to_datetime(df["date"]).dt.date
    sessions = {d for d in df["date"].unique() if calendar.is_session(d)}   # per day, not row
    df = df[df["date"].isin(sessions)]
    last = df.groupby("ticker")["date"].max().to_dict()
    counts = df.groupby("date")["ticker"].nunique().to_dict()
    return {t: last.get(t) for t in tickers}, counts


def _halted(con: duckdb.DuckDBPyConnection, night: date) -> set[str]:
    if not has_table(con, "price_gaps"):
        return set()
    return {r[0] for r in con.execute("SELECT ticker FROM price_gaps WHERE date = ?",
                                      [night]).fetchall()}


def freshness(con: duckdb.DuckDBPyConnection, tickers: list[str], night: date,
              calendar: MarketCalendar, market=None, max_horizon: int = 0) -> Freshness:
    """How fresh the warehouse's prices are for `night` (a session: NotASession otherwise).

    `market` (the `[market]` settings) and `max_horizon` enable the `never_matures` flag.
    """
    calendar.require_session(night)
    last, counts = _last_priced(con, list(tickers), night, calendar)
    halted = sorted(_halted(con, night) & set(tickers) - {t for t, d in last.items() if d == night})
    behind = {t: calendar.sessions_between(d, night) for t, d in last.items() if d is not None}
    missing = sorted(t for t, d in last.items() if d is None and t not in halted)
    stale = sorted(t for t, d in last.items() if d is not None and d < night and t not in halted)
    newest = max((d for d in last.values() if d is not None), default=None)
    prev = calendar.previous_session(newest) if newest else None
    partial = bool(newest and 0 < counts.get(newest, 0) < counts.get(prev, 0))
    never = _never_matures(con, night, calendar, market, max_horizon)
    msgs = _messages(night, tickers, last, behind, stale, missing, halted, newest, partial,
                     counts, calendar)
    if never:
        msgs.append(never)
    return Freshness(night, last, behind, stale, missing, halted, newest, partial,
                     bool(never), msgs)


def _messages(night, tickers, last, behind, stale, missing, halted, newest, partial, counts,
              calendar) -> list[str]:
    n, msgs = len(tickers), []
    fresh = sum(1 for d in last.values() if d == night)
    if not stale and not missing:
        msgs.append(f"prices are fresh for {night}: {fresh} of {n} ticker(s) priced on the "
                    f"night's session" + (f", {len(halted)} halted" if halted else ""))
        return msgs
    if newest is None:
        msgs.append(f"no prices on or before {night} for any of the {n} universe ticker(s); "
                    "import prices (`dualpath prices import FILE` or `dualpath prices update`)")
        return msgs
    if newest < night:
        behind_all = calendar.sessions_between(newest, night)
        msgs.append(f"no ticker has a price for the night's session {night}: the newest are "
                    f"from {newest}, {behind_all} session(s) before; update them (`dualpath "
                    "prices update`)")
    if stale:
        worst = sorted(stale, key=lambda t: -behind[t])
        shown = [f"{t} (last {last[t]}, {behind[t]} session(s) behind)" for t in worst]
        msgs.append(f"stale prices for {night}: {len(stale)} of {n} ticker(s) have no price "
                    f"for the night's session: {_more(shown)}")
    if missing:
        msgs.append(f"no prices at all on or before {night} for {len(missing)} of {n} "
                    f"ticker(s): {_more(missing)}")
    if partial:
        prev = calendar.previous_session(newest)
        msgs.append(f"the newest price day {newest} is partly filled: {counts[newest]} "
                    f"ticker(s) against {counts[prev]} on {prev} (a file still arriving?)")
    if halted:
        msgs.append(f"{len(halted)} ticker(s) halted on {night}: {_more(halted)}")
    return msgs


def _never_matures(con, night: date, calendar: MarketCalendar, market, max_horizon: int) -> str:
    """Why forward returns of `night` can never be complete ('' when they can)."""
    if market is None or max_horizon <= 0:
        return ""
    try:
        end = calendar.sessions_after(night, max_horizon)[-1]
    except Exception:
        return (f"the {calendar.name} calendar ends {calendar.last}: the {max_horizon}-session "
                f"forward return of {night} can never mature")
    has_end = con.execute("SELECT count(*) FROM prices WHERE date >= ?", [end]).fetchall()[0][0]
    if has_end:
        return ""
    if market.calendar == SYNTHETIC and market.synthetic_seed is not None:
        return (f"the synthetic market in the warehouse ends before {end}: the {max_horizon}-"
                f"session forward return of {night} can never mature (import a longer market)")
    if market.source == "files" and market.prices_file is None and market.prices_dir is None:
        return (f"no price source is configured ([market] prices_file, prices_dir or source), "
                f"so the {max_horizon}-session forward return of {night} (due {end}) will "
                "never mature unless prices are imported by hand")
    return ""


def coverage(con: duckdb.DuckDBPyConnection, tickers: list[str],
             calendar: MarketCalendar) -> Freshness | None:
    """Freshness at the newest session the warehouse prices (after an import): judged on the
    warehouse, so an incremental file is not 'missing' the tickers it does not carry."""
    row = con.execute("SELECT max(date) FROM prices WHERE ticker IN (SELECT unnest(?))",
                      [list(tickers)]).fetchall()[0]
    if row[0] is None:
        return None
    newest = min(row[0], calendar.last)
    return freshness(con, tickers, calendar.session_on_or_before(newest), calendar)
