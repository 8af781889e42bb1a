"""The viewer's queries (`dualpath ui`): each page reads only the rows it shows.

Connections are read-only and short: DuckDB lets one read-write process or many read-only
ones hold the file, never both, so a page holds its connection for its own queries only and
the night's ingest (which waits for readers, as readers wait for it) is kept waiting no
longer than one page. Texts are read by hash through `warehouse.prompts` (a unit's prompts
from their parts by `prompt_texts`, answers a run of nearby row ids at a time), never through
`v_prompts`, which rebuilds every prompt of the warehouse first.

Calls, units and runs are filtered on `run_id`: ingest writes a run's rows together, so the
column's min/max per row group lets DuckDB skip the other nights' rows unread.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Iterable, Iterator

import duckdb
import pandas as pd

from dualpath.errors import UserError
from dualpath.warehouse import search_index
from dualpath.warehouse.db import SANDBOX, _open, has_table
from dualpath.warehouse.disturbed import DISTURBED
from dualpath.warehouse.prompts import _texts, prompt_texts


@contextlib.contextmanager
def viewer_connection(path: Path, wait_s: float = 30.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection that touches no file but the warehouse, waiting out an ingest
    (the lock retry `dualpath sql` uses); closed on exit."""
    if not path.exists():
        raise UserError(f"no warehouse at {path}; run `dualpath nightly` or `dualpath demo` first")
    con = _open(path, read_only=True, wait_s=wait_s, config=SANDBOX)
    try:
        yield con
    finally:
        con.close()


# The runs' own columns; their seconds per ticker come from evals.speed.seconds (viewer.data)
# and why a complete run's seconds are no measurement (`warehouse.disturbed`)
_RUNS = f"""
    SELECT night, path, run_id, status, status_detail, units_planned, units_done,
           units_measured, tickers_planned, segments, slots, time_scale, wall_s,
           units_planned AS units, d.disturbed
    FROM runs LEFT JOIN ({DISTURBED}) d USING (run_id) WHERE experiment = ? """


def nights(con: duckdb.DuckDBPyConnection, experiment: str) -> pd.DataFrame:
    """One row per night x path, newest first: the run's status and its unit counts, from the
    runs table alone."""
    df = con.execute(_RUNS + "ORDER BY night DESC, path", [experiment]).df()
    df["night"] = pd.to_datetime(df["night"]).dt.date
    return df


def night_runs(con: duckdb.DuckDBPyConnection, experiment: str, night: date) -> pd.DataFrame:
    """The runs of one night, one per path."""
    df = con.execute(_RUNS + "AND night = ? ORDER BY path", [experiment, night]).df()
    df["night"] = pd.to_datetime(df["night"]).dt.date
    return df


def _ids(run_ids: Iterable[str]) -> str:
    ids = sorted(set(run_ids))
    if not ids:
        return "NULL"
    # run ids are ours (experiment/night/path, validated names); quoted all the same
    return ",".join("'" + r.replace("'", "''") + "'" for r in ids)


def night_units(con: duckdb.DuckDBPyConnection, run_ids: list[str],
                ticker: str | None = None) -> pd.DataFrame:
    """Each unit's final attempt in these runs (of one ticker only, if given): run, path,
    ticker, draw, grade, outcome, seconds (the client's clock), attempts, and how many of its
    calls were contaminated, runaway (stopped at max_tokens) or retried."""
    ids = _ids(run_ids)
    only = "AND ticker = $ticker" if ticker is not None else ""
    return con.execute(f"""
        WITH u AS (
            SELECT run_id, path, ticker, draw, unit_attempt, grade, outcome, seconds,
                   max(unit_attempt) OVER (PARTITION BY run_id, ticker, draw) AS attempts
            FROM units WHERE run_id IN ({ids}) {only}),
        c AS (
            SELECT run_id, ticker, draw, unit_attempt,
                   count(*) FILTER (WHERE contaminated IS NOT NULL) AS contaminated,
                   count(*) FILTER (WHERE finish_reason = 'length') AS runaway,
                   count(*) FILTER (WHERE attempts > 1) AS retried
            FROM calls WHERE run_id IN ({ids}) {only} GROUP BY ALL)
        SELECT u.run_id, u.path, u.ticker, u.draw, u.grade::INTEGER AS grade, u.outcome,
               u.seconds, u.attempts, coalesce(c.contaminated, 0) AS contaminated,
               coalesce(c.runaway, 0) AS runaway, coalesce(c.retried, 0) AS retried
        FROM u LEFT JOIN c USING (run_id, ticker, draw, unit_attempt)
        WHERE u.unit_attempt = u.attempts
        ORDER BY u.ticker, u.path, u.draw""", {"ticker": ticker} if ticker is not None else {}
                       ).df()


