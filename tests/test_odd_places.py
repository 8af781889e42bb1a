"""Files and folders in odd states: `dualpath sql`'s snapshot copies never outlive their
query (ended, stopped by SIGTERM, or killed: removed at the next start), and a warehouse and
runs folder on a read-only file system give one line each (a real read-only bind mount)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.helpers import make_project
from dualpath.warehouse.db import bounded_query
from dualpath.warehouse.snapshots import PREFIX, snapshot_folder


def _warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "wh.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT range AS x FROM range(1000)")
    return path


def _snapshots(folder: Path) -> list[Path]:
    return sorted(folder.glob(PREFIX + "*"))


def test_a_query_moved_to_a_snapshot_leaves_no_copy(tmp_path):
    path = _warehouse(tmp_path)
    seen = []

    def run(con):
        seen.append(len(_snapshots(tmp_path)))
        return con.execute("SELECT sum(range) FROM range(3000000000)").fetchone()[0]

    assert bounded_query(path, run, timeout_s=120, lock_s=0.05) == 3000000000 * 2999999999 // 2
    assert seen == [0, 1] and _snapshots(tmp_path) == []


def test_copies_left_by_a_killed_query_are_removed_at_the_next_start(tmp_path):
    path = _warehouse(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    for i in range(3):                       # killed three times: three full copies
        (tmp_path / f"{PREFIX}{dead}-1234-{i}").mkdir()
        (tmp_path / f"{PREFIX}{dead}-1234-{i}" / "wh.duckdb").write_bytes(path.read_bytes())
    with snapshot_folder(path) as mine:      # a live process's copy is its own
        bounded_query(path, lambda con: con.execute("SELECT 1").fetchall(), 10)
        assert _snapshots(tmp_path) == [mine]
    assert _snapshots(tmp_path) == []


def test_sigterm_while_a_copy_exists_removes_it(tmp_path):
    path = _warehouse(tmp_path)
    with pytest.raises(SystemExit) as e:
        with snapshot_folder(path) as folder:
            assert folder.is_dir()
            os.kill(os.getpid(), signal.SIGTERM)
    assert e.value.code == 128 + signal.SIGTERM and _snapshots(tmp_path) == []


@pytest.fixture
def read_only(tmp_path):
    """A scored-nothing project, then its folder read-only (a bind mount remounted ro)."""
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    make_project(src, tickers=2, draws=1, nights=1)
    ok = subprocess.run(["mount", "--bind", str(src), str(ro)], capture_output=True)
    if ok.returncode:
        pytest.skip(f"no bind mount here: {ok.stderr.decode().strip()}")
    subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
    yield ro
    subprocess.run(["umount", str(ro)], check=True)


def _dualpath(*args, cwd):
    return subprocess.run([sys.executable, "-m", "dualpath", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize("args", [["nightly", "--date", "2027-04-29"], ["rebuild"]])
def test_a_read_only_warehouse_and_runs_folder_is_one_line(read_only, args):
    r = _dualpath(*args, "-c", str(read_only / "dualpath.toml"), cwd=read_only)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out and "internal error" not in out, out
    line, = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert "is on a read-only file system (Read-only file system); dualpath writes the " \
           "warehouse, the runs folder and the locks beside them" in line


def test_a_long_query_on_a_read_only_warehouse_runs_on_its_lock(read_only):
    r = _dualpath("sql", "SELECT sum(range) FROM range(90000000000)", "--timeout", "6",
                  "-c", str(read_only / "dualpath.toml"), cwd=read_only)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == ("error: query stopped after 6 s (--timeout); narrow it (a "
                                "WHERE on night, a LIMIT) or allow more")


def test_a_damaged_warehouse_is_one_line_with_no_prefect_traceback_above(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    wh = cfg.resolve(cfg.warehouse.path)
    wh.write_bytes(wh.read_bytes()[:5000])          # truncated
    r = _dualpath("nightly", "-c", str(cfg_path), "--date", nights[0].isoformat(), cwd=tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    assert "Finished in state Failed" not in out and "Encountered exception" not in out, out
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("error:")][0].count("rebuild")
