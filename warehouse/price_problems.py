"""Every problem of a price file, reported at once.

A file exported by hand is often wrong in several ways at once (a Korean HTS export: CP949
text, Korean headers, thousands separators, dates with dots). Each check of the import adds
what it found here, with its fix, and the import goes on checking what it can (a file that
is not UTF-8 but reads as CP949 is read as CP949; a header the fix would map is read as
mapped), so one attempt names every problem: nothing is imported until all are fixed.
"""

from __future__ import annotations

import difflib
import re

import pandas as pd

from dualpath.errors import DataError

REQUIRED = ("ticker", "date", "adj_close")
# the names an export gives each column, compared without case, spaces, dots, underscores
# or a unit in brackets (수정종가(원), Adj. Close)
_ALIASES = {"adjclose": "adj_close", "adjustedclose": "adj_close", "수정종가": "adj_close",
            "수정주가": "adj_close", "close": "close", "종가": "close", "date": "date",
            "일자": "date", "날짜": "date", "symbol": "ticker", "code": "ticker",
            "ticker": "ticker", "종목코드": "ticker"}


def alias(header: str) -> str | None:
    """The column a header names, if it is a known name of one."""
    return _ALIASES.get(re.sub(r"\(.*?\)|[\s._]", "", str(header).lower()))


# year-first formats a date column can be read with unambiguously, as --date-format
_YEAR_FIRST = ("%Y.%m.%d", "%Y/%m/%d", "%Y%m%d", "%Y. %m. %d", "%Y.%m.%d.")


class Problems:
    """The problems found in one file so far, each one message that says how to fix it."""

    def __init__(self, source: str, found: list[str] | None = None):
        self.source = source
        self.found: list[str] = list(found or [])

    def add(self, message: str) -> None:
        self.found.append(message)

    def check(self, fn, *args, **kw):
        """`fn(*args)`, its DataError kept as a problem (then None)."""
        try:
            return fn(*args, **kw)
        except DataError as e:
            self.add(str(e))
            return None

    def raise_any(self) -> None:
        """One DataError naming every problem (one alone: its own message)."""
        if not self.found:
            return
        if len(self.found) == 1:
            raise DataError(self.found[0])
        prefix = f"{self.source}: "
        items = [p.removeprefix(prefix) for p in self.found]
        raise DataError(f"{self.source}: {len(items)} problems, nothing imported; fix them all, "
                        "then import again:\n" + "\n".join(f"  - {p}" for p in items))


def closest(target: str, headers: list[str], aliases: dict[str, str]) -> list[str]:
    """Headers of the file that look most like `target` (or like a known name of it)."""
    names = [target, *(k for k, v in aliases.items() if v == target)]
    lower = {h.strip().lower(): h for h in headers}
    found: list[str] = []
    for name in names:
        for m in difflib.get_close_matches(name, list(lower), n=3, cutoff=0.6):
            if lower[m] not in found:
                found.append(lower[m])
    return found[:3]


def year_first_format(text: pd.Series) -> str | None:
    """The one year-first format every non-blank value of a date column reads with, if any
    (2026.11.27, 2026/11/27, 20261127: never ambiguous, unlike 03/04/2026)."""
    values = text.dropna()
    values = values[values.str.strip() != ""]
    if values.empty or not values.str.match(r"^\d{4}").all():
        return None
    for fmt in _YEAR_FIRST:
        if pd.to_datetime(values, format=fmt, errors="coerce").notna().all():
            return fmt
    return None


def missing_columns(raw: pd.DataFrame, source: str, problems: Problems) -> dict[str, str]:
    """A missing column is a problem, with the `--map` that fixes it (an adjusted close,
    수정종가 or Adj Close, before a plain one) or the headers closest to it; returns that map,
    so that the rest of the file is checked as the fix would read it."""
    missing = [c for c in REQUIRED if c not in raw.columns]
    if not missing:
        return {}
    headers = raw.attrs.get("headers") or [str(c) for c in raw.columns]
    # an adjusted close first: a file with both closes maps 수정종가, never 종가
    hints: dict[str, str] = {}
    for c in headers:
        if alias(c) in missing and alias(c) not in hints.values():
            hints[c] = alias(c)
    closes = [c for c in headers if alias(c) == "close"]
    adjusted_close = "adj_close" in missing and "adj_close" not in hints.values() and closes
    if adjusted_close:       # a close-only export: its close may be adjusted (pykrx, Naver)
        hints[closes[0]] = "adj_close"
    fix = []
    if hints:
        pairs = ",".join(f"'{s}'={t}" if " " in s else f"{s}={t}" for s, t in hints.items())
        fix.append(f'--map "{pairs}"' + (f" (only if {closes[0]} is adjusted for splits and "
                                          "dividends)" if adjusted_close else ""))
    if "ticker" in missing and "ticker" not in hints.values():
        fix.append("--ticker TICKER (a one-ticker export)")
    near = []
    for c in missing:
        if c not in hints.values() and c != "ticker" and (like := closest(c, headers, _ALIASES)):
            near.append(f"closest to {c}: {', '.join(like)}")
    problems.add(f"{source}: missing column(s) {missing}; need {list(REQUIRED)} (and "
                 f"optionally close); the file has {headers}"
                 + (f"; map them: {' and '.join(fix)}" if fix else "")
                 + (f" ({'; '.join(near)})" if near else ""))
    return {s.strip().lower(): t for s, t in hints.items()}
