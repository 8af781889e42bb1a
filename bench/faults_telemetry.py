"""Fault trials of GPU telemetry (`bench/faults.py` runs them): the backup's GPU reader starts
failing mid-night and never comes back (`telemetry_fails_midnight`), or fails for one second
and comes back (`telemetry_blip`).

Each night is a real `dualpath nightly` (its Prefect flow, its own simulated servers) in a
child process whose simulated backup GPU is made to fail from 1 s after its reader opened:
`python -m bench.faults_telemetry MODE -- nightly -c CFG --date NIGHT` patches the simulated
GPU's `power()` (the reader a night calls at 10-20 Hz), then runs the console script's
`main`. The trial counts tracebacks in everything the child printed and checks what a person
must see: one warning line, both runs complete and undisturbed, the backup's telemetry stored
with every sample taken and its energy either whole with the gap stated (blip) or "sampling
stopped at HH:MM:SS (why)" with no joules (fails).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from bench.faultlab import ROOT, Lab
from bench.faults_night import _env, slow_config, tracebacks

FAIL_AFTER_S = 1.0      # the reader's first second is good: samples to keep
BLIP_S = 1.0
FAILED_GPU = "simulated Radeon AI PRO R9700"      # the demo's backup GPU


def _patch(mode: str) -> None:
    """In the child: the backup's simulated GPU fails its reads from FAIL_AFTER_S after it
    opened, for good (`fails`) or for BLIP_S (`blip`)."""
    from dualpath.telemetry.sim import SimSource

    real = SimSource.power

    def power(self):
        if self.p.name == FAILED_GPU:
            opened = self.__dict__.setdefault("_opened", time.monotonic())
            t = time.monotonic() - opened
            if t >= FAIL_AFTER_S and (mode == "fails" or t < FAIL_AFTER_S + BLIP_S):
                raise OSError(19, "No such device")      # amdgpu's answer for a GPU gone
        return real(self)
    SimSource.power = power


def _night(lab: Lab, night, mode: str) -> tuple[int, str]:
    """Run `dualpath nightly` of `night` with the reader failing as `mode` says."""
    cmd = [sys.executable, "-m", "bench.faults_telemetry", mode, "--", "nightly", "-c",
           str(slow_config(lab)), "--date", night.isoformat()]
    p = subprocess.run(cmd, cwd=ROOT, env=_env(lab), capture_output=True, text=True,
                       timeout=600)
    return p.returncode, p.stdout + p.stderr


def _stored(lab: Lab, night) -> tuple[dict, dict]:
    """(per path: status and disturbance; the backup's energy_runs row)."""
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.queries import run_summaries

    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        runs = run_summaries(con)
        runs = runs[runs["night"].astype(str).str[:10] == night.isoformat()]
        status = {r.path: (r.status, r.disturbed if isinstance(r.disturbed, str) else None)
                  for r in runs.itertuples()}
        row = con.execute("SELECT * FROM energy_runs WHERE run_id LIKE ?",
                          [f"%/{night.isoformat()}/backup"]).fetchall()
        cols = [d[0] for d in con.description]
    return status, (dict(zip(cols, row[0])) if row else {})


def _judge(lab: Lab, night, t, mode: str) -> None:
    code, out = _night(lab, night, mode)
    t.tracebacks += tracebacks(out)
    t.rerun_done = True
    status, e = _stored(lab, night)
    warnings = [ln for ln in out.splitlines() if "GPU telemetry" in ln]
    t.injected = int(e.get("seconds") is not None and e["seconds"] > FAIL_AFTER_S + BLIP_S)
    whole = {p: s for p, s in status.items()} == {"main": ("complete", None),
                                                 "backup": ("complete", None)}
    kept = bool(e.get("samples")) and e["samples"] > 0
    if mode == "fails":
        energy = (isinstance(e.get("unknown"), str)
                  and re.fullmatch(r"sampling stopped at \d\d:\d\d:\d\d \(OSError: .*\)",
                                   e["unknown"]) is not None
                  and e.get("joules") is None and (e.get("partial_j") or 0) > 0)
    else:
        energy = (e.get("unknown") is None and (e.get("joules") or 0) > 0
                  and isinstance(e.get("faults"), str) and (e.get("gap_s") or 0) > 0)
    t.detected = code == 0 and whole and kept and energy and len(warnings) == 1
    t.mislabelled += int(not whole)
    t.detail = (f"exit {code}; runs {status}; warnings {len(warnings)}; samples "
                f"{e.get('samples')}; energy {e.get('joules')} J, "
                f"{e.get('unknown') or e.get('faults')}")


def telemetry_fails_midnight(lab: Lab, night, t) -> None:
    """The backup's GPU reader fails from 1 s into the night and never comes back."""
    _judge(lab, night, t, "fails")


def telemetry_blip(lab: Lab, night, t) -> None:
    """The backup's GPU reader fails for 1 s mid-night, then reads again."""
    _judge(lab, night, t, "blip")


TELEMETRY_TRIALS = {"telemetry_fails_midnight": telemetry_fails_midnight,
                    "telemetry_blip": telemetry_blip}


def _child(argv: list[str]) -> None:
    mode, rest = argv[0], argv[argv.index("--") + 1:]
    _patch(mode)
    sys.argv = ["dualpath", *rest]
    from dualpath.cli import main
    main()


if __name__ == "__main__":
    if Path.cwd() != ROOT:
        sys.path.insert(0, str(ROOT))
    _child(sys.argv[1:])
