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
from dataclasses import dataclass, fields
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Iterator

import duckdb
import orjson
import pandas as pd

from dualpath.errors import DataError
from dualpath.records import MEASURED, CallRecord
from warehouse.db import transaction
from warehouse.journal import JournalContents, read_journal, repair_hint, snapshot
from warehouse.line_limit import DEFAULT_OBJECT_BYTES, READ_OBJECT_BYTES

_SQL_TYPE = {"str": "VARCHAR", "int": "BIGINT", "float": "DOUBLE"}
_UNIT_COLUMNS = ("run_id", "path", "night", "ticker", "draw", "unit_attempt", "start_wall",
                 "end_wall", "seconds", "n_calls", "outcome", "grade", "failure_detail",
                 "final_text")
CALL_COLUMNS = {"k": "VARCHAR", **{
    f.name: _SQL_TYPE[str(f.type).split(" | ")[0]] for f in fields(CallRecord)},
    # the journal's own fields of a call line (prompts as parts)
    "prompt_hash": "UBIGINT", "prompt_parts": "BIGINT[]"}
_COLUMNS_SQL = "{" + ", ".join(f"'{k}': '{v}'" for k, v in CALL_COLUMNS.items()) + "}"


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


def _segments(jc: JournalContents, run_id: str) -> pd.DataFrame:
    rows = []
    for b in jc.begins:
        end = next((e for e in jc.ends if e.get("segment") == b["segment"]), None)
        rows.append({"run_id": run_id, "segment": b["segment"], "started_wall": b["started_wall"],
                     "ended_wall": end and end["ended_wall"],
                     "wall_s": end and end["ended_wall"] - end.get("started_wall",
                                                                    b["started_wall"]),
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


def _stage_calls(con: duckdb.DuckDBPyConnection, contents: list[JournalContents]) -> None:
    """Parse every journal's call lines into a temp table, keeping only calls not yet stored."""
    files = [str(jc.path) for jc in contents if jc.call_lines]
    con.execute("CREATE OR REPLACE TEMP TABLE stage_runs (run_id VARCHAR, night DATE, lines BIGINT)")
    con.executemany("INSERT INTO stage_runs VALUES (?, ?, ?)",
                    [[jc.begins[-1]["run_id"], jc.begins[-1]["night"], jc.call_lines]
                     for jc in contents if jc.call_lines])
    # a call line with parts brings its prompt's hash; an older one its whole prompt
    for i, (group, size) in enumerate(_json_reads(contents, files)):
        con.execute(("CREATE OR REPLACE TEMP TABLE stage_calls AS" if i == 0 else
                     "INSERT INTO stage_calls") + f"""
            SELECT * EXCLUDE (k, prompt_hash),
                   CASE WHEN prompt_parts IS NULL THEN hash(prompt_text) ELSE prompt_hash END
                       AS prompt_hash,
                   hash(output_text) AS output_hash, hash(request_json) AS request_hash,
                   -- the thinking, stored apart from the answer (m015); none: NULL
                   CASE WHEN reasoning_text <> '' THEN hash(reasoning_text) END
                       AS reasoning_hash,
                   end_mono - start_mono AS latency_s, first_token_mono - start_mono AS ttft_s
            FROM read_json(?, format = 'newline_delimited', columns = {_COLUMNS_SQL},
                           ignore_errors = true, maximum_object_size = {size})
            WHERE k = 'call'""", [group])
    short = con.execute("""SELECT r.run_id, r.lines, count(s.call_id) FROM stage_runs r
                           LEFT JOIN stage_calls s USING (run_id) GROUP BY ALL
                           HAVING count(s.call_id) <> r.lines""").fetchall()
    if short:
        run_id, lines, read = short[0]
        path = next(jc.path for jc in contents if jc.begins[-1]["run_id"] == run_id)
        raise DataError(f"journal {path} of run {run_id}: {lines} call lines but {read} "
                        f"readable; a damaged line in the middle of the journal: "
                        f"{repair_hint(path)}")
    con.execute("DELETE FROM stage_calls WHERE call_id IN (SELECT call_id FROM calls "
                "WHERE run_id IN (SELECT run_id FROM stage_runs))")
    for jc in contents:
        # the identity watcher found another server: calls since its last good check are
        # suspect, though each looked right when it arrived
        for (lo, hi), problem in jc.identity_lost_windows():
            for table in ("stage_calls", "calls"):   # calls stored by a mid-night ingest too
                con.execute(f"UPDATE {table} SET contaminated = ? WHERE run_id = ? AND "
                            "contaminated IS NULL AND end_wall > ? AND end_wall <= ?",
                            [problem, jc.begins[-1]["run_id"], lo, hi])


def _json_reads(contents: list[JournalContents], files: list[str]) -> list[tuple[list[str], int]]:
    """How DuckDB reads these journals' lines: (files, maximum_object_size) per query.

    DuckDB's JSON reader buffers twice `maximum_object_size` per file it reads at once
    (seen: 2 journals at 256 MiB failed to allocate 512 MiB under the 1 GB cap), so journals
    of ordinary lines are read together at DuckDB's default, and each one holding a long
    line (a huge answer) alone, at a size just above that line."""
    longest = {str(jc.path): jc.longest_line for jc in contents}
    small = [f for f in files if longest.get(f, 0) < DEFAULT_OBJECT_BYTES]
    out = [(small, DEFAULT_OBJECT_BYTES)] if small else []
    for f in files:
        if longest.get(f, 0) >= DEFAULT_OBJECT_BYTES:
            out.append(([f], min(READ_OBJECT_BYTES, longest[f] + 2**20)))
    return out


def _stage_prompts(con: duckdb.DuckDBPyConnection, contents: list[JournalContents]) -> None:
    """The prompts of the staged calls not yet stored, as lists of part hashes, and the texts
    of their parts (stage_parts). Raises when a call refers to a part its journal lacks."""
    con.execute("""
        CREATE OR REPLACE TEMP TABLE stage_prompts AS
        WITH known AS (SELECT prompt_hash FROM prompts
                       WHERE prompt_hash IN (SELECT prompt_hash FROM stage_calls))
        SELECT prompt_hash, any_value(prompt_parts) AS keys FROM stage_calls
        WHERE prompt_parts IS NOT NULL AND prompt_hash NOT IN (SELECT prompt_hash FROM known)
        GROUP BY prompt_hash""")
    con.execute("""CREATE OR REPLACE TEMP TABLE stage_refs AS
                   SELECT p.prompt_hash, u.key, u.seq FROM stage_prompts p,
                   unnest(p.keys) WITH ORDINALITY AS u(key, seq)""")
    files = [str(jc.path) for jc in contents if jc.part_lines]
    con.execute("CREATE OR REPLACE TEMP TABLE stage_parts "
                "(key BIGINT, hash UBIGINT, text VARCHAR, quote UBIGINT)")
    if files and con.execute("SELECT count(*) FROM stage_refs").fetchone()[0]:
        # a part that quotes an answer brings its own hash and the answer's, no text
        for group, size in _json_reads(contents, files):
            con.execute("""
                INSERT INTO stage_parts
                SELECT key, CASE WHEN quote IS NULL THEN hash(text) ELSE hash END, text, quote
                FROM read_json(?, format = 'newline_delimited', ignore_errors = true,
                               maximum_object_size = """ + str(size) + """,
                               columns = {'k': 'VARCHAR', 'key': 'BIGINT', 'text': 'VARCHAR',
                                          'hash': 'UBIGINT', 'quote': 'UBIGINT'})
                WHERE k = 'part' AND key IN (SELECT key FROM stage_refs)""", [group])
    missing = con.execute("SELECT count(*) FROM stage_refs WHERE key NOT IN "
                          "(SELECT key FROM stage_parts)").fetchone()[0]
    if missing:
        raise DataError(f"journals {', '.join(str(jc.path) for jc in contents)}: {missing} "
                        "prompt part(s) referred to but not readable; a damaged line in the "
                        f"middle of a journal: {repair_hint('JOURNAL')}")
    con.execute("""
        INSERT INTO prompts
        SELECT r.prompt_hash, list(m.hash ORDER BY r.seq) FROM stage_refs r
        JOIN (SELECT DISTINCT key, hash FROM stage_parts) m USING (key)
        GROUP BY r.prompt_hash""")
    con.execute("""
        INSERT INTO quotes
        WITH known AS (SELECT hash FROM quotes
                       WHERE hash IN (SELECT hash FROM stage_parts WHERE quote IS NOT NULL))
        SELECT DISTINCT hash, quote FROM stage_parts
        WHERE quote IS NOT NULL AND hash NOT IN (SELECT hash FROM known)""")


def _check_quotes(con: duckdb.DuckDBPyConnection, contents: list[JournalContents]) -> None:
    """Every quoted answer is stored (its call line comes before any prompt quoting it)."""
    missing = con.execute("""
        WITH q AS (SELECT DISTINCT quote FROM stage_parts WHERE quote IS NOT NULL)
        SELECT count(*) FROM q WHERE quote NOT IN (
            SELECT hash FROM texts WHERE hash IN (SELECT quote FROM q))""").fetchone()[0]
    if missing:
        raise DataError(f"journals {', '.join(str(jc.path) for jc in contents)}: {missing} "
                        "quoted answer(s) not found; a damaged line in the middle of a journal: "
                        f"{repair_hint('JOURNAL')}")


def _insert_texts(con: duckdb.DuckDBPyConnection, table: str, hash_col: str, text_col: str,
                  where: str = "TRUE") -> None:
    """Store each new text once. Deduplicate on (hash, rowid) integers first, then move each
    text once: grouping the long strings themselves was the slowest step of a bulk ingest.
    The stored hashes are matched against the staged ones (a small hash table), never the
    other way round: that table would grow with the warehouse."""
    con.execute(f"""
        INSERT INTO texts
        WITH known AS (SELECT hash FROM texts
                       WHERE hash IN (SELECT {hash_col} FROM {table}))
        SELECT {hash_col}, {text_col} FROM {table}
        WHERE rowid IN (SELECT min(rowid) FROM {table} WHERE {text_col} IS NOT NULL
                        AND {where} GROUP BY {hash_col})
          AND {hash_col} NOT IN (SELECT hash FROM known)""")


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
        _stage_calls(con, contents)
        _stage_prompts(con, contents)
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
        _insert_texts(con, *args)
    if any_calls:
        _check_quotes(con, contents)
    new_calls: dict[str, int] = {}
    if any_calls:
        new_calls = dict(con.execute("SELECT run_id, count(*) FROM stage_calls GROUP BY 1").fetchall())
        # the night joins here, where no text is carried along
        con.execute("INSERT INTO calls BY NAME SELECT s.* EXCLUDE (prompt_text, output_text, "
                    "reasoning_text, request_json, prompt_parts), r.night FROM stage_calls s "
                    "JOIN stage_runs r USING (run_id)")
    return new_units, new_calls
