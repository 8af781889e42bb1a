"""What the warehouse records of one experiment, as plain values: the span of its nights,
the config hashes its runs were made under, its server sessions, its last night, the
largest prompt of each path. The queries behind `flows/` (metrics, weekly, doctor)."""

from __future__ import annotations

from datetime import date

import duckdb
import pandas as pd


def night_span(con: duckdb.DuckDBPyConnection, experiment: str,
               since: date | None = None) -> tuple[date | None, date | None]:
    """The first and last night of the experiment's runs (from `since` on); (None, None)
    when it has none."""
    return con.execute("SELECT min(night), max(night) FROM runs WHERE experiment = ?"
                       " AND night >= coalesce(?, night)", [experiment, since]).fetchone()


def config_hashes(con: duckdb.DuckDBPyConnection, experiment: str,
                  first: date | None = None, last: date | None = None) -> list[str]:
    """The distinct config hashes of the experiment's runs (between two nights, inclusive,
    when given), sorted."""
    return [r[0] for r in con.execute(
        "SELECT DISTINCT config_hash FROM runs WHERE experiment = ? "
        "AND night BETWEEN coalesce(?, night) AND coalesce(?, night) ORDER BY 1",
        [experiment, first, last]).fetchall()]


def server_sessions(con: duckdb.DuckDBPyConnection, experiment: str,
                    first: date, last: date) -> pd.DataFrame:
    """Each run's server session (dialect, how it ran, model, build, slots, identity
    problem) between two nights, by night and path."""
    return con.execute(
        "SELECT r.night, s.path, s.dialect, s.how, s.model, s.build, s.slots, "
        "s.identity_problem FROM server_sessions s JOIN runs r USING (run_id) "
        "WHERE r.experiment = ? AND r.night BETWEEN ? AND ? ORDER BY r.night, s.path",
        [experiment, first, last]).df()


def last_night_statuses(con: duckdb.DuckDBPyConnection,
                        experiment: str) -> tuple[date, str] | None:
    """The experiment's latest night and its runs as 'path status, path status'; None
    before the first night."""
    return con.execute("SELECT night, string_agg(path || ' ' || status, ', ') FROM runs "
                       "WHERE experiment = ? GROUP BY night ORDER BY night DESC LIMIT 1",
                       [experiment]).fetchone()


def largest_prompts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """The largest prompt (tokens) each path has sent, over every recorded call."""
    return dict(con.execute("SELECT path, max(prompt_tokens) FROM calls GROUP BY 1").fetchall())
