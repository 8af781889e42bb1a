"""`make demo`'s own command on a quiet machine, then under 4 and 8 busy processes it starts:
how long it took, whether the headline answered the speed question, and how far its slowdown
is from the simulated paths' time model.

    python bench/demo_load.py [--conditions quiet,load4,load8] [--keep DIR]

Each condition runs `.venv/bin/dualpath demo` (the Makefile's `demo` target) in one work
folder (its Prefect database is made once, as a user's is). Before each, the line says what
the machine was already doing: the 1-minute load average and the share of a core a spinner
got, with none of this bench's busy processes yet. The time model's slowdown is the geometric
mean over the paired nights of (backup ÷ main) served seconds per ticker
(`warehouse.time_model`: each call's modelled prefill + decode, summed ÷ slots).
Each condition's line also gives the demo's nights-loop seconds (its progress bar's last
figure; the rest is imports, Prefect's server start, the plan, the report) and the CPU seconds
its processes used, which a busy machine stretches into wall time.
The busy processes run in the demo's own session, as work started from the same terminal
would: where the kernel groups processes by session for scheduling (autogroup), they share
the harness's group, the harder case (work from another terminal gets a group of its own).
Last line: `quiet_s=… load4_s=… load8_s=… load8_speed_answer=yes|no load8_ratio_error=…`
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this folder comes first on sys.path and would shadow the `evals` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

BUSY = {"quiet": 0, "load4": 4, "load8": 8}


def _command() -> list[str]:
    script = Path(sys.executable).with_name("dualpath")
    return [str(script), "demo"] if script.exists() else [sys.executable, "-m", "dualpath",
                                                           "demo"]


def _children_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _spin_share(seconds: float = 1.0) -> float:
    from dualpath.demo import cpu_share
    return cpu_share(seconds)


def model_error(root: Path) -> tuple[float | None, float | None]:
    """(the headline's slowdown, its error against the time model's), None where unknown."""
    import numpy as np

    from dualpath.config import load_config
    from dualpath.flows.glance import headline_for
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.time_model import served_seconds

    cfg = load_config(root / "dualpath.toml")
    s = headline_for(cfg).slowdown
    if s is None or s.ratio is None:
        return None, None
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        served = served_seconds(con)
    per = served.assign(s=served["served_s"] / served["tickers"]).pivot_table(
        index="night", columns="path", values="s").dropna()
    model = float(np.exp(np.log(per[s.candidate] / per[s.baseline]).mean()))
    return s.ratio, s.ratio / model - 1


def run(condition: str, work: Path) -> dict:
    busy = []
    load_before = os.getloadavg()[0]
    share_before = _spin_share()
    try:
        for _ in range(BUSY[condition]):
            busy.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        root = work / f"demo-{condition}"
        t0, cpu0 = time.monotonic(), _children_cpu()
        r = subprocess.run(_command() + ["--root", str(root)], cwd=work, capture_output=True,
                           text=True)
        took = time.monotonic() - t0
        # the demo's processes (harness, Prefect's server, both simulated servers) are waited
        # for by the time it exits, so their CPU is in the children's rusage; the busy
        # processes are not yet
        cpu = _children_cpu() - cpu0
        load_during = os.getloadavg()[0]
    finally:
        for p in busy:
            p.kill()
            p.wait()
    out = r.stdout + r.stderr
    clock = re.search(r"clock: --clock (\S+)", out)
    speed = re.search(r"Speed — how much slower is backup\?\s+(.*)", out)
    starved = re.search(r"(\d+) of (\d+) runs were starved", out)
    ratio, err = model_error(root) if r.returncode == 0 else (None, None)
    loop = re.findall(r"nights · (\d+) s", out)
    row = {"condition": condition, "s": took, "rc": r.returncode, "cpu": cpu,
           "nights_s": int(loop[-1]) if loop else None,
           "clock": clock.group(1) if clock else "?", "load_before": load_before,
           "share_before": share_before, "load_end": load_during,
           "speed": speed.group(1).strip() if speed else "(no speed line)",
           "starved": f"{starved.group(1)}/{starved.group(2)}" if starved else "0",
           "answer": ratio is not None, "ratio": ratio, "error": err}
    print(f"{condition}: {took:.0f} s (its nights {row['nights_s'] or '?'} s; the demo's "
          f"processes used {cpu:.0f} s of CPU), rc {r.returncode}, clock {row['clock']}, "
          f"background before: load {load_before:.1f}, a spinner got {share_before:.0%} of a core; "
          f"load at its end {load_during:.1f}; starved {row['starved']}; speed: {row['speed']}"
          + (f"; model error {err:+.1%}" if err is not None else ""), flush=True)
    if r.returncode != 0:
        print(out[-3000:], flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conditions", default="quiet,load4,load8")
    ap.add_argument("--keep", type=Path, help="work folder to keep (default: a temporary one)")
    a = ap.parse_args()
    try:
        auto = Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
        group = "on" if auto else "off"
    except OSError:
        group = "not known"
    print(f"scheduler autogroup: {group}; the busy processes share the demo's session",
          flush=True)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = a.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for c in a.conditions.split(","):
            rows[c] = run(c, work)

    def secs(c: str) -> str:
        return f"{rows[c]['s']:.0f}" if c in rows else "-"

    l8 = rows.get("load8", {})
    err = l8.get("error")
    print(f"quiet_s={secs('quiet')} load4_s={secs('load4')} load8_s={secs('load8')} "
          f"load8_speed_answer={'yes' if l8.get('answer') else 'no'} "
          f"load8_ratio_error={'-' if err is None or math.isnan(err) else f'{err:+.3f}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