@dataclass
class Found:
    rows: pd.DataFrame
    without_index: str | None     # why the answers were scanned instead (None: the index)


def search_answers(con: duckdb.DuckDBPyConnection, experiment: str, text: str,
                   path: str | None = None, limit: int = 50, *, index: bool = True) -> Found:
    """Calls of the experiment whose answer contains `text` (any case), newest night first,
    at most `limit` + 1 rows (one more than shown, so the page can say there are more):
    night, path, ticker, draw, unit_attempt, agent, call_seq, finish_reason and the answer.
    Found through the answers' index (`warehouse.search_index`, the same rows) where it can
    be; else (or with `index=False`) by reading every answer, and `without_index` says why."""
    found = search_index.lookup(con, text)
    why = ("not asked to" if not index else
           "this warehouse has no index of its answers yet (the next ingest builds it)"
           if not has_table(con, "search_docs") else
           "the text has no letter or digit to look up" if found is None else None)
    if why is None:
        df = search_index.find(con, found, experiment, text, path, limit + 1)
    else:
        df = con.execute("""
            SELECT c.night, c.path, c.ticker, c.draw, c.unit_attempt, c.agent, c.call_seq,
                   c.finish_reason, c.output_hash, t.text AS answer
            FROM calls c JOIN runs r USING (run_id) JOIN texts t ON t.hash = c.output_hash
            WHERE r.experiment = $exp AND ($path IS NULL OR c.path = $path)
              AND t.text ILIKE $pattern ESCAPE '\\'
            ORDER BY c.night DESC, c.ticker, c.path, c.draw, c.unit_attempt, c.call_seq
            LIMIT $n""", {"exp": experiment, "path": path,
                          "pattern": search_index.like_pattern(text), "n": limit + 1}).df()
    df = df.drop(columns="output_hash")
    df["night"] = pd.to_datetime(df["night"]).dt.date
    return Found(df, why)


