"""Price files in, validated, never silently: errors stop the import, warnings are returned.

A price file (CSV or Parquet, read by DuckDB itself) has columns `ticker, date, adj_close` and
optionally `close`; other headers are mapped with `columns` (`--map`), a one-ticker export gets
its ticker from `ticker=` (`--ticker`).

Errors (nothing is imported): missing columns (with the `--map` that would fix them), dates
that are not ISO YYYY-MM-DD (or the explicit `date_format`), prices that are not finite
positive numbers, duplicate rows that disagree. Rows are named by file line.

Warnings (the rest is imported): a blank price (a halt: that day stays missing, never zero),
a price on a date that is not a session of the calendar (left out, so it cannot shift the
horizon calendar), a suspicious move (|log return| above the threshold, a one-day spike, a
split in `close` that `adj_close` does not mirror), exact duplicates, tickers outside the
universe, gaps against the calendar. Coverage of the universe is judged on the warehouse
after an import (`warehouse.freshness`), never from one (possibly incremental) file. The
plausibility checks (sessions, moves, gaps) are in `warehouse.price_checks`.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from dualpath.calendar import MarketCalendar
from dualpath.errors import DataError, UserError
from dualpath.warehouse.price_problems import (REQUIRED, Problems, missing_columns,  # noqa: F401
                                     year_first_format)
from dualpath.warehouse.price_text import as_utf8, check_text, is_utf8
from dualpath.warehouse.db import has_table, transaction
from dualpath.warehouse.freshness import Freshness, coverage, freshness  # noqa: F401  (re-exported)
from dualpath.warehouse.price_checks import (MAX_ABS_LOG_RETURN, TARGETS, gaps, move_warnings,  # noqa: F401
                                    moves, off_session)
from dualpath.warehouse.quoting import ident

SHOWN = 5                                        # examples per message
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]00:00(?::00(?:\.0+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$")


def _lines(mask: pd.Series | np.ndarray, index: pd.Index, limit: int = SHOWN) -> str:
    """'line(s) 2, 5' of a CSV (after its header line), else 'row(s) 1, 4' (Parquet, frames)."""
    csv = index.name == "line"
    idx = [int(i) + (2 if csv else 1) for i in index[np.asarray(mask)][:limit]]
    n = int(np.asarray(mask).sum())
    return (("line(s) " if csv else "row(s) ") + ", ".join(map(str, idx))
            + (f" and {n - limit} more" if n > limit else ""))


def _more(items: list[str], limit: int = SHOWN) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def parse_map(text: str) -> dict[str, str]:
    """`Date=date,'Adj Close'=adj_close` -> {'Date': 'date', 'Adj Close': 'adj_close'}."""
    out: dict[str, str] = {}
    for part in re.findall(r"""(?:'[^']*'|"[^"]*"|[^,])+""", text):
        src, eq, dst = part.partition("=")
        src, dst = src.strip().strip("'\""), dst.strip().strip("'\"")
        if not eq or not src or dst not in TARGETS:
            raise UserError(f"--map {text!r}: each item is FILE_COLUMN=TARGET with TARGET one "
                            f"of {', '.join(TARGETS)}, e.g. --map \"Date=date,'Adj Close'=adj_close\"")
        out[src] = dst
    return out


