"""A night that could record nothing (its journals' disk already full) is not complete: each
path reads failed with why, the flow ends Failed and the CLI exits 1 with its table, not an
internal error (`KeyError`, from a table of no runs), and not `Completed`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dualpath.flows.nightly import unrecorded_runs
from dualpath.flows.report import summary_markdown
from dualpath.flows.runner import PathOutcome
from tests.helpers import make_project


class _Work:
    def __init__(self, path, run_id, planned, units=True):
        self.path, self.run_id, self.units_planned, self.units = path, run_id, planned, units


def test_a_path_that_recorded_nothing_gets_a_failed_row_with_its_reason():
    works = [_Work("main", "e/n/main", 4), _Work("backup", "e/n/backup", 4),
             _Work("idle", "e/n/idle", 0, units=[])]   # nothing to score there: no row
    outcomes = [PathOutcome("main", "e/n/main", "failed", "HarnessError: the disk is full"),
                PathOutcome("backup", "e/n/backup", "complete", None),
                PathOutcome("idle", "e/n/idle", "nothing_to_do", None)]
    stored = [{"path": "backup", "run_id": "e/n/backup", "status": "complete"}]
    rows = unrecorded_runs(works, outcomes, stored)
    assert [(r["path"], r["status"], r["status_detail"], r["failed"]) for r in rows] == [
        ("main", "failed", "HarnessError: the disk is full", 4)]
    text = summary_markdown("2027-04-29", rows)
    assert "| main | **failed** | 0/4 | 0 | 0 | 4 | 0 | 0 | 0 | — | — |" in text
    assert "- **main** is failed: HarnessError: the disk is full" in text


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_night_on_an_already_full_disk_fails_cleanly(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    runs = cfg.resolve(cfg.warehouse.runs_dir)
    runs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(runs)], check=True)
    try:
        with open(runs / "filler", "wb") as f, pytest.raises(OSError):
            f.write(b"x" * 200_000)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
        r = subprocess.run([str(Path(sys.executable).with_name("dualpath")), "nightly", "-c",
                            str(cfg_path), "--date", str(nights[0])], capture_output=True,
                           text=True, env=env, cwd=tmp_path, timeout=600)
    finally:
        subprocess.run(["umount", "-l", str(runs)], check=False)
    # exit 1 is the flow run's own state: `run_nightly` returns `state.is_completed()`
    assert r.returncode == 1, r.stderr[-3000:]
    assert "internal error" not in r.stderr and "Traceback" not in r.stdout + r.stderr
    for path in ("main", "backup"):
        assert f"{path}: failed — HarnessError: the disk holding " in r.stderr
    assert r.stderr.rstrip().endswith("fix the cause and rerun the night to resume it")
