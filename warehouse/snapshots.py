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


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[list[int]]:
    """SIGTERM raises SystemExit while the copy exists (the main thread only), so the copy is
    removed as for Ctrl-C; the default action would end the process with the copy left.
    Yields the signals received: raised inside a DuckDB query, the SystemExit comes out as
    `RuntimeError: Query interrupted`."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def stop(signum, frame):
        got.append(signum)
        raise SystemExit(128 + signum)

    before = signal.signal(signal.SIGTERM, stop)
    try:
        yield got
    finally:
        signal.signal(signal.SIGTERM, before)


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
        with _terminate_as_exit() as got:
            try:
                yield made
            except RuntimeError:
                if got:             # SIGTERM in the query: an exit, not "internal error"
                    raise SystemExit(128 + got[0]) from None
                raise
    finally:
        shutil.rmtree(made, ignore_errors=True)
