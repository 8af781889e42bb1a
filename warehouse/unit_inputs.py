"""Frozen unit inputs in the warehouse: stored content-addressed when a night is scored
(`unit_inputs`, keyed by the input's sha256), and which input each ticker of each night of an
experiment was given (`night_inputs`). Nights scored before they were kept have no rows:
`nights_without_inputs` names them, so a candidate is never scored on a re-derived input
that might differ from what the reference saw."""

from __future__ import annotations

from datetime import date, datetime, timezone

import duckdb

from dualpath.frozen import FrozenInput

M025_UNIT_INPUTS = """
CREATE TABLE IF NOT EXISTS unit_inputs (
    input_sha256 VARCHAR PRIMARY KEY,
    ticker VARCHAR NOT NULL,
    night DATE NOT NULL,
    closes_json VARCHAR NOT NULL,
    documents VARCHAR
);
CREATE TABLE IF NOT EXISTS night_inputs (
    experiment VARCHAR NOT NULL,
    night DATE NOT NULL,
    ticker VARCHAR NOT NULL,
    input_sha256 VARCHAR NOT NULL,
    frozen_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (experiment, night, ticker)
);
"""

DICTIONARY = {
    "unit_inputs": ("one distinct unit input (ticker, night, closes, documents), stored once "
                    "by its content hash", {
        "input_sha256": "hash — sha256 of the input's canonical JSON (dualpath.frozen)",
        "ticker": "symbol", "night": "date — session the night scores",
        "closes_json": "JSON — [[trading day, adjusted close], ...] the prompts showed, "
                       "oldest first, none after the night",
        "documents": "text — the ticker's document the prompts showed (NULL: none)"}),
    "night_inputs": ("which frozen input each ticker of an experiment's night was scored "
                     "from", {
        "experiment": "name", "night": "date — session the night scores",
        "ticker": "symbol", "input_sha256": "hash → unit_inputs",
        "frozen_at": "timestamp (UTC) — when the night first stored it"}),
}


def freeze(con: duckdb.DuckDBPyConnection, experiment: str,
           inputs: list[FrozenInput]) -> int:
    """Store the inputs and map each (experiment, night, ticker) to its hash; returns how
    many mappings are new. A ticker-night already frozen keeps its first input: a resumed
    night scores its remaining units from what the first segment was given."""
    held = {(n, t) for n, t in con.execute(
        "SELECT night, ticker FROM night_inputs WHERE experiment = ? AND night IN "
        "(SELECT unnest(?))", [experiment, sorted({f.night for f in inputs})]).fetchall()}
    new = [f for f in inputs if (f.night, f.ticker) not in held]
    if not new:
        return 0
    rows = [(f.sha256, f.ticker, f.night, f.closes_json(), f.documents) for f in new]
    con.executemany("INSERT INTO unit_inputs VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    rows)
    now = datetime.now(timezone.utc)
    con.executemany("INSERT INTO night_inputs VALUES (?, ?, ?, ?, ?)",
                    [(experiment, f.night, f.ticker, r[0], now) for f, r in zip(new, rows)])
    return len(new)


def frozen_inputs(con: duckdb.DuckDBPyConnection, experiment: str,
                  night: date) -> dict[str, FrozenInput]:
    """The night's frozen inputs by ticker (empty: the night kept none)."""
    rows = con.execute(
        "SELECT n.ticker, u.closes_json, u.documents FROM night_inputs n "
        "JOIN unit_inputs u USING (input_sha256) WHERE n.experiment = ? AND n.night = ?",
        [experiment, night]).fetchall()
    return {t: FrozenInput.from_stored(t, night, c, d) for t, c, d in rows}


def frozen_nights(con: duckdb.DuckDBPyConnection, experiment: str) -> dict[date, int]:
    """Nights of the experiment with frozen inputs -> how many tickers."""
    rows = con.execute("SELECT night, count(*) FROM night_inputs WHERE experiment = ? "
                       "GROUP BY night ORDER BY night", [experiment]).fetchall()
    return {r[0]: int(r[1]) for r in rows}


def nights_without_inputs(con: duckdb.DuckDBPyConnection, experiment: str) -> list[date]:
    """The experiment's scored nights that kept no frozen input (scored before they were
    stored): a candidate cannot be handed what they were given."""
    rows = con.execute(
        "SELECT DISTINCT night FROM runs WHERE experiment = ? AND night NOT IN "
        "(SELECT night FROM night_inputs WHERE experiment = ?) ORDER BY night",
        [experiment, experiment]).fetchall()
    return [r[0] for r in rows]
