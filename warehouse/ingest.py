"""Journal -> warehouse, idempotently, one transaction per journal.

Call and part lines (the bulk) are parsed by DuckDB's own JSON reader and their texts hashed
in SQL; the few other lines (begin, session, unit, end) are parsed in Python from a streamed
scan. Every row is keyed (calls by call_id, units by run/ticker/draw/attempt, texts by
content hash, prompts by prompt hash), so ingesting the same journal twice changes nothing
and a journal that grew since the last ingest adds only what is new. Outputs, request
bodies and prompt parts are stored once: they repeat across calls, draws and paths. A
prompt is stored as the list of its parts' hashes (see `warehouse.journal`); a part that
quotes an earlier answer whole is stored as a pointer to that answer (`quotes`), so each
answer's text is stored once. A journal written before parts existed brings whole prompts,
stored whole as before.

Memory is flat in the size of the warehouse: journals are ingested a batch at a time, every
lookup against the stored rows builds its hash table on the journal's side and streams the
warehouse's (texts, prompts, quotes), and DuckDB's cache is capped while ingesting.
"""

from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Iterator

import duckdb
import orjson
import pandas as pd

from dualpath.errors import DataError
from dualpath.records import MEASURED
from dualpath.warehouse.db import transaction
from dualpath.warehouse.energy import store_telemetry
from dualpath.warehouse.ingest_stage import check_quotes, insert_texts, stage_calls, stage_prompts
from dualpath.warehouse.journal import JournalContents, read_journal, repair_hint, snapshot
from dualpath.warehouse.search_index import index_new_answers

_UNIT_COLUMNS = ("run_id", "path", "night", "ticker", "draw", "unit_attempt", "start_wall",
                 "end_wall", "seconds", "n_calls", "outcome", "grade", "failure_detail",
                 "final_text")


# Journals ingested in one transaction, at most (one journal may be more). A night's two
# real-size journals (~75 MB each) go in together; so much text at once also lets DuckDB
# write it straight to the file instead of through the WAL (per journal: 1.7x the time).
BATCH_BYTES = 256 * 2**20
# DuckDB's memory while ingesting (see _memory_capped): a batch's staged rows fit in it
MEMORY_LIMIT = "1GB"


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


def _wall_s(end: dict, begin: dict) -> float:
    """A segment's seconds: by the monotonic clock where the journal kept them, else (older
    journals) the difference of its wall stamps."""
    if end.get("wall_s") is not None:
        return end["wall_s"]
    return end["ended_wall"] - end.get("started_wall", begin["started_wall"])


def _segments(jc: JournalContents, run_id: str) -> pd.DataFrame:
    rows = []
    for b in jc.begins:
        end = next((e for e in jc.ends if e.get("segment") == b["segment"]), None)
        rows.append({"run_id": run_id, "segment": b["segment"], "started_wall": b["started_wall"],
                     "ended_wall": end and end["ended_wall"],
                     "wall_s": end and _wall_s(end, b),
                     "units_done": end and end["units_done"], "calls": end and end["calls"],
                     "units_measured": end and end.get("units_measured"),
                     "detail": end and end.get("detail"),
                     "status": end["status"] if end else "interrupted"})
    return pd.DataFrame(rows)


def run_status(jc: JournalContents, running: bool) -> tuple[str, str | None]:
    """complete: every planned unit's latest attempt is a measurement (graded or
    parse_failed); failed: none is; partial: some are. The detail says what the others are."""
    if running:
        return "running", None
    planned = jc.begins[-1]["units_planned"] if jc.begins else 0
    final = jc.final_units()
    counts: dict[str, int] = {}
    for u in final.values():
        counts[u["outcome"]] = counts.get(u["outcome"], 0) + 1
    measured = sum(counts.get(k, 0) for k in MEASURED)
    if planned > 0 and measured >= planned:
        return "complete", None
    parts = [f"{measured} of {planned} units measured"]
    parts += [f"{n} {k}" for k, n in sorted(counts.items()) if k not in MEASURED]
    if planned > len(final):
        parts.append(f"{planned - len(final)} never started")
    last_end = jc.ends[-1] if jc.ends else None
    if not last_end or len(jc.ends) < len(jc.begins):
        parts.append("last segment interrupted (no end record)")
    elif last_end.get("detail"):
        parts.append(last_end["detail"])
    return ("failed" if measured == 0 else "partial"), "; ".join(parts)


def _run_row(jc: JournalContents, status: str, detail: str | None, segs: pd.DataFrame) -> pd.DataFrame:
    meta = jc.begins[-1]
    final = jc.final_units()
    return pd.DataFrame([{
        "run_id": meta["run_id"], "experiment": meta["experiment"],
        "night": date.fromisoformat(meta["night"]), "path": meta["path"],
        "engine": meta["engine"], "config_hash": meta["config_hash"], "status": status,
        "units_planned": meta["units_planned"], "units_done": len(final),
        "units_measured": sum(u["outcome"] in MEASURED for u in final.values()),
        "tickers_planned": meta.get("tickers_planned"),
        "slots": meta["slots"], "time_scale": meta["time_scale"],
        "started_at": _ts(jc.begins[0]["started_wall"]),
        "ended_at": _ts(jc.ends[-1]["ended_wall"]) if jc.ends else None,
        "wall_s": segs["wall_s"].dropna().sum() if len(segs) else None,
        "segments": len(jc.begins), "status_detail": detail}])


