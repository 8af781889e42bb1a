"""Journal -> warehouse, idempotently and in one transaction.

Every row is keyed (calls by call_id, units by run/ticker/draw/attempt, texts by content hash),
so ingesting the same journal twice changes nothing, and a journal that grew since the last
ingest adds only what is new. Prompts, outputs and request bodies are stored once by content
hash: prompts repeat across draws and paths.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path

import duckdb
import pandas as pd

from warehouse.journal import JournalContents, read_journal

_TEXT_FIELDS = (("prompt_text", "prompt_hash"), ("output_text", "output_hash"),
                ("request_json", "request_hash"))


def text_hash(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass
class IngestStats:
    run_id: str
    status: str
    calls: int
    units: int
    new_calls: int
    new_units: int
    torn_tail: bool


def _ts(wall: float | None) -> datetime | None:
    return None if wall is None else datetime.fromtimestamp(wall, tz=timezone.utc)


def _calls_frame(jc: JournalContents, night: date) -> tuple[pd.DataFrame, dict[str, str]]:
    texts: dict[str, str] = {}
    df = pd.DataFrame.from_records(jc.calls)
    for text_col, hash_col in _TEXT_FIELDS:
        hashes = []
        for rec in jc.calls:
            t = rec[text_col]
            h = text_hash(t)
            texts.setdefault(h, t)
            hashes.append(h)
        df[hash_col] = hashes
    df = df.drop(columns=[c for c, _ in _TEXT_FIELDS])
    df["night"] = night
    df["latency_s"] = df["end_mono"] - df["start_mono"]
    df["ttft_s"] = df["first_token_mono"] - df["start_mono"]
    return df, texts


def _units_frame(jc: JournalContents, night: date) -> tuple[pd.DataFrame, dict[str, str]]:
    df = pd.DataFrame.from_records(jc.units)
    texts = {}
    hashes = []
    for rec in jc.units:
        t = rec["final_text"]
        if t is None:
            hashes.append(None)
            continue
        h = text_hash(t)
        texts[h] = t
        hashes.append(h)
    df["final_hash"] = hashes
    df["night"] = night
    df["seconds"] = df["end_mono"] - df["start_mono"]
    return df.drop(columns=["final_text", "start_mono", "end_mono"]), texts


def _segments(jc: JournalContents, run_id: str) -> pd.DataFrame:
    rows = []
    for i, b in enumerate(jc.begins, 1):
        end = next((e for e in jc.ends if e.get("segment") == b["segment"]), None)
        rows.append({"run_id": run_id, "segment": b["segment"], "started_wall": b["started_wall"],
                     "ended_wall": end and end["ended_wall"],
                     "wall_s": end and end["ended_wall"] - end.get("started_wall",
                                                                    b["started_wall"]),
                     "units_done": end and end["units_done"], "calls": end and end["calls"],
                     "status": end["status"] if end else "interrupted"})
    return pd.DataFrame(rows)


def run_status(jc: JournalContents, running: bool) -> tuple[str, str | None]:
    """complete: every planned unit has a result; partial: some do not; failed: none could run."""
    if running:
        return "running", None
    last_end = jc.ends[-1] if jc.ends else None
    planned = jc.begins[-1]["units_planned"] if jc.begins else 0
    done = len(jc.finished_units())
    if last_end and last_end["status"] == "failed" and done == 0:
        return "failed", last_end.get("detail")
    if done >= planned and planned > 0:
        return "complete", None
    why = "interrupted (no end record)" if not last_end else last_end.get("detail")
    return "partial", f"{done} of {planned} units finished" + (f"; {why}" if why else "")


def ingest_journal(con: duckdb.DuckDBPyConnection, journal: Path, *, running: bool = False) -> IngestStats:
    """Ingest one run's journal; safe to repeat. The run's identity comes from its begin record."""
    jc = read_journal(journal)
    if not jc.begins:
        raise ValueError(f"journal {journal} has no begin record")
    meta = jc.begins[-1]
    run_id, night = meta["run_id"], date.fromisoformat(meta["night"])
    status, detail = run_status(jc, running)
    texts: dict[str, str] = {}
    calls = units = None
    if jc.calls:
        calls, t = _calls_frame(jc, night)
        texts.update(t)
    if jc.units:
        units, t = _units_frame(jc, night)
        texts.update(t)
    segs = _segments(jc, run_id)
    text_df = pd.DataFrame({"hash": list(texts), "text": list(texts.values())})
    wall = segs["wall_s"].dropna().sum() if len(segs) else None
    run_row = pd.DataFrame([{
        "run_id": run_id, "experiment": meta["experiment"], "night": night, "path": meta["path"],
        "engine": meta["engine"], "config_hash": meta["config_hash"], "status": status,
        "units_planned": meta["units_planned"], "units_done": len(jc.finished_units()),
        "slots": meta["slots"], "time_scale": meta["time_scale"],
        "started_at": _ts(jc.begins[0]["started_wall"]),
        "ended_at": _ts(jc.ends[-1]["ended_wall"]) if jc.ends else None,
        "wall_s": wall, "segments": len(jc.begins), "status_detail": detail}])
    sessions = pd.DataFrame.from_records(jc.sessions) if jc.sessions else None
    before_calls = con.execute("SELECT count(*) FROM calls WHERE run_id = ?", [run_id]).fetchone()[0]
    before_units = con.execute("SELECT count(*) FROM units WHERE run_id = ?", [run_id]).fetchone()[0]
    con.execute("BEGIN")
    try:
        con.register("run_row", run_row)
        con.execute("INSERT OR REPLACE INTO runs BY NAME SELECT * FROM run_row")
        con.register("segs", segs)
        if len(segs):
            con.execute("INSERT OR REPLACE INTO run_segments BY NAME SELECT * FROM segs")
        if len(text_df):
            con.register("text_df", text_df)
            con.execute("INSERT OR IGNORE INTO texts BY NAME SELECT * FROM text_df")
        if calls is not None:
            con.register("calls_df", calls)
            con.execute("INSERT OR IGNORE INTO calls BY NAME SELECT * FROM calls_df")
        if units is not None:
            con.register("units_df", units)
            con.execute("INSERT OR IGNORE INTO units BY NAME SELECT * FROM units_df")
        if sessions is not None:
            con.register("sessions_df", sessions)
            con.execute("INSERT OR REPLACE INTO server_sessions BY NAME SELECT * FROM sessions_df")
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    finally:
        for name in ("run_row", "segs", "text_df", "calls_df", "units_df", "sessions_df"):
            try:
                con.unregister(name)
            except Exception:
                pass
    n_calls = len(jc.calls)
    n_units = len(jc.units)
    after_calls = con.execute("SELECT count(*) FROM calls WHERE run_id = ?", [run_id]).fetchone()[0]
    after_units = con.execute("SELECT count(*) FROM units WHERE run_id = ?", [run_id]).fetchone()[0]
    return IngestStats(run_id, status, n_calls, n_units, after_calls - before_calls,
                       after_units - before_units, jc.torn_tail)
