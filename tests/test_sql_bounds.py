"""`dualpath sql` has a time limit and never keeps a night's ingest out of the warehouse."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import duckdb

from dualpath.warehouse.db import writer
from dualpath.warehouse.migrations import migrate

DUALPATH = str(Path(sys.executable).with_name("dualpath"))
# minutes of work on two cores, whatever the warehouse holds
LONG = "SELECT sum(a.range * b.range) FROM range(200000) a, range(200000) b"


def warehouse(tmp_path):
    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        migrate(con)
    return path


def test_a_query_past_its_time_limit_stops_with_one_line(tmp_path):
    path = warehouse(tmp_path)
    r = subprocess.run([DUALPATH, "sql", "--db", str(path), "--timeout", "1", LONG],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "query stopped after 1 s (--timeout)" in r.stderr and "Traceback" not in r.stderr


def test_a_long_query_lets_a_writer_in(tmp_path):
    path = warehouse(tmp_path)
    proc = subprocess.Popen([DUALPATH, "sql", "--db", str(path), "--timeout", "120", LONG],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)                         # the query holds its read lock now
        with writer(path, wait_s=60.0) as con:  # what a night's ingest does
            con.execute("CREATE TABLE ingested AS SELECT 1 AS x")
            assert proc.poll() is None          # while the query still runs, on a snapshot
    finally:
        proc.kill()
        proc.wait()
