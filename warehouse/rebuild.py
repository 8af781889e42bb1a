"""Mending from the journals: a damaged journal repaired, a damaged warehouse rebuilt.

`repair_journal`: a journal with a damaged line in the middle cannot be ingested. Moving it
aside (the old advice) left the calls already ingested from it in the warehouse, so the
rerun scored their units again and stored them twice (22 duplicated), and lost every call
never ingested (98). Instead the journal is quarantined (kept whole beside it), replaced by
every line that can still be read (a call whose prompt parts or quoted answer were on a
damaged line goes with them), and the run's rows are replaced by exactly that journal's.
A rerun then resumes from it like any other night.

`rebuild_warehouse`: a new warehouse from every journal under the runs folder, plus what no
journal holds (prices, plans, deviations, sweeps...) copied from the old file when it can be
read; the old file is kept beside the new one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import orjson

from dualpath.errors import DataError
from dualpath.warehouse.ingest import IngestStats, ingest_journals
from dualpath.warehouse.journal import iter_lines
from dualpath.warehouse.plans import freeze_log, restore_freezes
from dualpath.warehouse.quoting import ident, literal
from dualpath.warehouse.search_index import TABLES as SEARCH_TABLES

# rows that come from journals: replaced by a repair, rebuilt by a rebuild
FROM_JOURNALS = ("runs", "run_segments", "server_sessions", "calls", "units", "texts",
                 "prompts", "quotes", *SEARCH_TABLES)
_KINDS = {"begin", "session", "ustart", "call", "unit", "end"}


@dataclass
class Salvage:
    lines: list[bytes] = field(default_factory=list)
    dropped: list[tuple[int, str]] = field(default_factory=list)   # (line number, why)
    run_id: str | None = None
    numbers: list[int] = field(default_factory=list)   # the line number of each kept line


def _keep(obj: dict, parts: set[int], calls: set[str]) -> str | None:
    """Why a parsed line cannot be kept (None: it can)."""
    kind = obj.get("k")
    if kind == "part":
        if not isinstance(obj.get("key"), int):
            return "a part without its key"
        if "quote" in obj and obj.get("call") not in calls:
            return "a part quoting an answer whose call line is damaged"
        if "quote" not in obj and not isinstance(obj.get("text"), str):
            return "a part without its text"
        return None
    if kind not in _KINDS:
        return f"an unknown record kind {kind!r}"
    if kind == "call":
        if not isinstance(obj.get("call_id"), str):
            return "a call without its id"
        if any(k not in parts for k in obj.get("prompt_parts") or ()):
            return "a call whose prompt parts are damaged"
    return None


def salvage(journal: Path) -> Salvage:
    """Every line of a journal that can be read and ingested, in order, and what was not."""
    out = Salvage()
    parts: set[int] = set()
    calls: set[str] = set()
    for n, line, last in iter_lines(journal):
        if not line.endswith(b"\n"):
            out.dropped.append((n, "a torn last line (never synced)"))
            break
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.dropped.append((n, "not JSON"))
            continue
        why = _keep(obj, parts, calls) if isinstance(obj, dict) else "not a record"
        if why:
            out.dropped.append((n, why))
            continue
        if obj["k"] == "part":
            parts.add(obj["key"])
        elif obj["k"] == "call":
            calls.add(obj["call_id"])
        elif obj["k"] == "begin" and out.run_id is None:
            out.run_id = obj.get("run_id")
        out.lines.append(line)
        out.numbers.append(n)
    if out.dropped:
        _unfinish_short_units(out)
    return out


def _unfinish_short_units(out: Salvage) -> None:
    """A finished unit whose calls are not all readable any more is finished no longer: its
    end record is left out too, so the rerun scores it again. Kept, it read `graded` with
    16 of its 17 calls stored, in a run labelled complete."""
    seen: dict[tuple, int] = {}
    records = [orjson.loads(line) for line in out.lines]
    for obj in records:
        if obj["k"] == "call":
            key = (obj.get("ticker"), obj.get("draw"), obj.get("unit_attempt"))
            seen[key] = seen.get(key, 0) + 1
    keep_lines, keep_numbers = [], []
    for line, n, obj in zip(out.lines, out.numbers, records):
        key = (obj.get("ticker"), obj.get("draw"), obj.get("unit_attempt"))
        if obj["k"] == "unit" and seen.get(key, 0) < (obj.get("n_calls") or 0):
            out.dropped.append((n, f"the end of unit {key[0]} draw {key[1]}: "
                                   f"{seen.get(key, 0)} of its {obj['n_calls']} calls are "
                                   "readable, so the rerun scores it again"))
            continue
        keep_lines.append(line)
        keep_numbers.append(n)
    out.lines, out.numbers = keep_lines, keep_numbers
    out.dropped.sort()


def write_lines_atomic(dest: Path, lines: list[bytes]) -> None:
    """Replace `dest` with `lines` so that a reader sees the old file or the new one."""
    tmp = dest.with_name(f".{dest.name}.repair.tmp")
    with open(tmp, "wb") as f:
        for line in lines:
            f.write(line)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dest)


@dataclass
class RepairReport:
    journal: Path
    quarantined: Path
    kept_lines: int
    dropped: list[tuple[int, str]]
    run_id: str
    stats: list[IngestStats]


def quarantine_name(path: Path) -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return path.with_name(f"{path.stem}.damaged-{stamp}{path.suffix}")


def repair_journal(con: duckdb.DuckDBPyConnection, journal: Path,
                   run_id: str) -> RepairReport:
    """Quarantine the journal, keep its readable lines, and make the warehouse's rows of
    `run_id` exactly those of the repaired journal. Safe to repeat (a crash between the
    steps leaves the whole journal quarantined and the readable one in place)."""
    found = salvage(journal)
    if found.run_id not in (None, run_id):
        raise DataError(f"journal {journal} belongs to run {found.run_id}, not {run_id}")
    aside = quarantine_name(journal)
    os.link(journal, aside)                      # the damaged file, kept whole
    write_lines_atomic(journal, found.lines)
    con.execute("BEGIN")
    try:
        for table in ("calls", "units", "run_segments", "server_sessions", "runs"):
            con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run_id])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    stats = ingest_journals(con, [journal]) if found.lines else []
    return RepairReport(journal, aside, len(found.lines), found.dropped, run_id, stats)


def journals_under(runs_dir: Path) -> list[Path]:
    """Every run journal under a runs folder (<experiment>/<night>/<path>/journal.jsonl)."""
    return sorted(runs_dir.glob("*/*/*/journal.jsonl"))


@dataclass
class RebuildReport:
    path: Path
    kept_old: Path | None
    copied: list[str]
    not_recovered: list[str]
    stats: list[IngestStats]
    damaged_journals: list[str]


def _copy_from_old(con: duckdb.DuckDBPyConnection, old: Path) -> tuple[list[str], list[str]]:
    """Tables no journal holds, copied from the old warehouse when it can still be read."""
    mine = [r[0] for r in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND NOT temporary").fetchall()]
    keep = [t for t in mine if t not in FROM_JOURNALS and t != "schema_migrations"]
    try:
        con.execute(f"ATTACH {literal(old)} AS old (READ_ONLY)")
    except duckdb.Error:
        return [], keep
    copied, lost = [], []
    try:
        for t in keep:
            try:
                cols = [r[0] for r in con.execute(
                    "SELECT column_name FROM duckdb_columns() WHERE database_name = 'old' "
                    "AND table_name = ?", [t]).fetchall()]
                if not cols:
                    continue
                names = ", ".join(ident(c) for c in cols)
                con.execute(f"INSERT INTO {ident(t)} ({names}) SELECT {names} FROM old.{ident(t)}")
                copied.append(t)
            except duckdb.Error:
                lost.append(t)
    finally:
        con.execute("DETACH old")
    return copied, lost


def rebuild_warehouse(path: Path, runs_dir: Path) -> RebuildReport:
    """A new warehouse at `path` from the journals under `runs_dir`; the old file (if any)
    is kept as `<name>.damaged-<time>`. Callers hold every night's lock (none may run)."""
    from dualpath.warehouse.db import writer

    new = path.with_name(path.name + ".rebuilding")
    for f in (new, new.with_name(new.name + ".wal")):
        f.unlink(missing_ok=True)
    damaged: list[str] = []
    with writer(new) as con:
        copied, lost = _copy_from_old(con, path) if path.exists() else ([], [])
        if "plans" not in copied and restore_freezes(con, path):
            copied.append(f"plans (from {freeze_log(path).name})")
            lost = [t for t in lost if t != "plans"]
        try:
            stats = ingest_journals(con, journals_under(runs_dir))
        except DataError as e:
            stats, damaged = getattr(e, "ingested", []), [str(e)]
    kept = None
    if path.exists():
        kept = quarantine_name(path)
        os.replace(path, kept)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            os.replace(wal, kept.with_name(kept.name + ".wal"))
    os.replace(new, path)
    return RebuildReport(path, kept, copied, lost, stats, damaged)
