"""The market's sessions: which dates are nights, and which night it is now.

A night is a session date of the configured exchange (`[market] calendar`, an
`exchange_calendars` code such as XKRX or XNYS), scored after that session's close. The demo's
'synthetic' calendar (weekdays minus every 23rd weekday, counted from `synthetic_start` in both
directions) goes through the same class, so the demo exercises the same machinery.

    cal = MarketCalendar.from_settings(cfg.market)
    cal.require_session(night)              # NotASession naming the sessions around it
    cal.default_night(datetime.now(UTC))    # the latest session whose close has passed
"""

from __future__ import annotations

import warnings
from datetime import date, datetime, time, timezone
from functools import lru_cache
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd

from dualpath.errors import ConfigError, NotASession, UserError

if TYPE_CHECKING:
    from dualpath.config import MarketSettings

SYNTHETIC = "synthetic"
SYNTHETIC_CLOSE = time(15, 30)      # the demo market closes like KRX, in the configured zone
SYNTHETIC_HOLIDAY_EVERY = 23        # every 23rd weekday is a synthetic holiday
FIRST_YEAR = 1990                   # exchange calendars are built from here ...
YEARS_AHEAD = 2                     # ... to the end of the year two years from now


def zone(name: str) -> ZoneInfo:
    """An IANA time zone, or a ConfigError saying how to name one."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"[market] timezone {name!r} is not an IANA time zone; use e.g. "
                          "'Asia/Seoul', 'America/New_York' or 'Europe/London'") from None


def exchange_zone(code: str) -> str:
    """The IANA zone an exchange trades in ('synthetic': Asia/Seoul); ValueError naming the
    known codes for an unknown one. Cheap: no calendar is built."""
    if code in (SYNTHETIC, "XKRX"):      # the common cases, without importing the library
        return "Asia/Seoul"
    import exchange_calendars as xcals
    from exchange_calendars.calendar_utils import _default_calendar_factories as factories

    try:
        return str(factories[xcals.resolve_alias(code)].tz)
    except (KeyError, xcals.errors.InvalidCalendarName):
        raise ValueError(_UNKNOWN.format(code=code)) from None


_UNKNOWN = ("calendar {code!r} is not an exchange calendar; use an exchange_calendars code "
            "(XKRX Korea, XNYS New York, XTKS Tokyo, XLON London, ...) or 'synthetic' for the "
            "demo market")


@lru_cache(maxsize=8)
def _exchange(code: str, last_year: int):
    # building a calendar takes ~1 s: one per code and process
    import exchange_calendars as xcals

    try:
        with warnings.catch_warnings():   # the library's own pandas deprecations, not ours
            warnings.simplefilter("ignore", DeprecationWarning)
            return xcals.get_calendar(code, start=f"{FIRST_YEAR}-01-01", end=f"{last_year}-12-31")
    except xcals.errors.InvalidCalendarName:
        raise ConfigError("[market] " + _UNKNOWN.format(code=code)) from None


class MarketCalendar:
    """Sessions of one market, its time zone and close times."""

    def __init__(self, name: str, tz: ZoneInfo, sessions: pd.DatetimeIndex,
                 closes_utc: pd.DatetimeIndex | None = None, close_time: time = SYNTHETIC_CLOSE):
        self.name, self.tz = name, tz
        self._sessions = sessions                     # sorted, tz-naive midnights
        self._closes = closes_utc                     # per session (exchange calendars)
        self._close_time = close_time                 # used when closes_utc is None
        self.first, self.last = sessions[0].date(), sessions[-1].date()

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_settings(cls, market: "MarketSettings", today: date | None = None) -> "MarketCalendar":
        """The calendar `[market]` names; the synthetic one anchors at `synthetic_start`."""
        last_year = (today or date.today()).year + YEARS_AHEAD
        if market.calendar == SYNTHETIC:
            # the demo market may lie in the future: its calendar runs well past its start
            return cls.synthetic(market.synthetic_start, zone(market.timezone),
                                 max(last_year, market.synthetic_start.year + 5))
        return cls.exchange(market.calendar, market.timezone, last_year)

    @classmethod
    def exchange(cls, code: str, timezone_name: str | None = None,
                 last_year: int | None = None) -> "MarketCalendar":
        """An `exchange_calendars` calendar; its own time zone unless one that agrees is given."""
        cal = _exchange(code, last_year or date.today().year + YEARS_AHEAD)
        own = str(cal.tz)
        if timezone_name is not None and zone(timezone_name) != ZoneInfo(own):
            raise ConfigError(f"[market] timezone {timezone_name!r} disagrees with calendar "
                              f"{code}, which trades in {own}; remove 'timezone' (the "
                              f"exchange's own zone is used) or set it to {own!r}")
        sessions = pd.DatetimeIndex(cal.sessions).tz_localize(None)
        return cls(code, ZoneInfo(own), sessions, pd.DatetimeIndex(cal.closes.array))

    @classmethod
    def synthetic(cls, start: date, tz: ZoneInfo, last_year: int) -> "MarketCalendar":
        """Weekdays minus every 23rd weekday counted from the first weekday on/after `start`."""
        anchor = np.busday_offset(np.datetime64(start, "D"), 0, roll="forward")
        first_year = min(FIRST_YEAR, start.year - 1)
        days = np.arange(np.datetime64(f"{first_year}-01-01"),
                         np.datetime64(f"{last_year + 1}-01-01"), dtype="datetime64[D]")
        days = days[np.is_busday(days)]
        # k = 1 on the anchor, as SyntheticMarket counts; busday_count is negative before
        # the anchor, so the pattern extends backwards (a night before the market is a session
        # without prices, not a refused date)
        k = np.busday_count(anchor, days) + 1
        keep = k % SYNTHETIC_HOLIDAY_EVERY != 0
        return cls(SYNTHETIC, tz, pd.DatetimeIndex(days[keep]))

    # -- queries --------------------------------------------------------------------------
    def _check(self, d: date) -> pd.Timestamp:
        if isinstance(d, datetime):
            d = d.date()
        if not self.first <= d <= self.last:
            raise UserError(f"{d} is outside the {self.name} calendar ({self.first} .. "
                            f"{self.last}); give a date in that range")
        return pd.Timestamp(d)

    def is_session(self, d: date) -> bool:
        """Whether `d` is a trading session."""
        return self._check(d) in self._sessions

    def previous_session(self, d: date) -> date:
        """The last session strictly before `d`."""
        i = self._sessions.searchsorted(self._check(d), side="left") - 1
        if i < 0:
            raise UserError(f"no {self.name} session before {d} (the calendar starts {self.first})")
        return self._sessions[i].date()

    def next_session(self, d: date) -> date:
        """The first session strictly after `d`."""
        i = self._sessions.searchsorted(self._check(d), side="right")
        if i >= len(self._sessions):
            raise UserError(f"no {self.name} session after {d} (the calendar ends {self.last})")
        return self._sessions[i].date()

    def session_on_or_before(self, d: date) -> date:
        """`d` itself when it is a session, else the session before it."""
        return d if self.is_session(d) else self.previous_session(d)

    def sessions(self, start: date, end: date) -> list[date]:
        """Sessions from `start` to `end`, both included."""
        lo, hi = self._check(start), self._check(end)
        s = self._sessions
        return [t.date() for t in s[(s >= lo) & (s <= hi)]]

    def sessions_after(self, d: date, n: int) -> list[date]:
        """The `n` sessions after `d`: those an `n`-session forward return steps over."""
        i = self._sessions.searchsorted(self._check(d), side="right")
        if i + n > len(self._sessions):
            raise UserError(f"the {self.name} calendar ends {self.last}, before {n} sessions "
                            f"after {d}")
        return [t.date() for t in self._sessions[i:i + n]]

    def sessions_between(self, after: date, upto: date) -> int:
        """How many sessions lie in (after, upto]: 'sessions behind' for a stale price."""
        s = self._sessions
        return int(((s > self._check(after)) & (s <= self._check(upto))).sum())

    def day_kind(self, d: date) -> str:
        """'Saturday, a weekend day' / 'Friday, an exchange holiday' / 'Monday, a session'."""
        d = d.date() if isinstance(d, datetime) else d
        kind = ("a session" if self.is_session(d) else "a weekend day" if d.weekday() >= 5 else
                "a synthetic holiday" if self.name == SYNTHETIC else "an exchange holiday")
        return f"{d:%A}, {kind}"

    def why_not(self, d: date) -> str:
        """Why `d` is not a session: a weekend or a holiday of this calendar."""
        return f"{d} is not a session of {self.name} ({self.day_kind(d)})"

    def require_session(self, d: date) -> date:
        """`d` when it is a session; else NotASession naming the sessions before and after."""
        if self.is_session(d):
            return d
        raise NotASession(f"{self.why_not(d)}; the previous session is "
                          f"{self.previous_session(d)}, the next is {self.next_session(d)}: "
                          "score one of those (--date YYYY-MM-DD)")

    def close_of(self, session: date) -> datetime:
        """When `session` closes, as an aware datetime in the market's zone."""
        ts = self._check(session)
        i = self._sessions.get_loc(ts)
        if self._closes is not None:
            return self._closes[i].to_pydatetime().astimezone(self.tz)
        return datetime.combine(session, self._close_time, self.tz)

    def default_night(self, now: datetime | None = None) -> date:
        """The latest session whose close has passed at `now` (an aware datetime; default:
        the current time), judged in the market's zone whatever the machine's zone."""
        now = datetime.now(timezone.utc) if now is None else now
        if now.tzinfo is None:
            raise ValueError("default_night needs an aware datetime (e.g. datetime.now(UTC))")
        local = now.astimezone(self.tz).date()
        night = self.session_on_or_before(local)
        while self.close_of(night) > now:           # tonight's session has not closed yet
            night = self.previous_session(night)
        return night

    def __repr__(self) -> str:
        return f"MarketCalendar({self.name!r}, {self.tz.key}, {self.first} .. {self.last})"


__all__ = ["MarketCalendar", "SYNTHETIC", "exchange_zone", "zone"]
