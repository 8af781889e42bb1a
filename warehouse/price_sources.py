"""Prices every night: what is new in the configured sources goes into the warehouse.

Sources, all from `[market]`:
- `prices_file` and `prices_dir` (a drop folder of *.csv / *.parquet, read in name order;
  two files that give one ticker and day different prices are refused, naming both and the
  rows: `price_checks.file_conflicts`). Always available and
  idempotent: every night all files are read, and only rows the warehouse lacks or that
  revise a stored price are written, so an unchanged folder writes nothing and says nothing.
- `source = "pykrx" | "fdr" | "yfinance"`: the universe's recent sessions fetched online
  (optional extras, imported only when used). A ticker with no prices gets
  `backfill_sessions`; the others the sessions since their last price plus `refetch_sessions`.

A source that fails (a malformed file, a library not installed, the network) is reported in
the `UpdateReport` and the others still import: the night is scored on what there is, and
the freshness gate says what that is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Callable

import duckdb
import pandas as pd

from dualpath.calendar import MarketCalendar
from dualpath.config import MarketSettings
from dualpath.errors import DataError, DualpathError
from dualpath.warehouse.db import has_table
from dualpath.warehouse.price_checks import file_conflicts
from dualpath.warehouse.freshness import Freshness, freshness
from dualpath.warehouse.prices import (TARGETS, import_prices, move_warnings, new_rows,
                              prior_prices, read_prices_file, validate_prices)

SUFFIXES = (".csv", ".parquet", ".pq")
Fetcher = Callable[[dict[str, date], date, MarketSettings], pd.DataFrame]


@dataclass
class SourceResult:
    """What one source gave tonight: rows new to the warehouse, revisions, warnings, error."""

    name: str
    files: int = 0
    new: int = 0
    revised: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str | None = None

    def line(self) -> str:
        if self.error:
            return f"{self.name}: FAILED: {self.error}"
        files = f"{self.files} file(s), " if self.files else ""
        return f"{self.name}: {files}{self.new} new row(s), {self.revised} revised"


@dataclass
class UpdateReport:
    """The night's price update: per source, and the freshness of the warehouse after it."""

    night: date
    sources: list[SourceResult]
    freshness: Freshness

    @property
    def new(self) -> int:
        return sum(s.new for s in self.sources)

    @property
    def failed(self) -> list[SourceResult]:
        return [s for s in self.sources if s.error]

    def lines(self) -> list[str]:
        """Human summary: one line per source, its warnings, then the freshness messages."""
        out = []
        for s in self.sources:
            out.append(s.line())
            out += [f"  warning: {w}" for w in s.warnings]
        if not self.sources:
            out.append("no price source configured ([market] prices_file, prices_dir, source)")
        return out + self.freshness.messages


def drop_files(folder: Path) -> list[Path]:
    """The drop folder's price files in name order (hidden and partial files skipped)."""
    if not folder.is_dir():
        raise FileNotFoundError(f"drop folder {folder} does not exist; create it or fix "
                                "[market] prices_dir")
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES
                  and not p.name.startswith((".", "~")))


def _import_changes(con, frame: pd.DataFrame, halts: list, result: SourceResult,
                    calendar: MarketCalendar, settings: MarketSettings) -> set:
    """Write what `frame` adds or revises (moves checked against the warehouse's prior day);
    returns the (ticker, date) keys written."""
    new, revised = new_rows(con, frame)
    changes = pd.concat([new, revised])[list(TARGETS)]
    keys = set(zip(changes["ticker"], pd.to_datetime(changes["date"]).dt.date))
    # without the price_gaps table a halt cannot be remembered: it is reported when its file
    # changes something, not every night
    halts = sorted(set(halts) - keys - _known(con, halts)) if has_table(con, "price_gaps") else []
    if changes.empty and not halts:
        return set()
    if not changes.empty:
        changes = changes.assign(date=pd.to_datetime(changes["date"]))
        result.warnings += move_warnings(changes, prior_prices(con, changes),
                                         settings.max_abs_log_return, result.name)
    if len(revised):
        ex = revised.iloc[0]
        result.warnings.append(f"{result.name}: {len(revised)} stored price(s) revised, e.g. "
                               f"{ex['ticker']} {ex['date']} adj_close {ex['old_adj']:g} -> "
                               f"{ex['adj_close']:g} (forward returns of past nights change)")
    changes.attrs["halts"] = halts
    import_prices(con, changes)
    result.new, result.revised = len(new), len(revised)
    return keys | set(halts)


