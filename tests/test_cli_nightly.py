"""`dualpath nightly` through the real entry point (the installed console script), against a
real Prefect server: exit codes, the reason printed, interrupts, and no orphaned processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dualpath.market import SyntheticMarket
from dualpath.procs import descendants
from tests.cli_run import run_cli

DUALPATH = str(Path(sys.executable).with_name("dualpath"))


def env_for(api: str | None, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home / "prefect"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="90")
    if api:
        env["PREFECT_API_URL"] = api
    return env


def demo_project(tmp_path: Path, tickers: int = 4, backup_scale: str | None = None) -> Path:
    """`dualpath init --demo`, cut down to a few tickers (and optionally a slower backup)."""
    cfg = tmp_path / "dualpath.toml"
    r = run_cli("init", "--demo", cfg)         # in process: only the nights need their own
    assert r.returncode == 0, r.stderr
    text = cfg.read_text()
    names = ", ".join(f'"SYN{i:03d}"' for i in range(tickers))
    text = re.sub(r"universe = \[.*?\]", f"universe = [{names}]", text, flags=re.S)
    if backup_scale:
        text = text.replace("time_scale = 0.0006", f"time_scale = {backup_scale}")
    cfg.write_text(text)
    return cfg


def run(*args, env, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([DUALPATH, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def test_a_night_the_market_does_not_cover_exits_1_and_a_rerun_after_import_completes(
        tmp_path, prefect_api):
    cfg = demo_project(tmp_path)
    env = env_for(prefect_api, tmp_path)
    early = SyntheticMarket(7, start=SyntheticMarket(7).dates[0].replace(year=2026), n_days=60)
    night = early.dates[-1].isoformat()                   # before the demo market begins
    r = run("nightly", "-c", str(cfg), "--date", night, env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "not complete" in r.stderr and "input_failed" in r.stderr
    assert f"no price for SYN000 on or before {night}" in r.stderr
    listed = run_cli("runs", "-c", cfg, "-f", "csv")
    rows = [ln for ln in listed.stdout.splitlines() if ln.startswith(night)]
    assert len(rows) == 2 and all(",failed," in ln for ln in rows), listed.stdout
    prices = tmp_path / "early.csv"
    frame = early.prices()
    frame[frame.ticker.isin([f"SYN{i:03d}" for i in range(4)])].to_csv(prices, index=False)
    imported = run_cli("prices", "import", prices, "-c", cfg)
    assert imported.returncode == 0, imported.stderr
    again = run("nightly", "-c", str(cfg), "--date", night, env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    listed = run_cli("runs", "-c", cfg, "-f", "csv")
    rows = [ln for ln in listed.stdout.splitlines() if ln.startswith(night)]
    assert len(rows) == 2 and all(",complete," in ln for ln in rows), listed.stdout


def _wait_for_calls(cfg: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    runs = cfg.parent / ".dualpath" / "runs"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"nightly ended early: {proc.communicate()}")
        if any(b'"k":"call"' in j.read_bytes() for j in runs.rglob("journal.jsonl")):
            return
        time.sleep(0.2)
    pytest.fail("no call was journaled")


def test_ctrl_c_exits_130_and_says_how_to_resume(tmp_path, prefect_api):
    cfg = demo_project(tmp_path, tickers=6, backup_scale="0.02")
    proc = subprocess.Popen([DUALPATH, "nightly", "-c", str(cfg), "--date", "2027-05-03"],
                            env=env_for(prefect_api, tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    _wait_for_calls(cfg, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted; rerun the night to resume" in err
    assert "Traceback" not in err


def test_killing_the_harness_leaves_no_server_behind(tmp_path):
    """kill -9: no cleanup runs in dualpath, yet its simulated servers and Prefect's
    temporary server (started by the library, not by dualpath) go with it."""
    cfg = demo_project(tmp_path, tickers=6, backup_scale="0.02")
    proc = subprocess.Popen([DUALPATH, "nightly", "-c", str(cfg), "--date", "2027-05-03"],
                            env=env_for(None, tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _wait_for_calls(cfg, proc, timeout=180)
    time.sleep(2)                     # the reaper notes descendants once a second
    children = descendants(proc.pid)
    commands = " ".join(Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
                        for p in children if Path(f"/proc/{p}/cmdline").exists())
    assert "dualpath.sim" in commands and "uvicorn" in commands   # sims and Prefect's server
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in children):
        time.sleep(0.2)
    alive = [p for p in children if Path(f"/proc/{p}").exists()
             and Path(f"/proc/{p}/stat").read_text().split()[2] != "Z"]
    assert alive == []


def test_demo_refuses_a_folder_it_did_not_make(tmp_path):
    precious = tmp_path / "work"
    precious.mkdir()
    (precious / "thesis.txt").write_text("keep me")
    r = subprocess.run([DUALPATH, "demo", "--root", str(precious)], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2
    assert "is not empty and was not made by `dualpath demo`" in r.stderr
    assert (precious / "thesis.txt").read_text() == "keep me"