def call_spans(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> pd.DataFrame:
    """Every call's client interval (run, wall-clock start and end) and its service on the
    server's own timings (prompt + decode, real-scale seconds; NULL where the server reports
    none) in these runs: the night page's slot occupancy."""
    return con.execute(f"""
        SELECT run_id, start_wall, end_wall, (prompt_ms + predicted_ms) / 1000 AS service_s
        FROM calls
        WHERE run_id IN ({_ids(run_ids)}) AND start_wall IS NOT NULL AND end_wall IS NOT NULL
        ORDER BY run_id, start_wall""").df()


def night_energy(con: duckdb.DuckDBPyConnection, run_ids: list[str]
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(segments, samples) of these runs' GPU telemetry (`warehouse.energy`): per segment
    every stored column (its window's wall-clock start, joules, their basis, mean and idle
    watts, why its energy is unknown); the power samples in time order. Both empty before
    m026."""
    ids = _ids(run_ids)
    try:
        segs = con.execute(f"""
            SELECT * FROM energy_runs WHERE run_id IN ({ids}) ORDER BY run_id, segment""").df()
        samples = con.execute(f"""
            SELECT run_id, segment, t_s, width_s, power_w FROM energy_samples
            WHERE run_id IN ({ids}) ORDER BY run_id, segment, t_s""").df()
    except duckdb.CatalogException:     # a warehouse from before GPU telemetry (m026)
        return pd.DataFrame(), pd.DataFrame()
    return segs, samples


def prices_between(con: duckdb.DuckDBPyConnection, start: date, end: date) -> pd.DataFrame:
    """Adjusted closes of every ticker from `start` to `end` (a night's forward returns)."""
    df = con.execute("SELECT ticker, date, adj_close FROM prices WHERE date BETWEEN ? AND ?",
                     [start, end]).df()
    df["date"] = pd.to_datetime(df["date"])
    return df


def ticker_units(con: duckdb.DuckDBPyConnection, run_ids: list[str], ticker: str) -> pd.DataFrame:
    """Every attempt of every draw of `ticker` in these runs, with its final answer's hash."""
    return con.execute(f"""
        SELECT run_id, path, draw, unit_attempt, grade::INTEGER AS grade, outcome, seconds,
               n_calls, failure_kind, failure_detail, final_hash,
               unit_attempt = max(unit_attempt) OVER (PARTITION BY run_id, draw) AS is_final
        FROM units WHERE run_id IN ({_ids(run_ids)}) AND ticker = ?
        ORDER BY path, draw, unit_attempt""", [ticker]).df()


# what a call row shows, beside any thinking column the calls table has
CALL_COLUMNS = ["run_id", "path", "draw", "unit_attempt", "call_seq", "agent", "latency_s",
                "ttft_s", "prompt_tokens", "completion_tokens", "cached_tokens", "prompt_ms",
                "predicted_ms", "finish_reason", "attempts", "attempt_errors", "error_kind",
                "error_detail", "http_status", "contaminated", "prompt_hash", "output_hash"]


# the thinking kept apart from the answer (m018: its text in texts by hash, its tokens and
# their basis), where this warehouse has it
THINKING_COLUMNS = ("reasoning_hash", "reasoning_tokens", "reasoning_tokens_basis")


def thinking_columns(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Which of `THINKING_COLUMNS` the calls table has (none before m018)."""
    cols = {r[0] for r in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'calls'").fetchall()}
    return [c for c in THINKING_COLUMNS if c in cols]


def ticker_calls(con: duckdb.DuckDBPyConnection, run_ids: list[str], ticker: str,
                 draw: int) -> pd.DataFrame:
    """The calls of one draw of `ticker` (every attempt of the unit), in pipeline order."""
    cols = ", ".join(CALL_COLUMNS + thinking_columns(con))
    return con.execute(f"""
        SELECT {cols} FROM calls
        WHERE run_id IN ({_ids(run_ids)}) AND ticker = ? AND draw = ?
        ORDER BY path, unit_attempt, call_seq""", [ticker, draw]).df()


def texts(con: duckdb.DuckDBPyConnection, hashes: Iterable) -> dict[int, str]:
    """Stored texts (answers, final answers, thinking) by hash; missing ones left out."""
    wanted = sorted({int(h) for h in hashes if h is not None and not pd.isna(h)})
    return _texts(con, wanted) if wanted else {}


def prompts(con: duckdb.DuckDBPyConnection, hashes: Iterable,
            answers: dict[int, str] | None = None) -> dict[int, str]:
    """Prompts (their messages' JSON, as sent) by hash, read back from their parts; earlier
    answers they quote are taken from `answers` (texts by hash) when there."""
    return prompt_texts(con, [int(h) for h in hashes if h is not None and not pd.isna(h)],
                        answers)


def night_tickers(con: duckdb.DuckDBPyConnection, run_ids: list[str]) -> list[str]:
    """The tickers scored in these runs, in order (the ticker page's previous / next)."""
    return [t for t, in con.execute(f"SELECT DISTINCT ticker FROM units WHERE run_id IN "
                                    f"({_ids(run_ids)}) ORDER BY ticker").fetchall()]


def state_key(con: duckdb.DuckDBPyConnection, experiment: str) -> tuple:
    """Changes whenever a run of the experiment or a plan is written: what the cached
    headline depends on."""
    runs = con.execute("SELECT count(*), max(ended_at)::VARCHAR, sum(units_done), "
                       "string_agg(status, ',' ORDER BY run_id) FROM runs WHERE experiment = ?",
                       [experiment]).fetchone()
    try:
        frozen = con.execute("SELECT count(*), max(frozen_at)::VARCHAR FROM plans").fetchone()
    except duckdb.CatalogException:     # a warehouse from before preregistration (m005)
        frozen = None
    return runs + (frozen,)


def mean_grades(con: duckdb.DuckDBPyConnection, experiment: str) -> pd.DataFrame:
    """night, path, ticker, mean grade over the graded draws of complete runs (a graded unit
    is never scored again, so these are final attempts; a partial run's grades are in no
    result, as `evals.scores` keeps them out of the quality metrics)."""
    df = con.execute("""
        SELECT r.night, u.path, u.ticker, avg(u.grade) AS mean_grade
        FROM units u JOIN runs r USING (run_id)
        WHERE r.experiment = ? AND r.status = 'complete' AND u.grade IS NOT NULL
        GROUP BY ALL""", [experiment]).df()
    df["night"] = pd.to_datetime(df["night"]).dt.date
    return df