def _known(con, keys: list) -> set:
    """The (ticker, date) keys the warehouse already has a price or a recorded gap for."""
    if not keys:
        return set()
    tables = ["prices"] + (["price_gaps"] if has_table(con, "price_gaps") else [])
    found = set()
    for table in tables:
        found |= set(con.execute(f"SELECT ticker, date FROM {table} WHERE ticker IN "
                                 "(SELECT unnest(?))", [sorted({t for t, _ in keys})]).fetchall())
    return found & set(keys)


def _from_files(con, paths: list[Path], result: SourceResult, tickers: list[str],
                calendar: MarketCalendar, settings: MarketSettings) -> None:
    """Validate each file on its own (an error names the file), then import their union;
    a file's warnings are shown only on the night it changes something."""
    frames, notes = [], []
    for i, p in enumerate(paths):
        try:
            raw = read_prices_file(p, settings.columns, lenient=True,
                                   encoding=settings.encoding)
            if "ticker" not in raw.columns and settings.ticker_from_filename:
                raw.insert(0, "ticker", p.stem)          # 005930.csv: a one-ticker export
            # moves are checked once, on what changes, against the warehouse's prior day
            f, w = validate_prices(raw, tickers, p.name, calendar=calendar,
                                   date_format=settings.date_format,
                                   max_abs_log_return=float("inf"),
                                   thousands=settings.thousands)
        except DualpathError as e:
            result.warnings.append(f"{p.name} skipped: {e}")
            continue
        frames.append(f.assign(_order=i))
        notes.append((set(zip(f["ticker"], f["date"].dt.date)) | set(f.attrs["halts"]), w))
    result.files = len(paths)
    if not frames:
        return
    if clash := file_conflicts(frames, [p.name for p in paths], result.name):
        result.error = clash
        return
    union = pd.concat(frames).sort_values("_order", kind="stable")
    union = union.drop_duplicates(["ticker", "date"], keep="last")[list(TARGETS)]
    priced = set(zip(union["ticker"], union["date"].dt.date))
    halts = [h for keys, _ in notes for h in keys - priced]     # blank here, priced nowhere
    mark = len(result.warnings)
    changed = _import_changes(con, union, halts, result, calendar, settings)
    file_notes = [w for keys, ws in notes if keys & changed for w in ws]
    result.warnings[mark:mark] = file_notes


# -- online sources: each returns a long frame (ticker, date, close, adj_close) -----------------

