"""Connections: one writer for short transactions, readers that wait out the writer.

DuckDB allows one read-write process or many read-only ones, never both. So the writer holds
the file only for a short ingest, and every opener retries while another process holds a
conflicting lock ("Could not set lock on file").
"""

from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path
from typing import Iterator

import duckdb

from dualpath.errors import DiskFull, UserError, WarehouseBusy, WarehouseDamaged

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock")
_FULL_MARKERS = ("No space left on device", "Disk quota exceeded")
# what DuckDB says of a file cut short, emptied or overwritten (seen on 2.0: a zero-byte or
# foreign file "is not a valid DuckDB database file", a truncated one "Could not read enough
# bytes", at connect or at the first query that reaches a lost block)
_DAMAGE_MARKERS = ("not a valid DuckDB database", "Could not read enough bytes", "Corrupt",
                   "checksum", "Checksum", "database file is damaged", "Failed to load")


def diagnosis(path: Path, e: BaseException) -> UserError | None:
    """One line for a disk that is full or a warehouse that is damaged (None: neither).
    Disk full: every call is in the journals, so a rerun once space is freed is exact."""
    text = f"{e} {getattr(e, 'strerror', '') or ''}"
    first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
    if any(m in text for m in _FULL_MARKERS) or getattr(e, "errno", None) == 28:
        return DiskFull(f"the disk holding {path} is full ({first}); free space there and "
                        "rerun the night: the journals keep every call and the rerun "
                        "ingests them exactly")
    if isinstance(e, duckdb.Error) and any(m in text for m in _DAMAGE_MARKERS):
        return WarehouseDamaged(f"warehouse {path} is damaged ({first}); the journals hold "
                                "every call: rebuild it with `dualpath rebuild -c CONFIG` "
                                "(the damaged file is kept beside it)")
    return None


@contextlib.contextmanager
def diagnosed(path: Path) -> Iterator[None]:
    """Turn a full disk or a damaged file into its one-line error, anything else as it is."""
    try:
        yield
    except (duckdb.Error, OSError) as e:
        found = diagnosis(path, e)
        if found is None:
            raise
        raise found from None


# For SQL typed by a person: the warehouse file and nothing else. External access off
# (no COPY ... TO, EXPORT DATABASE, ATTACH, read_csv/read_text/glob of other files), no
# extension installed, loaded or autoloaded, and the settings locked so the query cannot
# switch any of it back on.
SANDBOX = {"enable_external_access": False, "autoinstall_known_extensions": False,
           "autoload_known_extensions": False, "allow_community_extensions": False,
           "allow_unsigned_extensions": False, "lock_configuration": True}


def _open(path: Path, read_only: bool, wait_s: float,
          config: dict | None = None) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + wait_s
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=config or {})
        except duckdb.IOException as e:
            if not any(m in str(e) for m in _LOCK_MARKERS):
                raise diagnosis(path, e) or e
            if time.monotonic() > deadline:
                raise WarehouseBusy(f"warehouse {path} is locked by another process "
                                    f"for more than {wait_s:.0f} s ({e}); wait for that "
                                    "process to finish (an ingest takes seconds; another "
                                    "program holding it open, e.g. a DuckDB shell, must "
                                    "close it) and try again") from None
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)