def read_prices_file(path: Path, columns: dict[str, str] | None = None,
                     ticker: str | None = None, *, lenient: bool = False,
                     encoding: str = "utf-8") -> pd.DataFrame:
    """A CSV or Parquet price file as text columns (read by DuckDB), headers mapped to
    ticker/date/close/adj_close by `columns`; `ticker` fills a one-ticker export's ticker.
    `lenient`: a mapped header the file lacks is skipped (the config's `columns`, which
    describe the drop folder's format, not every file), not an error (`--map`).
    `encoding`: a CSV in another encoding (a Korean export's cp949) is decoded as exported."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"price file {path} does not exist")
    if path.is_dir():
        raise DataError(f"price file {path} is a folder; set [market] prices_dir to read a "
                        "drop folder, or give one file")
    parquet = path.suffix.lower() in (".parquet", ".pq")
    source, tmp, problems = path, None, []
    if not parquet:
        if not is_utf8(encoding):
            source = tmp = as_utf8(path, encoding)
        elif (wrong := _not_utf8(path)) is not None:
            # read on as CP949 (what a Korean export that is not UTF-8 is), so that the
            # file's other problems are named with this one
            source = tmp = _as_cp949(path, wrong)
            problems.append(str(wrong))
    sql = ("SELECT * FROM read_parquet(?)" if parquet else
           "SELECT * FROM read_csv(?, all_varchar = true, header = true)")
    con = duckdb.connect()
    try:
        rel = con.execute(sql, [str(source)])
        names = [d[0] for d in rel.description]
        if parquet:     # typed columns to text, so one validation reads both formats
            cast = ", ".join(f"CAST({ident(n)} AS VARCHAR) AS {ident(n)}" for n in names)
            rel = con.execute(f"SELECT {cast} FROM read_parquet(?)", [str(path)])
        raw = rel.df()
        if not parquet:
            raw.index.name = "line"          # messages name CSV lines, Parquet rows
    except duckdb.Error as e:
        raise DataError(f"cannot read price file {path}: {str(e).splitlines()[0]}") from None
    finally:
        con.close()
        if tmp is not None:
            tmp.unlink(missing_ok=True)
    columns = columns or {}
    if lenient:
        columns = {k: v for k, v in columns.items() if k in raw.columns}
    out = _mapped(raw, columns, ticker, str(path))
    out.attrs["problems"] = problems         # raised, with the rest, by `validate_prices`
    return out


def _not_utf8(path: Path) -> DataError | None:
    """The error of a CSV that is empty (raised) or not UTF-8 (returned)."""
    try:
        check_text(path)
    except DataError as e:
        if "not UTF-8" not in str(e):
            raise
        return e
    return None


def _as_cp949(path: Path, wrong: DataError) -> Path:
    try:
        return as_utf8(path, "cp949")
    except DataError:
        raise wrong from None       # not CP949 either: nothing more can be read


def _mapped(raw: pd.DataFrame, columns: dict[str, str], ticker: str | None,
            source: str) -> pd.DataFrame:
    absent = [c for c in columns if c not in raw.columns]
    if absent:
        raise DataError(f"{source}: mapped column(s) {absent} are not in the file; its columns "
                        f"are {list(raw.columns)}")
    headers = [str(c) for c in raw.columns]
    raw = raw.rename(columns=columns)
    raw = raw.rename(columns={c: c.strip().lower() for c in raw.columns if c not in columns.values()})
    raw.attrs["headers"] = headers              # as in the file, for messages
    if ticker is not None:
        if "ticker" in raw.columns:
            raise DataError(f"{source} has its own ticker column; leave out --ticker")
        raw.insert(0, "ticker", ticker)
    return raw


def _dates(col: pd.Series, source: str, date_format: str | None) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(col):
        out = pd.to_datetime(col)
        out = out.dt.tz_localize(None) if out.dt.tz is not None else out
    else:
        text = col.astype("string").str.strip()
        if date_format is None:
            bad = ~text.fillna("").str.match(_ISO)
            timed = bad & text.fillna("").str.match(r"^\d{4}-\d{2}-\d{2}[ T]\d")
            if timed.any():
                raise DataError(f"{source}: date {text[timed].iloc[0]!r} on "
                                f"{_lines(timed, col.index)} carries a time of day; give one "
                                "row per trading day (its date only)")
            if bad.any() and (fmt := year_first_format(text)) is not None:
                raise DataError(f"{source}: date {text[bad].iloc[0]!r} on "
                                f"{_lines(bad, col.index)} is not an ISO date (YYYY-MM-DD); "
                                f"every date of the file reads as --date-format {fmt} (or "
                                f"[market] date_format = '{fmt}')")
            if bad.any():
                example = text[bad].iloc[0]
                raise DataError(f"{source}: date {example!r} on {_lines(bad, col.index)} "
                                "is not an ISO date (YYYY-MM-DD); a date like 03/04/2026 could "
                                "be 3 April or 4 March, so dualpath does not guess: convert "
                                "the file, or give the format, e.g. --date-format %d/%m/%Y")
            text = text.str.slice(0, 10)
            date_format = "%Y-%m-%d"
        out = pd.to_datetime(text, format=date_format, errors="coerce")
        bad = out.isna()
        if bad.any():
            raise DataError(f"{source}: date {text[bad].iloc[0]!r} on "
                            f"{_lines(bad, col.index)} does not match {date_format!r}")
    timed = out != out.dt.normalize()
    if timed.any():
        raise DataError(f"{source}: dates on {_lines(timed, col.index)} carry a time "
                        "of day; give one row per trading day (its date only)")
    return out


def _prices(raw: pd.DataFrame, col: str, source: str,
            thousands: str | None = None) -> tuple[pd.Series, pd.Series]:
    """(values, blank mask) of one price column; non-numbers and non-finite values are errors.
    `thousands`: a separator removed first ('71,000' -> 71000), only between digit groups."""
    if col not in raw.columns:
        return pd.Series(np.nan, index=raw.index), pd.Series(True, index=raw.index)
    s = raw[col]
    if pd.api.types.is_numeric_dtype(s):
        # a typed frame (an adapter's, the demo's) has NaN where a file has a blank
        values = s.astype(float)
        blank = values.isna()
    else:
        text = s.astype("string").str.strip()
        blank = text.isna() | (text == "")
        number = text
        if thousands:
            grouped = text.str.fullmatch(rf"[+-]?\d{{1,3}}(?:{re.escape(thousands)}\d{{3}})+"
                                         rf"(?:\.\d*)?", na=False)
            number = text.where(~grouped, text.str.replace(thousands, "", regex=False))
        values = pd.to_numeric(number.where(~blank), errors="coerce").astype(float)
        spelled = text.str.lower().str.lstrip("+-").isin(["nan", "inf", "infinity"])
        values = values.where(~spelled, np.inf)       # a spelled-out inf/NaN is not finite
        bad = values.isna() & ~blank
        if bad.any():
            raise DataError(f"{source}: {col} {text[bad].iloc[0]!r} on "
                            f"{_lines(bad, raw.index)} is not a number (write plain numbers "
                            "like 71000.5, no currency; a file with thousands separators "
                            "needs [market] thousands = ',' or --thousands ,)")
    bad = ~np.isfinite(values) & ~blank
    if bad.any():
        raise DataError(f"{source}: {col} is not finite (inf or NaN) on "
                        f"{_lines(bad, raw.index)}; leave a price blank for a day without one")
    nonpos = values <= 0
    if nonpos.any():
        raise DataError(f"{source}: {col} must be > 0; {_lines(nonpos, raw.index)} are not")
    return values, blank


def _parse(raw: pd.DataFrame, source: str, date_format: str | None,
           thousands: str | None = None) -> tuple[pd.DataFrame, list]:
    """Typed frame (ticker, date, close, adj_close) and the halts (blank adj_close rows).
    Every problem is found before any is raised (`warehouse.price_problems`)."""
    raw = raw.rename(columns={c: str(c).strip().lower() for c in raw.columns})
    problems = Problems(source, raw.attrs.get("problems"))
    mapped = missing_columns(raw, source, problems)
    if mapped:                      # read on as the fix would map it
        raw = raw.drop(columns=[t for t in mapped.values() if t in raw.columns])
        raw = raw.rename(columns=mapped)
    df = pd.DataFrame(index=raw.index)
    if "ticker" in raw.columns:
        df["ticker"] = raw["ticker"].astype("string").fillna("").str.strip()
        empty = df["ticker"] == ""
        if empty.any():
            problems.add(f"{source}: empty ticker on {_lines(empty, raw.index)}")
    if "date" in raw.columns:
        df["date"] = problems.check(_dates, raw["date"], source, date_format)
    adj = problems.check(_prices, raw, "adj_close", source, thousands)
    close = problems.check(_prices, raw, "close", source, thousands)
    _conflicts(_typed_or_text(raw, df, adj, close), source, problems)
    problems.raise_any()
    df["adj_close"], halted = adj
    df["close"] = close[0]
    halts = sorted(zip(df.loc[halted, "ticker"], df.loc[halted, "date"].dt.date))
    return df[~halted][list(TARGETS)].astype({"ticker": object}), halts


def _typed_or_text(raw: pd.DataFrame, df: pd.DataFrame, adj, close) -> pd.DataFrame:
    """The file's rows as read so far, for the duplicate check: a column as typed where it
    read cleanly, as its text where it did not (one ticker where the file has none)."""
    def text(col: str) -> pd.Series:
        if col not in raw.columns:
            return pd.Series("", index=raw.index)
        return raw[col].astype("string").fillna("").str.strip()
    view = pd.DataFrame({"ticker": df["ticker"] if "ticker" in df else text("ticker")},
                        index=raw.index)
    view["date"] = df["date"] if "date" in df and df["date"].notna().all() else text("date")
    view["close"] = close[0] if close is not None else text("close")
    view["adj_close"] = adj[0] if adj is not None else text("adj_close")
    return view[~adj[1]] if adj is not None else view


def _conflicts(df: pd.DataFrame, source: str, problems: Problems) -> None:
    """Rows of one ticker and date that disagree."""
    dup_key = df.duplicated(["ticker", "date"], keep=False)
    if not dup_key.any():
        return
    distinct = df[dup_key][list(TARGETS)].drop_duplicates()
    conflicting = distinct.duplicated(["ticker", "date"], keep=False)
    if conflicting.any():
        sample = distinct[conflicting].head(4)
        if pd.api.types.is_datetime64_any_dtype(sample["date"]):
            sample = sample.assign(date=lambda x: x["date"].dt.date)
        problems.add(f"{source}: {int(conflicting.sum())} rows give different prices for "
                     f"the same ticker and date, e.g.\n{sample.to_string(index=False)}")


def _dedupe(df: pd.DataFrame, source: str, warnings: list[str]) -> pd.DataFrame:
    """Exact duplicate rows dropped, with a warning (disagreeing ones are refused in
    `_parse`)."""
    exact = df.duplicated(keep="first")
    if not exact.any():
        return df
    warnings.append(f"{source}: dropped {int(exact.sum())} exact duplicate row(s)")
    return df[~exact]


def validate_prices(raw: pd.DataFrame, universe: list[str] | None = None,
                    source: str = "prices", *, calendar: MarketCalendar | None = None,
                    date_format: str | None = None,
                    max_abs_log_return: float = MAX_ABS_LOG_RETURN,
                    prior: pd.DataFrame | None = None,
                    thousands: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Check and normalise prices; returns (ticker, date, close, adj_close) and warnings.

    `calendar`: rows on non-sessions are left out and gaps are judged on its sessions.
    `prior`: the warehouse's last row per ticker before the file (`prior_prices`), so the
    first day of an incremental file is checked for a jump too. The halts (blank adj_close)
    are in `frame.attrs["halts"]` as (ticker, date) pairs.
    """
    df, halts = _parse(raw, source, date_format, thousands)
    warnings: list[str] = [] if len(raw) else [f"{source}: no price rows (only a header)"]
    if halts:
        named = [f"{t} {d}" for t, d in halts]
        warnings.append(f"{source}: blank adj_close on {len(halts)} row(s), read as no price "
                        f"that day (a halt?): {_more(named)}; those days stay missing, never zero")
    df = _dedupe(df, source, warnings)
    if calendar is not None:
        df = off_session(df, calendar, source, warnings)
    if universe is not None:
        unknown = sorted(set(df["ticker"]) - set(universe))
        if unknown:
            warnings.append(f"{source}: {len(unknown)} ticker(s) not in the universe, kept: "
                            f"{_more(unknown)}")
    df = df.sort_values(["ticker", "date"]).reset_index(drop=True)
    moves(df, prior, max_abs_log_return, source, warnings)
    gaps(df, calendar, halts, source, warnings)
    df.attrs["halts"] = halts
    return df, warnings