def _need(module: str, extra: str):
    """The optional library, imported only when its source is used."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError:
        raise DualpathError(f"{module.split('.')[0]} is not installed; `pip install {extra}` "
                            "or set [market] source = \"files\"") from None


def fetch_pykrx(starts: dict[str, date], end: date, settings: MarketSettings) -> pd.DataFrame:
    """pykrx `stock.get_market_ohlcv` per ticker (adjusted: its 종가 is the adjusted close)."""
    stock = _need("pykrx.stock", "pykrx")
    frames = []
    for t, start in starts.items():
        df = stock.get_market_ohlcv(f"{start:%Y%m%d}", f"{end:%Y%m%d}", t + settings.symbol_suffix,
                                    adjusted=True)
        if df is None or df.empty:
            continue
        frames.append(pd.DataFrame({"ticker": t, "date": pd.to_datetime(df.index),
                                    "close": float("nan"), "adj_close": df["종가"].to_numpy()}))
    return _long(frames)


def fetch_fdr(starts: dict[str, date], end: date, settings: MarketSettings) -> pd.DataFrame:
    """FinanceDataReader `DataReader` per ticker. Its KRX Close is taken as adjusted (the
    Naver source serves 수정주가); a split it did not adjust is warned as a suspicious move."""
    fdr = _need("FinanceDataReader", "finance-datareader")
    frames = []
    for t, start in starts.items():
        df = fdr.DataReader(t + settings.symbol_suffix, start.isoformat(), end.isoformat())
        if df is None or df.empty:
            continue
        frames.append(pd.DataFrame({"ticker": t, "date": pd.to_datetime(df.index),
                                    "close": df["Close"].to_numpy(),
                                    "adj_close": df["Close"].to_numpy()}))
    return _long(frames)


def fetch_yfinance(starts: dict[str, date], end: date, settings: MarketSettings) -> pd.DataFrame:
    """yfinance `download` of all tickers at once (auto_adjust off: Close and Adj Close)."""
    yf = _need("yfinance", "yfinance")
    symbols = {t + settings.symbol_suffix: t for t in starts}
    df = yf.download(list(symbols), start=min(starts.values()).isoformat(),
                     end=(end + timedelta(days=1)).isoformat(),      # yfinance's end is exclusive
                     auto_adjust=False, actions=False, progress=False, group_by="column")
    if df is None or df.empty:
        return _long([])
    if not isinstance(df.columns, pd.MultiIndex):            # one symbol, flat columns
        df.columns = pd.MultiIndex.from_product([df.columns, list(symbols)[:1]])
    if "Adj Close" not in df.columns.get_level_values(0):    # (Ticker, Price) orientation
        df = df.swaplevel(axis=1)
    frames = []
    for sym, t in symbols.items():
        if sym not in df["Adj Close"].columns:
            continue
        idx = pd.to_datetime(df.index)
        idx = idx.tz_localize(None) if idx.tz is not None else idx
        part = pd.DataFrame({"ticker": t, "date": idx, "close": df["Close"][sym].to_numpy(),
                             "adj_close": df["Adj Close"][sym].to_numpy()})
        frames.append(part[part["date"].dt.date >= starts[t]].dropna(subset=["adj_close"]))
    return _long(frames)


FETCHERS: dict[str, Fetcher] = {"pykrx": fetch_pykrx, "fdr": fetch_fdr, "yfinance": fetch_yfinance}


def _long(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype="datetime64[ns]" if c == "date" else
                                          object if c == "ticker" else float) for c in TARGETS})
    return pd.concat(frames, ignore_index=True)[list(TARGETS)]


def fetch_starts(con, tickers: list[str], night: date, calendar: MarketCalendar,
                 settings: MarketSettings) -> dict[str, date]:
    """Per ticker, the first session to fetch: `refetch_sessions` before its last price, or
    `backfill_sessions` before the night when it has none."""
    last = dict(con.execute("SELECT ticker, max(date) FROM prices WHERE ticker IN "
                            "(SELECT unnest(?)) AND date <= ? GROUP BY ticker",
                            [tickers, night]).fetchall())

    def back(d: date, n: int) -> date:
        for _ in range(n):
            d = calendar.previous_session(d)
        return d

    backfill = back(night, settings.backfill_sessions - 1)
    return {t: (max(back(last[t], settings.refetch_sessions), backfill) if t in last else backfill)
            for t in tickers}


def _from_online(con, name: str, tickers: list[str], night: date, calendar: MarketCalendar,
                 settings: MarketSettings, fetcher: Fetcher, result: SourceResult) -> None:
    try:
        frame = fetcher(fetch_starts(con, tickers, night, calendar, settings), night, settings)
        frame, w = validate_prices(frame, tickers, name, calendar=calendar,
                                   max_abs_log_return=float("inf"))
    except DualpathError as e:
        result.error = str(e)
        return
    except Exception as e:                   # the network, the library: reported, never raised
        result.error = f"{type(e).__name__}: {str(e)[:300]}"
        return
    mark = len(result.warnings)
    if _import_changes(con, frame, frame.attrs["halts"], result, calendar, settings):
        result.warnings[mark:mark] = w


def update_prices(con: duckdb.DuckDBPyConnection, settings: MarketSettings, base_dir: Path,
                  calendar: MarketCalendar, tickers: list[str], night: date | None = None,
                  *, max_horizon: int = 0,
                  fetchers: dict[str, Fetcher] | None = None) -> UpdateReport:
    """Import what is new from every configured source, then judge freshness for `night`
    (default: the calendar's default night now). Never raises for a failing source."""
    night = calendar.require_session(night or calendar.default_night())
    results = []
    for name, paths, error in _file_sources(settings, base_dir):
        r = SourceResult(name, error=error)
        if error:
            results.append(r)
            continue
        try:
            _from_files(con, paths, r, tickers, calendar, settings)
        except Exception as e:             # a locked/corrupt warehouse table, not one file
            r.error = f"{type(e).__name__}: {str(e)[:300]}"
        if r.files and not r.new and not r.revised and r.warnings and \
                all(" skipped: " in w for w in r.warnings) and len(r.warnings) == r.files:
            r.error = "every file was skipped (see the warnings)"
        results.append(r)
    if settings.source != "files":
        r = SourceResult(settings.source)
        fetcher = (fetchers or FETCHERS)[settings.source]
        _from_online(con, settings.source, tickers, night, calendar, settings, fetcher, r)
        results.append(r)
    fresh = freshness(con, tickers, night, calendar, market=settings, max_horizon=max_horizon)
    _log(con, night, results)
    return UpdateReport(night, results, fresh)


# The log of nightly price updates, one row per source: the SQL of the migration that adds it.
# Until the warehouse has it, the report is the only record.
PRICE_UPDATES_SQL = """
CREATE TABLE IF NOT EXISTS price_updates (
    updated_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    night DATE NOT NULL, source VARCHAR NOT NULL, files INTEGER NOT NULL,
    new_rows INTEGER NOT NULL, revised_rows INTEGER NOT NULL,
    error VARCHAR, warnings_json VARCHAR NOT NULL
);
"""


def _log(con, night: date, results: list[SourceResult]) -> None:
    import json

    if not results or not has_table(con, "price_updates"):
        return
    con.executemany("INSERT INTO price_updates (night, source, files, new_rows, revised_rows, "
                    "error, warnings_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [[night, r.name, r.files, r.new, r.revised, r.error,
                      json.dumps(r.warnings, ensure_ascii=False)] for r in results])


