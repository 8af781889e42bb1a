"""`dualpath demo` under Ctrl-C or SIGTERM ends as `dualpath nightly` does: the night in
progress ingested from its closed journals (its runs partial, with why, never `running`),
exit 130 and one line that fits the demo, no traceback."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.test_cli_nightly import DUALPATH, env_for
from dualpath.warehouse.db import reader
from dualpath.warehouse.journal import read_journal


def _wait_for_calls(root: Path, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the demo ended before the signal: {proc.communicate()}")
        if any(b'"k":"call"' in j.read_bytes() for j in root.rglob("journal.jsonl")):
            return
        time.sleep(0.2)
    pytest.fail("no call was journaled")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_demo_ingests_its_night_and_exits_130_in_one_line(tmp_path, sig):
    root = tmp_path / "demo"
    proc = subprocess.Popen([DUALPATH, "demo", "--nights", "3", "--tickers", "5", "--draws", "1",
                             "--clock", "5", "--root", str(root)],
                            cwd=tmp_path, env=env_for(None, tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for_calls(root, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, out + err
    assert f"interrupted; the nights scored so far are in {root.resolve()}" in " ".join(
        err.split()), err
    assert "`dualpath demo` starts over" in err and "rerun the night" not in err
    for noise in ("Traceback", "TerminationSignal", "internal error", "Crash detected"):
        assert noise not in out + err, err[-3000:]

    journals = sorted(root.rglob("journal.jsonl"))
    night = max(j.parent.parent.name for j in journals)    # .../<night>/<path>/journal.jsonl
    with reader(root / "warehouse.duckdb") as con:
        runs = con.execute("SELECT night::VARCHAR, path, status, status_detail FROM runs"
                           ).fetchall()
        assert runs and not any(r[2] == "running" for r in runs), runs
        tonight = {r[1]: r for r in runs if r[0] == night}
        for j in (j for j in journals if j.parent.parent.name == night):
            path = j.parent.name
            finished = read_journal(j).final_units()
            stored = con.execute("SELECT count(DISTINCT (ticker, draw)) FROM units "
                                 "WHERE night = ?::DATE AND path = ?", [night, path]
                                 ).fetchone()[0]
            assert stored == len(finished), (path, stored, len(finished))
            if len(finished) < 4:                  # not scored to its end: partial, and why
                assert tonight[path][2] == "partial", tonight[path]
                assert "interrupt" in (tonight[path][3] or ""), tonight[path]
