"""Candidate paths scored on past nights (`dualpath candidate`): each is its own experiment
(`<experiment>.candidate.<name>`), so its runs are never a night of the study, and
`candidate_runs` records which study it answers to, its reference path and its settings."""

from __future__ import annotations

from datetime import date, datetime, timezone

import duckdb
import pandas as pd

CANDIDATE_RUNS = """
CREATE TABLE IF NOT EXISTS candidate_runs (
    candidate_experiment VARCHAR PRIMARY KEY,
    experiment VARCHAR NOT NULL,
    candidate VARCHAR NOT NULL,
    reference VARCHAR NOT NULL,
    draws INTEGER NOT NULL,
    base_seed BIGINT NOT NULL,
    path_json VARCHAR NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
"""

DICTIONARY = {
    "candidate_runs": ("a candidate path scored on past nights of a study: its runs live in "
                       "their own experiment, never the study's", {
        "candidate_experiment": "name — the experiment its runs are stored under",
        "experiment": "name — the study whose past nights and reference runs it answers to",
        "candidate": "name — the candidate path", "reference": "name — the study's path it "
        "is held against", "draws": "count — draws of each ticker per night it scored",
        "base_seed": "root of its derived seeds (never the reference's: fresh draws)",
        "path_json": "JSON — what the candidate does: its path's settings and the sampling it "
                     "is sent, as flat keys (paths.slots, sampling.thinking, ...)",
        "created_at": "timestamp (UTC) — first scored"}),
}


def record(con: duckdb.DuckDBPyConnection, candidate_experiment: str, experiment: str,
           candidate: str, reference: str, draws: int, base_seed: int, path_json: str) -> None:
    """Record the candidate once; a resumed sitting keeps the first record (its settings
    are held equal by the runs' config hash)."""
    con.execute("INSERT INTO candidate_runs VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                [candidate_experiment, experiment, candidate, reference, draws, base_seed,
                 path_json, datetime.now(timezone.utc)])


def candidates_of(con: duckdb.DuckDBPyConnection, experiment: str) -> pd.DataFrame:
    """The study's candidates, oldest first."""
    return con.execute("SELECT * FROM candidate_runs WHERE experiment = ? ORDER BY created_at",
                       [experiment]).df()


def candidate_nights(con: duckdb.DuckDBPyConnection, candidate_experiment: str) -> list[date]:
    """The nights the candidate has runs of."""
    rows = con.execute("SELECT DISTINCT night FROM runs WHERE experiment = ? ORDER BY night",
                       [candidate_experiment]).fetchall()
    return [r[0] for r in rows]