def _file_sources(settings: MarketSettings, base_dir: Path) -> list[tuple[str, list[Path], str | None]]:
    """(name, files, error) of prices_file and prices_dir; a missing folder is an error."""
    out = []
    if settings.prices_file is not None:
        path = _resolve(base_dir, settings.prices_file)
        out.append((f"prices_file {path}", [path], None))
    if settings.prices_dir is not None:
        folder = _resolve(base_dir, settings.prices_dir)
        try:
            out.append((f"drop folder {folder}", drop_files(folder), None))
        except FileNotFoundError as e:
            out.append((f"drop folder {folder}", [], str(e)))
    return out


def _resolve(base_dir: Path, p: Path) -> Path:
    return p if p.is_absolute() else (Path(base_dir) / p).resolve()


@dataclass
class FileImport:
    """One file imported by hand: rows read, rows new / revised, warnings, coverage after."""

    rows: int
    new: int
    revised: int
    tickers: int
    first: date | None
    last: date | None
    warnings: list[str]
    coverage: Freshness | None


def import_file(con: duckdb.DuckDBPyConnection, path: Path, settings: MarketSettings,
                calendar: MarketCalendar, tickers: list[str], *,
                columns: dict[str, str] | None = None, ticker: str | None = None,
                date_format: str | None = None, strict: bool = False,
                encoding: str | None = None, thousands: str | None = None) -> FileImport:
    """Validate one file against the calendar and the warehouse's prior day, import it, and
    judge the universe's coverage on the warehouse afterwards. `strict`: any warning is an
    error and nothing is imported. Raises DataError for a malformed file."""
    raw = read_prices_file(path, columns if columns is not None else settings.columns, ticker,
                           lenient=columns is None, encoding=encoding or settings.encoding)
    name = Path(path).name
    # moves are checked once, from the warehouse's day before the file on
    frame, warnings = validate_prices(raw, tickers, name, calendar=calendar,
                                      date_format=date_format or settings.date_format,
                                      max_abs_log_return=float("inf"),
                                      thousands=thousands or settings.thousands)
    warnings += move_warnings(frame, prior_prices(con, frame), settings.max_abs_log_return, name)
    if strict and warnings:
        raise DataError(f"{name}: --strict and {len(warnings)} warning(s), nothing imported:\n"
                        + "\n".join(f"  - {w}" for w in warnings))
    new, revised = new_rows(con, frame)
    import_prices(con, frame)
    from dualpath.warehouse.freshness import coverage
    dates = frame["date"]
    return FileImport(len(frame), len(new), len(revised), frame["ticker"].nunique(),
                      dates.min().date() if len(frame) else None,
                      dates.max().date() if len(frame) else None,
                      warnings, coverage(con, tickers, calendar))
