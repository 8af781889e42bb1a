"""Fault trials of labels and exits, for `bench/faults.py`: a wall clock stepped mid-night, a
night cut mid-flight, Ctrl-C on a long `dualpath sql`, a warehouse where no file can be made.

Each trial is `(lab, night, t)` as in `bench/faults_cli.py`: it sets `injected`, `detected`
(dualpath labelled or refused as it must), `mislabelled` (a run's label says what did not
happen: `starved` for a clock step) and `tracebacks` (a person
saw one, or an "internal error"). `python -m bench.faults_labels` runs them alone.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "dualpath"
LONG_SQL = "SELECT count(*) FROM range(300000) a, range(300000) b WHERE a.range + b.range = 5"


def _disturbed(lab, night) -> dict[str, str | None]:
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.disturbed import DISTURBED

    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        rows = con.execute(f"SELECT r.path, d.disturbed FROM runs r LEFT JOIN ({DISTURBED}) d "
                           "USING (run_id) WHERE r.night = ?", [night]).fetchall()
    return dict(rows)


def clock_step_label(lab, night, t) -> None:
    """The wall clock jumps +2 h then -3 h while the night is scored (in this process, as NTP
    or an operator would): durations and labels must not see it."""
    real, reads = time.time, [0]

    def stepped() -> float:
        reads[0] += 1
        return real() + (0 if reads[0] < 50 else 7200 if reads[0] < 200 else -3600)

    time.time = stepped
    try:
        lab.score(night)
    finally:
        time.time = real
    lab.ingest(night)
    t.injected = int(reads[0] >= 200)
    labels = _disturbed(lab, night)
    # the step's signature: two hours inside the judged window leave its slots busy ~0% of
    # it (the wall-clock judge read 0%); `starved` at a real share is this machine's load,
    # which the demo and the starved tests measure, and is shown but not counted
    wrong = {p: d for p, d in labels.items() if d and ("stalled" in d or (
        m := re.search(r"starved: slots busy (\d+)%", d)) and int(m.group(1)) < 2)}
    t.mislabelled += len(wrong)
    t.detected = bool(labels) and not wrong
    t.detail = "; ".join(f"{p}: {d}" for p, d in wrong.items()) or \
        f"clock stepped at {reads[0]} reads; no run labelled by it" + "".join(
            f"; {p}: {d[:40]} (load)" for p, d in labels.items() if d)
    t.rerun_done = True


def sql_sigint(lab, night, t) -> None:
    """Ctrl-C on a minutes-long `dualpath sql`, once it runs on its snapshot: exit 130 and one
    line, never "internal error" (DuckDB's own `Query interrupted`)."""
    from dualpath.warehouse.snapshots import PREFIX

    wh = lab.cfg.resolve(lab.cfg.warehouse.path)
    proc = subprocess.Popen([str(SCRIPT), "sql", "--db", str(wh), "-f", "csv", LONG_SQL],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not any(d.is_dir() and any(d.iterdir()) for d in wh.parent.glob(PREFIX + "*")):
        if proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    time.sleep(1.0)
    t.injected = int(proc.poll() is None)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    t.tracebacks += int("Traceback" in err or "internal error" in err)
    t.detected = proc.returncode == 130 and err == "interrupted\n"
    t.detail = f"exit {proc.returncode}: {err.strip()[:200]}"
    t.night = False


def unwritable_warehouse(lab, night, t) -> None:
    """`[warehouse] path` in a folder that takes no file (/proc): `check` refuses it in one
    line; it once passed, and `nightly` ended in an internal error."""
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "proc.toml"
        text = re.sub(r'(?m)^path = ".*"$', 'path = "/proc/wh.duckdb"',
                      lab.cfg_path.read_text(), count=1)
        cfg.write_text(re.sub(r'(?m)^runs_dir = ".*"$', 'runs_dir = "/proc/dualpath-runs"', text))
        r = subprocess.run([str(SCRIPT), "check", "-c", str(cfg)], capture_output=True,
                           text=True, timeout=120, cwd=d)
    out = r.stdout + r.stderr
    t.injected = 1
    t.tracebacks += int("Traceback" in out or "internal error" in out)
    t.detected = r.returncode == 2 and "/proc takes no new file" in out
    t.detail = f"check exit {r.returncode}"
    t.night = False


LABEL_TRIALS = {"clock_step_label": clock_step_label, "sql_sigint": sql_sigint,
                "unwritable_warehouse": unwritable_warehouse}
