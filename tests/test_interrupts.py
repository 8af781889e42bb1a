"""Labels true after every interruption: Ctrl-C and SIGTERM end a night the same way, on
Prefect's temporary server too, and `dualpath runs` never shows a night nobody scores as
`running`."""

from __future__ import annotations

import signal
import subprocess

import pytest

from tests.test_cli_nightly import DUALPATH, _wait_for_calls, demo_project, env_for, run


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_on_the_temporary_server_exits_130_quietly(tmp_path, sig):
    cfg = demo_project(tmp_path, tickers=6, backup_scale="0.02")
    env = env_for(None, tmp_path)                # no PREFECT_API_URL: a temporary server
    proc = subprocess.Popen([DUALPATH, "nightly", "-c", str(cfg), "--date", "2027-05-03"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_calls(cfg, proc, timeout=180)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted; rerun the night to resume" in err
    for noise in ("Traceback", "ConnectError", "TerminationSignal"):
        assert noise not in out + err, err[-3000:]
    listed = run("runs", "-c", str(cfg), "-f", "csv", env=env)
    rows = [ln for ln in listed.stdout.splitlines() if ln.startswith("2027-05-03")]
    assert rows and not any(",running," in ln for ln in rows), listed.stdout
