"""Files known by what they are: one warehouse through a symlink is one warehouse (one night
lock), the endpoint locks' folder does not follow TMPDIR, a symlink loop is one line, and a
start refused for a busy server leaves nothing in the study."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest

from bench.faultlab import score_night
from dualpath.config import load_config
from dualpath.errors import ConfigError, EndpointBusy, NightBusy
from dualpath.locks import endpoint_holder, endpoint_lock, lock_dir
from dualpath.places import real_path, same_place
from dualpath.flows import runner
from tests.cli_run import run_cli
from tests.helpers import make_project
from tests.test_night_lock import holder_process


def _linked_config(tmp_path: Path, cfg_path: Path) -> Path:
    """A second config naming the same warehouse (and runs folder) through symlinks."""
    link = tmp_path / "link"
    link.mkdir()
    (link / "wh-link.duckdb").symlink_to(tmp_path / "warehouse.duckdb")
    (link / "runs").symlink_to(tmp_path / "runs", target_is_directory=True)
    text = cfg_path.read_text().replace('path = "warehouse.duckdb"',
                                        f'path = "{link / "wh-link.duckdb"}"')
    text = text.replace('runs_dir = "runs"', f'runs_dir = "{link / "runs"}"')
    other = tmp_path / "second.toml"
    other.write_text(text)
    return other


def test_a_warehouse_named_through_a_symlink_has_the_one_night_lock(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    (tmp_path / "runs").mkdir(exist_ok=True)
    second = load_config(_linked_config(tmp_path, cfg_path))
    assert runner.night_lock_path(second, nights[0]) == runner.night_lock_path(cfg, nights[0])
    assert second.resolve(second.warehouse.runs_dir) == cfg.resolve(cfg.warehouse.runs_dir)
    p = holder_process(cfg_path, nights[0])
    try:
        with pytest.raises(NightBusy, match=f"pid {p.pid}"):
            score_night(second, nights[0], {"main": "http://127.0.0.1:9",
                                            "backup": "http://127.0.0.1:9"})
    finally:
        p.kill()
        p.wait()


def test_same_place_is_device_and_inode(tmp_path):
    a = tmp_path / "a.duckdb"
    a.write_text("x")
    os.link(a, tmp_path / "hard.duckdb")
    (tmp_path / "soft.duckdb").symlink_to(a)
    assert same_place(a, tmp_path / "hard.duckdb") and same_place(a, tmp_path / "soft.duckdb")
    assert not same_place(a, tmp_path / "new.duckdb")
    assert same_place(tmp_path / "sub" / ".." / "new.duckdb", tmp_path / "new.duckdb")


def test_the_endpoint_locks_do_not_follow_tmpdir(tmp_path, monkeypatch):
    url = "http://127.0.0.1:18977"
    before = lock_dir()
    with endpoint_lock(url, "experiment A"):
        monkeypatch.setenv("TMPDIR", str(tmp_path))
        monkeypatch.setattr(tempfile, "tempdir", None)
        assert tempfile.gettempdir() == str(tmp_path) and lock_dir() == before
        assert "experiment A" in endpoint_holder(url)
        with pytest.raises(EndpointBusy, match="experiment A"):
            with endpoint_lock(url, "experiment B"):
                pass
    assert endpoint_holder(url) is None
    assert lock_dir().parts[-4:] == (".local", "state", "dualpath", "endpoint-locks")


def test_a_symlink_loop_is_a_config_error_in_one_line(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(ConfigError, match="is a symlink loop"):
        real_path(tmp_path / "a" / "wh.duckdb")
    (tmp_path / "p").mkdir()
    cfg_path, cfg, nights = make_project(tmp_path / "p", tickers=2, draws=1, nights=1)
    cfg_path.write_text(cfg_path.read_text().replace(
        'path = "warehouse.duckdb"', f'path = "{tmp_path / "a" / "wh.duckdb"}"'))
    for cmd in (["check"], ["runs"]):
        r = run_cli(*cmd, "-c", cfg_path)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and "Traceback" not in r.stderr and len(lines) == 1, r.stderr
        assert "is a symlink loop" in lines[0] and "internal error" not in lines[0]


def test_a_start_refused_for_a_busy_server_leaves_no_trace(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    text = cfg_path.read_text().replace("[paths.main]\n",
                                        '[paths.main]\nbase_url = "http://127.0.0.1:18976"\n')
    cfg_path.write_text(text)
    with endpoint_lock("http://127.0.0.1:18976", "exp/2027-04-28/main"):
        r = subprocess.run([sys.executable, "-m", "dualpath", "nightly", "-c", str(cfg_path),
                            "--date", nights[0].isoformat()],
                           capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "Traceback" not in out, out
    assert out.count("is in use by") == 1 and "nothing was recorded" in out, out
    assert not cfg.resolve(cfg.warehouse.runs_dir).exists()
    with duckdb.connect(str(cfg.resolve(cfg.warehouse.path)), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM deviations").fetchone() == (0,)
