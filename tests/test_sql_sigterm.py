"""SIGTERM to a `dualpath sql` whose query runs on a snapshot copy ends it as an exit (143),
the copy removed: raised inside DuckDB's query, the SystemExit once came out as `internal
error: RuntimeError: Query interrupted (a dualpath bug, please report it ...)`."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from dualpath.sim.proxy import wait_until
from dualpath.warehouse.migrations import migrate

DUALPATH = str(Path(sys.executable).with_name("dualpath"))
LONG = "SELECT sum(a.range * b.range) FROM range(300000) a, range(300000) b"


def test_sigterm_during_a_query_on_a_snapshot_is_an_exit_and_leaves_no_copy(tmp_path):
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        migrate(con)
    snaps = lambda: sorted(tmp_path.glob(".sql-snapshot-*"))          # noqa: E731
    proc = subprocess.Popen([DUALPATH, "sql", "--db", str(path), "--timeout", "300", LONG],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: any(any(d.iterdir()) for d in snaps()), 60, 0.05)
        time.sleep(0.5)                          # the query runs on the copy now
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "internal error" not in err and "Traceback" not in err, err
    assert snaps() == []


def test_the_watcher_interrupts_the_running_query_whatever_the_main_thread_does():
    """The C-level handler writes the signal's number to the wakeup fd; the watcher thread
    reads it and interrupts the query (a query that never lets Python's handler run once kept
    `dualpath sql` going for over a minute past a SIGTERM)."""
    import os
    import threading

    from dualpath.warehouse.snapshots import _Guard, _watch

    class Query:
        interrupted = 0

        def interrupt(self):
            self.interrupted += 1

    guard, query = _Guard(), Query()
    guard.con = query
    read_fd, write_fd = os.pipe()
    watcher = threading.Thread(target=_watch, args=(read_fd, guard))
    watcher.start()
    os.write(write_fd, bytes([signal.SIGINT, signal.SIGTERM]))
    os.close(write_fd)
    watcher.join(10)
    os.close(read_fd)
    assert not watcher.is_alive()
    assert query.interrupted == 1 and guard.got == [signal.SIGTERM]
