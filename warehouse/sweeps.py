"""Sweeps in the warehouse: freezing recorded requests into a replay set, and the sweep tables.

`freeze_frame` reads a night's recorded calls (bodies from `texts` by `request_hash`,
messages only through `v_prompts`) for N tickers' final measured units; the replay set is a
Parquet file written and read here (DuckDB's COPY), its content hash in the file's key-value
metadata and checked on every read. Points and their replayed calls go to `sweep_points` and
`sweep_calls`; a point's latest attempt is its result, so a rerun resumes the sweep.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

import duckdb
import orjson
import pandas as pd

from dualpath.errors import DataError, UserError
from dualpath.replay import REPLAY_COLUMNS, check_replay_set, dag_stages, replay_hash
from dualpath.warehouse.db import transaction
from dualpath.warehouse.prompts import prompt_texts
from dualpath.warehouse.quoting import literal

FINAL_STATUSES = ("ready", "failed to start")


def _units(con: duckdb.DuckDBPyConnection, run_id: str, tickers: int) -> pd.DataFrame:
    units = con.execute("""
        SELECT ticker, min(draw) AS draw FROM v_units
        WHERE run_id = ? AND is_final AND measured AND clean GROUP BY ticker ORDER BY ticker
        """, [run_id]).df()
    if len(units) < tickers:
        raise UserError(f"only {len(units)} ticker(s) of run {run_id} have a measured unit "
                        f"to freeze, {tickers} asked; use --tickers {len(units) or 1} or "
                        "another night")
    return units.head(tickers)


def _run_id(con, experiment: str, night: date, path: str) -> str:
    row = con.execute("SELECT run_id FROM runs WHERE experiment = ? AND night = ? AND path = ?",
                      [experiment, night, path]).fetchone()
    if row is None:
        nights = [str(r[0]) for r in con.execute(
            "SELECT DISTINCT night FROM runs WHERE experiment = ? AND path = ? ORDER BY night "
            "DESC LIMIT 5", [experiment, path]).fetchall()]
        raise UserError(f"no run of path '{path}' on night {night} in the warehouse; "
                        + (f"recent nights of that path: {', '.join(nights)}" if nights else
                           f"path '{path}' has no recorded night yet: score one first"))
    return row[0]


def freeze_frame(con: duckdb.DuckDBPyConnection, experiment: str, night: date, path: str,
                 tickers: int) -> pd.DataFrame:
    """The recorded requests of `tickers` tickers' final measured units (lowest draw each,
    tickers in alphabetical order) as a replay set frame (`dualpath.replay`)."""
    run_id = _run_id(con, experiment, night, path)
    units = _units(con, run_id, tickers)
    con.register("_freeze_units", units)
    try:
        calls = con.execute("""
            WITH final AS (
                SELECT u.ticker, u.draw, max(u.unit_attempt) AS unit_attempt FROM units u
                JOIN _freeze_units f USING (ticker, draw) WHERE u.run_id = ?
                GROUP BY u.ticker, u.draw)
            SELECT c.ticker, c.draw, c.call_seq, c.agent, c.start_mono, c.end_mono,
                   r.text AS request_json, c.prompt_hash,
                   c.call_id AS source_call_id, c.run_id AS source_run_id,
                   c.prompt_tokens AS recorded_prompt_tokens,
                   c.completion_tokens AS recorded_completion_tokens
            FROM calls c JOIN final f USING (ticker, draw, unit_attempt)
            JOIN texts r ON r.hash = c.request_hash
            WHERE c.run_id = ? ORDER BY c.ticker, c.draw, c.call_seq""",
                             [run_id, run_id]).df()
    finally:
        con.unregister("_freeze_units")
    if calls.empty:
        raise UserError(f"run {run_id} has no recorded request bodies to freeze")
    # prompts by hash, not through v_prompts, whose rebuild of every prompt takes seconds
    # on a six-week warehouse
    texts = prompt_texts(con, calls["prompt_hash"].tolist())
    calls["prompt_json"] = calls["prompt_hash"].map(texts)
    if calls["prompt_json"].isna().any():
        raise UserError(f"run {run_id}: {int(calls['prompt_json'].isna().sum())} call(s) "
                        "have no stored prompt to freeze")
    stages = []
    for _, g in calls.groupby(["ticker", "draw"], sort=False):
        stages += dag_stages(g["start_mono"].tolist(), g["end_mono"].tolist())
    calls["stage"] = stages
    bodies = calls["request_json"].map(orjson.loads)
    calls["seed"] = bodies.map(lambda b: b.get("seed")).astype("Int64")
    calls["max_tokens"] = bodies.map(lambda b: b.get("max_tokens")).astype("Int64")
    return calls[REPLAY_COLUMNS]


def write_replay_set(frame: pd.DataFrame, out: Path) -> str:
    """Write the set as one Parquet file (its hash in the metadata); returns the hash."""
    h = replay_hash(frame)
    out.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as con:
        con.register("frozen", frame)
        con.execute(f"COPY frozen TO {literal(out)} (FORMAT parquet, "
                    f"KV_METADATA {{replay_hash: {literal(h)}}})")
    return h


def read_replay_set(path: Path) -> tuple[pd.DataFrame, str]:
    """A replay set and its hash; refuses a file whose content no longer matches it."""
    if not path.exists():
        raise UserError(f"replay set {path} not found; make one with `dualpath freeze`")
    with duckdb.connect() as con:
        try:
            frame = con.execute(f"SELECT * FROM read_parquet({literal(path)})").df()
            meta = dict(con.execute(f"SELECT decode(key), decode(value) FROM "
                                    f"parquet_kv_metadata({literal(path)})").fetchall())
        except duckdb.Error as e:
            raise DataError(f"{path} is not a readable Parquet replay set: {e}") from None
    frame = check_replay_set(frame, str(path))
    h = replay_hash(frame)
    if meta.get("replay_hash") != h:
        raise DataError(f"{path}: content hash {h} differs from the one it was written with "
                        f"({meta.get('replay_hash')}); the file was changed — freeze again")
    return frame, h


def record_replay_set(con, frame: pd.DataFrame, h: str, experiment: str, night: date,
                      path: str, file_path: Path) -> None:
    """Note a frozen set in `replay_sets` (once per hash)."""
    con.execute("""INSERT INTO replay_sets (replay_hash, experiment, night, path, tickers,
                   units, calls, prompt_tokens, file_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT DO NOTHING""",
                [h, experiment, night, path, int(frame["ticker"].nunique()),
                 int(frame.groupby(["ticker", "draw"]).ngroups), len(frame),
                 int(frame["recorded_prompt_tokens"].fillna(0).sum()), str(file_path)])


def start_sweep(con, sweep_id: str, name: str, experiment: str, path: str, replay: str,
                mode: str, knee_share: float, spec_json: str) -> None:
    """Create the sweep's row, or mark a resumed one running again."""
    con.execute("""INSERT INTO sweeps (sweep_id, name, experiment, path, replay_hash, mode,
                   knee_share, spec_json, started_at, status)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, now(), 'running')
                   ON CONFLICT (sweep_id) DO UPDATE SET status = 'running'""",
                [sweep_id, name, experiment, path, replay, mode, knee_share, spec_json])


def finish_sweep(con, sweep_id: str, chosen: str | None, proposal: str | None) -> None:
    con.execute("UPDATE sweeps SET status = 'done', ended_at = now(), chosen_point = ?, "
                "proposal_path = ? WHERE sweep_id = ?", [chosen, proposal, sweep_id])


def attempts(con, sweep_id: str) -> dict[tuple[str, int], tuple[int, str]]:
    """(point_key, repeat) -> (latest attempt, its status)."""
    rows = con.execute("""SELECT point_key, repeat, attempt, status FROM sweep_points
                          WHERE sweep_id = ? QUALIFY attempt = max(attempt) OVER
                          (PARTITION BY point_key, repeat)""", [sweep_id]).fetchall()
    return {(k, r): (a, s) for k, r, a, s in rows}


def record_point(con, row: dict, calls: pd.DataFrame) -> None:
    """One point attempt and its calls, in one transaction."""
    point = pd.DataFrame([row])
    try:
        with transaction(con):
            con.register("_point", point)
            con.execute("INSERT INTO sweep_points BY NAME SELECT * FROM _point")
            if len(calls):
                con.register("_calls", calls)
                con.execute("INSERT INTO sweep_calls BY NAME SELECT * FROM _calls")
    finally:
        con.unregister("_point")
        if len(calls):
            con.unregister("_calls")


def point_repeats(con, sweep_id: str) -> pd.DataFrame:
    """Each (point, repeat)'s latest attempt: the frame `evals.sweep.verdicts` takes."""
    return con.execute("""SELECT * FROM sweep_points WHERE sweep_id = ?
                          QUALIFY attempt = max(attempt) OVER (PARTITION BY point_key, repeat)
                          ORDER BY slots, point_key, repeat""", [sweep_id]).df()


def latest_sweep_ids(con, experiment: str) -> list[str]:
    """The id of the latest sweep of each name on the experiment, by name."""
    return [r[0] for r in con.execute(
        "SELECT arg_max(sweep_id, started_at) FROM sweeps WHERE experiment = ? "
        "GROUP BY name ORDER BY name", [experiment]).fetchall()]


def find_sweep(con, which: str | None) -> dict:
    """A sweep by id or name (the latest of that name), or the latest of all."""
    q = "SELECT * FROM sweeps {} ORDER BY started_at DESC LIMIT 1"
    if which is None:
        rows = con.execute(q.format("")).df()
    else:
        rows = con.execute(q.format("WHERE sweep_id = ? OR name = ?"), [which, which]).df()
    if rows.empty:
        known = [r[0] for r in con.execute("SELECT DISTINCT name FROM sweeps").fetchall()]
        raise UserError(f"no sweep {which!r} in the warehouse; " + (
            f"sweeps: {', '.join(known)}" if known else "run `dualpath sweep SPEC.toml` first"))
    return rows.iloc[0].to_dict()


def replay_file(con: duckdb.DuckDBPyConnection, replay_hash: str) -> Path | None:
    """The file of the frozen set whose hash is (or starts with) `replay_hash`: a spec may
    name the set by the hash `dualpath freeze` printed. None when no set (or several) match."""
    if not re.fullmatch(r"[0-9a-f]{6,64}", replay_hash):
        return None
    rows = con.execute("SELECT file_path FROM replay_sets WHERE starts_with(replay_hash, ?)",
                       [replay_hash]).fetchall()
    return Path(rows[0][0]) if len(rows) == 1 and rows[0][0] else None
