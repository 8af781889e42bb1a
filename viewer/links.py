"""The viewer's addresses, one home for every output that links to a page (`dualpath runs`,
the weekly report's templates follow the same scheme): `/night/YYYY-MM-DD` and
`/night/YYYY-MM-DD/TICKER[?draw=N]`, a ticker's nights `/ticker/TICKER` and the search of
answers `/search?q=…` under the viewer's base URL."""

from __future__ import annotations

from datetime import date
from urllib.parse import quote, urlencode


def night_url(base: str, night: date | str) -> str:
    """The page of one night under the viewer's base URL ("" for a path)."""
    return f"{base.rstrip('/')}/night/{night}"


def ticker_url(base: str, night: date | str, ticker: str, draw: int | None = None) -> str:
    """The page of one ticker on one night."""
    return (f"{night_url(base, night)}/{quote(ticker, safe='')}"
            + (f"?draw={draw}" if draw is not None else ""))


def history_url(base: str, ticker: str) -> str:
    """The page of one ticker across every night."""
    return f"{base.rstrip('/')}/ticker/{quote(ticker, safe='')}"


def search_url(base: str, q: str, path: str | None = None) -> str:
    """The search of every stored answer for `q` (on one path, if given)."""
    return f"{base.rstrip('/')}/search?" + urlencode({"q": q, **({"path": path} if path else {})})