def ingest_journal(con: duckdb.DuckDBPyConnection, journal: Path, *, running: bool = False) -> IngestStats:
    """Ingest one run's journal; safe to repeat (None: nothing was ever synced to it)."""
    stats = ingest_journals(con, [journal], running=running)
    return stats[0] if stats else None


def ingest_journals(con: duckdb.DuckDBPyConnection, journals: list[Path], *,
                    running: bool = False) -> list[IngestStats]:
    """Ingest run journals, a batch of up to `BATCH_BYTES` of them per transaction (memory
    stays flat however many there are); safe to repeat. Each run's identity comes from its
    begin record. With `running`, the journals are still being written: their runs are
    stored as `running`, from snapshots, and unfinished units are not yet abandoned."""
    out: list[IngestStats] = []
    failed: list[DataError] = []
    with _memory_capped(con):
        for batch in _batches(journals):
            try:
                out += _ingest_batch(con, batch, running)
            except DataError as e:
                if len(batch) == 1:
                    failed.append(e)
                    continue
                # one damaged journal must not roll back the others: each alone
                for j in batch:
                    try:
                        out += _ingest_batch(con, [j], running)
                    except DataError as e1:
                        failed.append(e1)
    if failed:
        e = DataError("; ".join(str(f) for f in failed))
        e.ingested = out      # what was stored in spite of it
        raise e
    return out


def _ingest_batch(con: duckdb.DuckDBPyConnection, batch: list[Path],
                  running: bool) -> list[IngestStats]:
    try:
        if not running:
            return _ingest(con, batch, running)
        with tempfile.TemporaryDirectory() as tmp:
            return _ingest(con, [snapshot(j, Path(tmp) / f"{i}-{j.name}")
                                 for i, j in enumerate(batch)], running)
    except (duckdb.InvalidInputException, duckdb.ConversionException) as e:
        # DuckDB's JSON reader refused a line (one longer than READ_OBJECT_BYTES, written
        # before the writer bounded lines)
        where = ", ".join(str(j) for j in batch)
        raise DataError(f"journal {where} cannot be read: {str(e).splitlines()[0][:300]}; "
                        f"{repair_hint(batch[0] if len(batch) == 1 else 'JOURNAL')}") from None