@contextlib.contextmanager
def writer(path: Path, wait_s: float = 120.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-write connection, migrated, closed on exit (release the lock quickly)."""
    from dualpath.warehouse.migrations import migrate

    path.parent.mkdir(parents=True, exist_ok=True)
    with diagnosed(path):
        con = _open(path, read_only=False, wait_s=wait_s)
        try:
            migrate(con)
            yield con
        finally:
            con.close()


def _bring_up_to_date(path: Path) -> None:
    """Apply migrations a warehouse written by an older dualpath lacks, so read-only commands
    see today's views; skipped (the old schema is read as it is) while a writer holds it."""
    from dualpath.warehouse.migrations import MIGRATIONS, applied

    con = _open(path, read_only=True, wait_s=10.0)
    try:
        done = applied(con)
    except duckdb.Error:
        done = set()
    finally:
        con.close()
    if all(name in done for name, _ in MIGRATIONS):
        return
    try:
        with writer(path, wait_s=2.0):
            pass
    except WarehouseBusy:
        pass


@contextlib.contextmanager
def reader(path: Path, wait_s: float = 60.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection; waits while a writer ingests."""
    if not path.exists():
        raise UserError(f"no warehouse at {path}; run `dualpath nightly` or `dualpath demo` first")
    with diagnosed(path):
        _bring_up_to_date(path)
        con = _open(path, read_only=True, wait_s=wait_s)
        try:
            yield con
        finally:
            con.close()


@contextlib.contextmanager
def sandboxed_reader(path: Path, wait_s: float = 60.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection that can touch no file but the warehouse (`SANDBOX`): for SQL
    a user types (`dualpath sql`), which must not read or write the machine's files."""
    if not path.exists():
        raise UserError(f"no warehouse at {path}; run `dualpath nightly` or `dualpath demo` first")
    with diagnosed(path):
        con = _open(path, read_only=True, wait_s=wait_s, config=SANDBOX)
    try:
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Statements that must land together (a migration and its record, an ingest, a forced
    plan and its deviation): committed at the end, rolled back if anything in between
    raises or the process is killed. The one place dualpath writes BEGIN/COMMIT/ROLLBACK."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Whether the warehouse has this table or view (a read-only connection to a warehouse
    written by an older dualpath may lack a later migration's tables)."""
    return con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?",
                       [name]).fetchall()[0][0] > 0


def holds_runs(path: Path) -> bool:
    """Whether the DuckDB file at `path` is a dualpath warehouse (it has the `runs` table),
    read without migrating it: a viewer must not turn someone's other DuckDB file into one."""
    with diagnosed(path):
        con = _open(path, read_only=True, wait_s=10.0)
        try:
            return has_table(con, "runs")
        finally:
            con.close()


def has_column(con: duckdb.DuckDBPyConnection, table: str, column: str) -> bool:
    """Whether the table has this column (the same: older warehouses lack later columns)."""
    return con.execute("SELECT count(*) FROM information_schema.columns WHERE table_name = ? "
                       "AND column_name = ?", [table, column]).fetchall()[0][0] > 0


def table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every table and view of the warehouse, by name."""
    return [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                      "WHERE table_schema = 'main' ORDER BY 1").fetchall()]


# how long `bounded_query` keeps the warehouse's read lock before it moves to a snapshot
LOCK_BUDGET_S = 5.0


class QueryTimeout(UserError):
    """A query typed by a person ran past its time limit."""


def _within(con: duckdb.DuckDBPyConnection, run, seconds: float):
    """run(con) stopped by `con.interrupt()` after `seconds`; raises InterruptException.

    DuckDB answers Ctrl-C with the same interruption as the timer's (InterruptException while
    the query runs, `RuntimeError: Query interrupted` while its rows are fetched): one the
    timer did not cause is the person's, raised as KeyboardInterrupt (exit 130), never taken
    for a timeout or an internal error."""
    import threading

    fired = threading.Event()

    def stop() -> None:
        fired.set()
        con.interrupt()

    timer = threading.Timer(max(seconds, 0.0), stop)
    timer.start()
    try:
        return run(con)
    except (duckdb.InterruptException, RuntimeError) as e:
        if isinstance(e, RuntimeError) and "interrupted" not in str(e).lower():
            raise
        if fired.is_set():
            raise duckdb.InterruptException(str(e)) from None
        raise KeyboardInterrupt from None
    finally:
        timer.cancel()


def _copy_warehouse(path: Path, folder: Path) -> Path:
    """A copy of the warehouse (and its WAL) taken while a read lock holds writers off."""
    import shutil

    copy = folder / path.name
    shutil.copyfile(path, copy)
    wal = path.with_name(path.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
    return copy


def bounded_query(path: Path, run, timeout_s: float, lock_s: float = LOCK_BUDGET_S):
    """run(con) on a sandboxed read-only connection, stopped after `timeout_s`, holding the
    warehouse's read lock for `lock_s` at most: a query still running then is started again
    on a snapshot (`warehouse.snapshots`: removed when the query ends or dies), so that a
    night's ingest (a writer, which waits 120 s for readers) is never kept out. A read lock
    held by a long `dualpath sql` made a night fail. Where no snapshot can be written (a
    read-only folder, which no writer can use either) the query runs on under its lock."""
    from dualpath.warehouse.snapshots import querying, snapshot_folder, sweep

    began = time.monotonic()
    with contextlib.suppress(OSError):
        sweep(path.parent)        # copies left by a `dualpath sql` that was killed
    stopped = QueryTimeout(f"query stopped after {timeout_s:g} s (--timeout); narrow it "
                           "(a WHERE on night, a LIMIT) or allow more")
    with contextlib.ExitStack() as keep:
        with sandboxed_reader(path) as con:
            try:
                return _within(con, run, min(timeout_s, lock_s))
            except duckdb.InterruptException:
                if timeout_s <= lock_s:
                    raise stopped from None
            folder = keep.enter_context(snapshot_folder(path))
            if folder is None:
                try:
                    return _within(con, run, timeout_s - (time.monotonic() - began))
                except duckdb.InterruptException:
                    raise stopped from None
            copy = _copy_warehouse(path, folder)
        with diagnosed(path):
            snap = duckdb.connect(str(copy), read_only=True, config=SANDBOX)
        try:
            with querying(snap):
                return _within(snap, run, timeout_s - (time.monotonic() - began))
        except duckdb.InterruptException:
            raise stopped from None
        finally:
            snap.close()