def prior_prices(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> pd.DataFrame:
    """The warehouse's last row per ticker before that ticker's first date in `frame`."""
    if frame.empty:
        return pd.DataFrame(columns=list(TARGETS))
    firsts = frame.groupby("ticker", as_index=False)["date"].min()
    firsts["date"] = pd.to_datetime(firsts["date"]).dt.date
    con.register("firsts_df", firsts)
    try:
        return con.execute("""
            SELECT p.ticker, p.date, p.close, p.adj_close FROM prices p
            JOIN firsts_df f ON p.ticker = f.ticker AND p.date < f.date
            QUALIFY row_number() OVER (PARTITION BY p.ticker ORDER BY p.date DESC) = 1""").df()
    finally:
        con.unregister("firsts_df")


def new_rows(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows the warehouse lacks, rows that revise a stored price) of a validated frame."""
    f = frame[list(TARGETS)].copy()
    f["date"] = pd.to_datetime(f["date"]).dt.date
    con.register("new_df", f)
    try:
        diff = con.execute("""
            SELECT f.*, p.adj_close AS old_adj, p.close AS old_close, p.ticker IS NULL AS is_new
            FROM new_df f LEFT JOIN prices p USING (ticker, date)
            WHERE p.ticker IS NULL OR p.adj_close IS DISTINCT FROM f.adj_close
               OR p.close IS DISTINCT FROM f.close
            ORDER BY ticker, date""").df()
    finally:
        con.unregister("new_df")
    diff["date"] = pd.to_datetime(diff["date"]).dt.date
    return diff[diff["is_new"]], diff[~diff["is_new"]]


def import_prices(con: duckdb.DuckDBPyConnection, prices: pd.DataFrame) -> int:
    """Insert or replace validated prices (a later file revises earlier rows); returns rows.
    Halts in `prices.attrs["halts"]` are recorded where the warehouse has `price_gaps`."""
    frame = prices[list(TARGETS)].copy()
    frame["date"] = pd.to_datetime(frame["date"]).dt.date
    con.register("prices_df", frame)
    try:
        with transaction(con):
            con.execute("INSERT OR REPLACE INTO prices BY NAME SELECT * FROM prices_df")
            if has_table(con, "price_gaps"):
                # a price for a day once recorded as a halt ends that halt
                con.execute("DELETE FROM price_gaps g USING prices_df p "
                            "WHERE g.ticker = p.ticker AND g.date = p.date")
                for t, d in prices.attrs.get("halts", []):
                    con.execute("INSERT OR REPLACE INTO price_gaps (ticker, date, reason) "
                                "SELECT ?, ?, 'halt' WHERE NOT EXISTS (SELECT 1 FROM prices "
                                "WHERE ticker = ? AND date = ?)", [t, d, t, d])
    finally:
        con.unregister("prices_df")
    return len(frame)


# The table recording known halts (a blank price in a file) for the freshness gate: the SQL of
# the migration that adds it. Until the warehouse has it, halts are reported but not kept.
PRICE_GAPS_SQL = """
CREATE TABLE IF NOT EXISTS price_gaps (
    ticker VARCHAR NOT NULL, date DATE NOT NULL,
    reason VARCHAR NOT NULL,                    -- 'halt': a blank price in a file
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (ticker, date)
);
"""


def price_rows(con: duckdb.DuckDBPyConnection) -> int:
    """How many price rows the warehouse holds."""
    return con.execute("SELECT count(*) FROM prices").fetchall()[0][0]


def load_prices(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """All prices: ticker, date, close, adj_close."""
    return con.execute("SELECT ticker, date, close, adj_close FROM prices ORDER BY ticker, date").df()