@contextlib.contextmanager
def _memory_capped(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB's memory limit at `MEMORY_LIMIT` while ingesting into a warehouse file, then
    the caller's again. By default DuckDB may hold 80% of the machine's memory, and an ingest
    keeps every block it wrote cached: the process grew with the warehouse (1.3 GB after one
    week, 2.8 GB after six). What does not fit goes to the file's temp folder. A limit the
    caller set is kept (it reads back rounded, so it could not be restored exactly), and an
    in-memory database (tests) is left alone: its data lives in that memory."""
    limit = "SELECT current_setting('memory_limit')"
    path = con.execute("SELECT path FROM duckdb_databases() "
                       "WHERE database_name = current_database()").fetchone()[0]
    with duckdb.connect() as fresh:
        default = fresh.execute(limit).fetchone()[0]
    if not path or con.execute(limit).fetchone()[0] != default:
        yield
        return
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    try:
        yield
    finally:
        con.execute("RESET memory_limit")


def _batches(journals: list[Path], max_bytes: int = BATCH_BYTES) -> list[list[Path]]:
    """Consecutive groups of journals of up to `max_bytes` (at least one journal each); two
    journals of one run (a copy shipped twice) never share a group: each is keyed by run."""
    out: list[list[Path]] = []
    size, runs = 0, set()
    for j in journals:
        n = j.stat().st_size if j.exists() else 0
        run = _run_of(j)
        if not out or size + n > max_bytes or run in runs:
            out.append([])
            size, runs = 0, set()
        out[-1].append(j)
        size += n
        runs.add(run)
    return out


def _run_of(journal: Path) -> str | None:
    """The run id on a journal's first line (its begin record), if it has one."""
    try:
        with open(journal, "rb") as f:
            return orjson.loads(f.readline()).get("run_id")
    except (OSError, orjson.JSONDecodeError, AttributeError):
        return None


def _ingest(con: duckdb.DuckDBPyConnection, journals: list[Path],
            running: bool) -> list[IngestStats]:
    contents = []
    for jc in (read_journal(j, skip_calls=True) for j in journals):
        if jc.begins:
            contents.append(jc)
        elif jc.call_lines or jc.part_lines or jc.units or jc.ustarts or jc.ends:
            raise DataError(f"journal {jc.path} has no begin record; {repair_hint(jc.path)}")
        # else: nothing was ever synced (an empty file, or one torn line): nothing to store
    if not contents:
        return []
    runs, segs, units, sessions, stats = [], [], [], [], []
    for jc in contents:
        meta = jc.begins[-1]
        status, detail = run_status(jc, running)
        seg = _segments(jc, meta["run_id"])
        segs.append(seg)
        runs.append(_run_row(jc, status, detail, seg))
        results = jc.unit_results(running)
        if results:
            u = pd.DataFrame.from_records(results)
            u["night"] = date.fromisoformat(meta["night"])
            if "end_mono" in u:
                u["seconds"] = u["end_mono"] - u["start_mono"]
            # every column, whatever the journal holds so far (started units alone have no
            # result columns: a journal cut there failed the whole batch's transaction)
            units.append(u.reindex(columns=list(_UNIT_COLUMNS)))
        if jc.sessions:
            # a session is recorded at its start and completed at its end: merge by id
            merged: dict[str, dict] = {}
            for rec in jc.sessions:
                merged.setdefault(rec["session_id"], {}).update(rec)
            sessions.append(pd.DataFrame.from_records(list(merged.values())))
        stats.append(IngestStats(meta["run_id"], status, jc.call_lines, len(results), 0, 0,
                                 jc.torn_tail))
    frames = {"run_rows": pd.concat(runs), "segs": pd.concat(segs)}
    if units:
        frames["units_df"] = pd.concat(units)
    if sessions:
        frames["sessions_df"] = pd.concat(sessions)
    try:
        with transaction(con):
            for name, frame in frames.items():
                con.register(name, frame)
            new_units, new_calls = _store(con, frames, contents)
            store_telemetry(con, [jc.path for jc in contents])
    finally:
        for name in frames:
            con.unregister(name)
        for t in ("stage_calls", "stage_units", "stage_runs", "stage_prompts", "stage_refs",
                  "stage_parts"):
            con.execute(f"DROP TABLE IF EXISTS {t}")
    for st in stats:
        st.new_calls, st.new_units = new_calls.get(st.run_id, 0), new_units.get(st.run_id, 0)
    return stats


def _store(con: duckdb.DuckDBPyConnection, frames: dict[str, pd.DataFrame],
           contents: list[JournalContents]) -> tuple[dict[str, int], dict[str, int]]:
    """Write the staged frames of `_ingest` (registered under their names); returns the
    new units and new calls of each run. Runs inside `_ingest`'s transaction."""
    any_calls = any(jc.call_lines for jc in contents)
    con.execute("INSERT OR REPLACE INTO runs BY NAME SELECT * FROM run_rows")
    if len(frames["segs"]):
        con.execute("INSERT OR REPLACE INTO run_segments BY NAME SELECT * FROM segs")
    if "sessions_df" in frames:
        con.execute("INSERT OR REPLACE INTO server_sessions BY NAME SELECT * FROM sessions_df")
    texts = []
    if any_calls:
        stage_calls(con, contents)
        stage_prompts(con, contents)
        texts += [("stage_parts", "hash", "text"),
                  # a journal written before parts: whole prompts, stored whole
                  ("stage_calls", "prompt_hash", "prompt_text", "prompt_parts IS NULL"),
                  ("stage_calls", "output_hash", "output_text"),
                  ("stage_calls", "reasoning_hash", "reasoning_text",
                   "reasoning_hash IS NOT NULL"),
                  ("stage_calls", "request_hash", "request_json")]
    new_units: dict[str, int] = {}
    if "units_df" in frames:
        # Upsert: an outcome can change after a unit was first stored (a later identity
        # check contaminates it; an attempt seen running is later abandoned).
        con.execute("""CREATE OR REPLACE TEMP TABLE stage_units AS
                       SELECT * EXCLUDE (final_text), hash(final_text) AS final_hash,
                              final_text, NOT EXISTS (
                           SELECT 1 FROM units x WHERE x.run_id = u.run_id AND
                           x.ticker = u.ticker AND x.draw = u.draw AND
                           x.unit_attempt = u.unit_attempt) AS is_new
                       FROM units_df u""")
        texts.append(("stage_units", "final_hash", "final_text"))
        new_units = dict(con.execute("SELECT run_id, count(*) FROM stage_units WHERE is_new "
                                     "GROUP BY 1").fetchall())
        con.execute("INSERT OR REPLACE INTO units BY NAME SELECT * EXCLUDE (final_text, "
                    "is_new) FROM stage_units")
    for args in texts:
        insert_texts(con, *args)
    if any_calls:
        check_quotes(con, contents)
        index_new_answers(con)          # the search's index, with the answers it indexes
    new_calls: dict[str, int] = {}
    if any_calls:
        new_calls = dict(con.execute("SELECT run_id, count(*) FROM stage_calls GROUP BY 1").fetchall())
        # the night joins here, where no text is carried along
        con.execute("INSERT INTO calls BY NAME SELECT s.* EXCLUDE (prompt_text, output_text, "
                    "reasoning_text, request_json, prompt_parts), r.night FROM stage_calls s "
                    "JOIN stage_runs r USING (run_id)")
    return new_units, new_calls
