"""The copies `dualpath sql` takes of the warehouse for a query past its read-lock budget
(`warehouse.db.bounded_query`): each removed when its query ends, fails or is stopped by a
signal, and any left by a process that died (kill -9) removed at the next start. Killed three
times, `dualpath sql` once left three full copies that nothing cleaned.

A copy's folder is named for its process (`.sql-snapshot-<pid>-<start time>-<random>`): a
folder whose process no longer runs is nobody's. Where the warehouse's folder cannot be
written (a read-only file system) no copy is taken: no writer can be kept out of a warehouse
no one can write, so the query runs on under its read lock (`None`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Iterator

from dualpath.locks import _pid_alive, _proc_start

PREFIX = ".sql-snapshot-"
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def sweep(folder: Path) -> int:
    """Remove the snapshot folders in `folder` whose process is gone; returns how many."""
    gone = 0
    for d in folder.glob(PREFIX + "*"):
        parts = d.name[len(PREFIX):].split("-")
        try:
            pid, started = int(parts[0]), parts[1]
        except (IndexError, ValueError):
            continue        # not ours to judge (another naming): left alone
        if not _pid_alive(pid, started if started != "x" else None):
            shutil.rmtree(d, ignore_errors=True)
            gone += 1
    return gone


class _Guard:
    """The SIGTERMs received while a copy exists, and the connection whose query on the copy
    runs now (None between queries)."""

    def __init__(self) -> None:
        self.got: list[int] = []
        self.con = None


_GUARD: _Guard | None = None        # the main thread's, while a copy exists


def _watch(read_fd: int, guard: _Guard) -> None:
    """Interrupt the query on the copy when SIGTERM arrives. Python runs a signal handler only
    between bytecodes of the main thread, and a DuckDB query does not always let it run: once,
    under load, `dualpath sql` went on past a SIGTERM for over a minute. The C-level handler
    writes each signal's number to the wakeup fd at once, whatever the main thread does."""
    while data := os.read(read_fd, 64):
        if signal.SIGTERM in data and signal.SIGTERM not in guard.got:
            guard.got.append(signal.SIGTERM)
        # Ctrl-C too: DuckDB does not stop for it (the query ran on to its --timeout); the
        # interruption then reads as the person's (`warehouse.db._within`): exit 130
        if signal.SIGTERM in data or signal.SIGINT in data:
            con = guard.con
            if con is not None:
                con.interrupt()


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[_Guard]:
    """SIGTERM ends the process as an exit (143) while the copy exists, so the copy is removed
    as for Ctrl-C; the default action would end the process with the copy left. Outside a
    query the handler raises SystemExit; inside one the watcher thread interrupts the query
    and `snapshot_folder` turns what the query raises into the exit."""
    global _GUARD
    guard = _Guard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return

    def stop(signum, frame):
        if signum not in guard.got:
            guard.got.append(signum)
        if guard.con is None:
            raise SystemExit(128 + signum)

    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    before = signal.signal(signal.SIGTERM, stop)
    old_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch, args=(read_fd, guard), daemon=True,
                               name="sql-sigterm")
    watcher.start()
    _GUARD = guard
    try:
        yield guard
    finally:
        _GUARD = None
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGTERM, before)
        os.close(write_fd)                  # the watcher reads end-of-file and returns
        watcher.join(5)
        os.close(read_fd)


@contextlib.contextmanager
def querying(con) -> Iterator[None]:
    """Mark `con`'s query as the one a SIGTERM interrupts (a no-op outside a copy's life)."""
    guard = _GUARD
    if guard is None:
        yield
        return
    guard.con = con
    try:
        if guard.got:                       # SIGTERM came before the query started
            raise SystemExit(128 + guard.got[0])
        yield
    finally:
        guard.con = None


@contextlib.contextmanager
def snapshot_folder(warehouse: Path) -> Iterator[Path | None]:
    """A new folder beside the warehouse for one query's copy, removed on leaving; None when
    the folder cannot be written (the query stays on the original)."""
    folder = warehouse.parent
    me = f"{os.getpid()}-{_proc_start(os.getpid()) or 'x'}-"
    try:
        made = Path(tempfile.mkdtemp(prefix=PREFIX + me, dir=folder))
    except OSError as e:
        if e.errno in _READ_ONLY:
            yield None
            return
        raise
    try:
        with _terminate_as_exit() as guard:
            try:
                yield made
            except (Exception, KeyboardInterrupt):
                # SIGTERM in the query: an exit, not "internal error" (nor Ctrl-C's 130: the
                # query's interruption reads as the person's when no timer caused it)
                if guard.got:
                    raise SystemExit(128 + guard.got[0]) from None
                raise
    finally:
        shutil.rmtree(made, ignore_errors=True)
