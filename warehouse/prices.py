"""Price files in, validated, never silently: errors stop the import, warnings are returned.

A price file (CSV or Parquet) has columns `ticker, date, adj_close` and optionally `close`.
Errors: missing columns, unreadable dates, non-numeric or non-positive prices, duplicate rows
that disagree. Warnings: exact duplicate rows (dropped), tickers outside the universe,
universe tickers with no prices, gaps against the calendar the file itself implies.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from dualpath.errors import DataError

REQUIRED = ("ticker", "date", "adj_close")


def _rows(mask: pd.Series, limit: int = 5) -> str:
    idx = list(mask[mask].index[:limit] + 2)   # +2: header line and 1-based numbering
    return ", ".join(map(str, idx)) + (" ..." if mask.sum() > limit else "")


def read_prices_file(path: Path) -> pd.DataFrame:
    """Read a CSV or Parquet price file as text columns for validation."""
    if not path.exists():
        raise DataError(f"price file {path} does not exist")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            return pd.read_parquet(path)
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as e:
        raise DataError(f"cannot read price file {path}: {e}") from None


def validate_prices(raw: pd.DataFrame, universe: list[str] | None = None,
                    source: str = "prices") -> tuple[pd.DataFrame, list[str]]:
    """Check and normalise prices; returns (ticker, date, close, adj_close) and warnings."""
    raw = raw.rename(columns={c: c.strip().lower() for c in raw.columns})
    missing = [c for c in REQUIRED if c not in raw.columns]
    if missing:
        raise DataError(f"{source}: missing column(s) {missing}; need {list(REQUIRED)} "
                        "(and optionally close)")
    df = pd.DataFrame({"ticker": raw["ticker"].astype(str).str.strip()})
    df["date"] = pd.to_datetime(raw["date"], errors="coerce", format="mixed")
    bad = df["date"].isna()
    if bad.any():
        raise DataError(f"{source}: unreadable date on row(s) {_rows(bad)}; use YYYY-MM-DD")
    df["date"] = df["date"].dt.normalize()
    for col in ("adj_close", "close"):
        if col not in raw.columns:
            df[col] = float("nan")
            continue
        values = pd.to_numeric(raw[col], errors="coerce")
        blank = raw[col].astype(str).str.strip().isin(["", "nan", "NaN", "None"])
        bad = values.isna() & ~(blank & (col == "close"))
        if bad.any():
            raise DataError(f"{source}: {col} is not a number on row(s) {_rows(bad)}")
        nonpos = values <= 0
        if nonpos.any():
            raise DataError(f"{source}: {col} must be > 0; row(s) {_rows(nonpos)} are not")
        df[col] = values.astype(float)
    if (df["ticker"] == "").any():
        raise DataError(f"{source}: empty ticker on row(s) {_rows(df['ticker'] == '')}")
    warnings: list[str] = []
    dup_key = df.duplicated(["ticker", "date"], keep=False)
    if dup_key.any():
        exact = df.duplicated(keep="first")
        conflicting = df[dup_key].drop_duplicates().duplicated(["ticker", "date"], keep=False)
        if conflicting.any():
            sample = df[dup_key].drop_duplicates()[conflicting].head(3)
            raise DataError(f"{source}: {int(conflicting.sum())} rows give different prices for "
                            f"the same ticker and date, e.g.\n{sample.to_string(index=False)}")
        warnings.append(f"{source}: dropped {int(exact.sum())} exact duplicate row(s)")
        df = df[~exact]
    if universe is not None:
        unknown = sorted(set(df["ticker"]) - set(universe))
        if unknown:
            warnings.append(f"{source}: {len(unknown)} ticker(s) not in the universe, kept: "
                            f"{unknown[:5]}")
        absent = sorted(set(universe) - set(df["ticker"]))
        if absent:
            warnings.append(f"{source}: no prices for {len(absent)} universe ticker(s): "
                            f"{absent[:5]}; they will have no forward returns")
    calendar = df["date"].unique()
    counts = df.groupby("ticker")["date"].agg(["min", "max", "count"])
    gaps = []
    for t, row in counts.iterrows():
        expected = ((calendar >= row["min"]) & (calendar <= row["max"])).sum()
        if row["count"] < expected:
            gaps.append(f"{t} ({expected - row['count']} day(s))")
    if gaps:
        warnings.append(f"{source}: gaps against the file's own calendar (missing days are "
                        f"missing returns, never zero): {', '.join(gaps[:5])}"
                        + (" ..." if len(gaps) > 5 else ""))
    return df.sort_values(["ticker", "date"]).reset_index(drop=True), warnings


def import_prices(con: duckdb.DuckDBPyConnection, prices: pd.DataFrame) -> int:
    """Insert or replace validated prices (a later file revises earlier rows); returns rows."""
    frame = prices[["ticker", "date", "close", "adj_close"]].copy()
    frame["date"] = pd.to_datetime(frame["date"]).dt.date
    con.register("prices_df", frame)
    try:
        con.execute("BEGIN")
        con.execute("INSERT OR REPLACE INTO prices BY NAME SELECT * FROM prices_df")
        con.execute("COMMIT")
    finally:
        con.unregister("prices_df")
    return len(frame)


def load_prices(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """All prices: ticker, date, close, adj_close."""
    return con.execute("SELECT ticker, date, close, adj_close FROM prices ORDER BY ticker, date").df()
