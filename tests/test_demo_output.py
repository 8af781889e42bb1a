"""What the demo prints: its answer (the headline) once, last; the primary verdict once; the
console script as it can be typed here (`.venv/bin/dualpath` when `dualpath` is not on PATH). 5 tickers: the fewest a quality
answer needs, which the plan the demo freezes must have."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dualpath.cli.night import console_script
from tests.test_cli_nightly import DUALPATH, env_for


def test_the_console_script_is_named_as_it_can_be_typed(monkeypatch, tmp_path):
    bindir = Path(sys.executable).parent
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(tmp_path)
    assert console_script() == str(bindir / "dualpath")
    monkeypatch.chdir(bindir.parent.parent)
    assert console_script() == str(Path(bindir.parent.name) / bindir.name / "dualpath")
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}/usr/bin")
    assert console_script() == "dualpath"


def test_the_demo_prints_its_answer_once_and_last(tmp_path):
    env = env_for(None, tmp_path)
    env["PATH"] = "/usr/bin:/bin"
    env["COLUMNS"] = "100"
    r = subprocess.run([DUALPATH, "demo", "--nights", "2", "--tickers", "5", "--draws", "1",
                        "--clock", "3", "--root", str(tmp_path / "demo")], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = r.stdout.rstrip().splitlines()
    quality = [i for i, ln in enumerate(lines) if ln.startswith("Quality — ")]
    speed = [i for i, ln in enumerate(lines) if ln.startswith("Speed — ")]
    assert len(quality) == 1 and len(speed) == 1, r.stdout
    assert quality[0] > max(i for i, ln in enumerate(lines) if ln.startswith("  ")
                            and "runs --config" in ln)
    energy = [i for i, ln in enumerate(lines) if ln.startswith("Energy — ")]
    assert len(energy) == 1 and energy[0] > speed[0], r.stdout
    # the headline's last answer (energy) ends the output: nothing but its own lines after it
    assert all(ln.startswith("  ") for ln in lines[energy[0] + 1:]), lines[energy[0]:]
    assert r.stdout.count("primary: ") == 1
    assert f"  {DUALPATH} runs --config " in r.stdout
    assert "UserWarning" not in r.stderr
