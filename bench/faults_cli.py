"""Fault trials of the CLI/bounded-work side of issue 26, for `bench/faults.py`.

Each trial is `(lab, night, t)`: it injects its fault into a night of the `Lab` (or into the
console script), scores and ingests the night itself, and sets on `t` what it counts:
`injected`, `detected` (dualpath reacted as it must), `tracebacks` (a person saw one) and
`distorted_speed_counted` (a disturbed run's speed was counted in a median). `CLI_TRIALS`
maps trial names to them; `python -m bench.faults_cli` runs them alone and prints one line
each and the totals.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "dualpath"


def _speed_counted(lab, night, path: str = "backup") -> tuple[str | None, bool]:
    """(the run's disturbance, whether its speed counts in the medians)."""
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.queries import run_summaries

    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        s = run_summaries(con)
    row = s[(s["night"].astype(str).str[:10] == night.isoformat()) & (s["path"] == path)]
    if row.empty:
        return None, False
    why = row["disturbed"].iloc[0]
    return (why if isinstance(why, str) else None), bool(row["speed_measured"].iloc[0])


def _midway(lab, night) -> None:
    total = len(lab.cfg.tickers()) * lab.cfg.draws_for("backup") * 17
    deadline = time.monotonic() + 60
    while lab.calls_done(night, "backup") < total // 3 and time.monotonic() < deadline:
        time.sleep(0.05)


def _judge(lab, night, t, expect: str) -> None:
    lab.ingest(night)
    why, counted = _speed_counted(lab, night)
    t.detected = bool(why and why.startswith(expect))
    t.distorted_speed_counted = getattr(t, "distorted_speed_counted", 0) + int(counted)
    t.detail = why or "not flagged"
    t.rerun_done = True


def speed_stalled(lab, night, t) -> None:
    """SIGSTOP the backup's server for longer than the stall threshold mid-run."""
    from dualpath.warehouse.disturbed import STALL_S

    def stall(lab) -> None:
        _midway(lab, night)
        pid = lab.servers["backup"].proc.pid
        os.kill(pid, signal.SIGSTOP)
        t.injected += 1
        time.sleep(STALL_S + 3)
        os.kill(pid, signal.SIGCONT)
    lab.score(night, during=stall)
    lab.score(night)            # a rerun completes what the stall failed
    _judge(lab, night, t, "stalled")


def speed_shared(lab, night, t) -> None:
    """Another client on the backup's llama-server-shaped server for the whole run."""
    url, stop = lab.servers["backup"].url, threading.Event()

    async def intruder() -> None:
        body = {"model": "x", "max_tokens": 300,
                "messages": [{"role": "user", "content": "someone else's experiment"}]}
        async with httpx.AsyncClient(timeout=60) as http:
            while not stop.is_set():
                try:       # a slow (real CPU) server may not answer within the minute
                    await http.post(f"{url}/v1/chat/completions", json=body)
                except httpx.HTTPError:
                    continue
                t.injected += 1

    th = threading.Thread(target=lambda: asyncio.run(intruder()))
    th.start()
    try:
        lab.score(night)
    finally:
        stop.set()
        th.join(timeout=60)
    _judge(lab, night, t, "shared")


def speed_restarted(lab, night, t) -> None:
    """kill -9 the backup's server mid-run and start another on its port at once."""
    def restart(lab) -> None:
        _midway(lab, night)
        lab.servers["backup"].kill9()
        lab.replace_server("backup", same_port=True)
        t.injected += 1
    lab.score(night, during=restart)
    lab.score(night)            # a rerun completes what the restart failed
    _judge(lab, night, t, "restarted")


def redos(lab, night, t) -> None:
    """The backtracking answer and look-alike keywords through the grade parser; the event
    loop keeps ticking while a 40 MB answer is parsed."""
    from dualpath.grades import _Work, parse_grade, parse_grade_async

    text = "FINAL GRADE: 4" + " " * 2000 + "x"
    w = _Work()
    t.injected = 4
    ok = [parse_grade(text, w).grade is None and w.chars <= 12 * len(text)]
    ok += [parse_grade(s).grade is None for s in ("FINAL GRADE: ſELL", "FİNAL GRADE: 2",
                                                  '{"grade": 1, "grade": 5}')]

    async def ticking() -> int:
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)
        task = asyncio.create_task(tick())
        await asyncio.sleep(0)
        before = ticks
        await parse_grade_async("reasoning: x\n" * 3_000_000 + "FINAL GRADE: 2")
        task.cancel()
        return ticks - before
    ok.append(asyncio.run(ticking()) > 1)
    t.detected = all(ok)
    t.detail = f"chars examined {w.chars} for {len(text)}; checks {ok}"
    t.night = False


USAGE = [["--bogus"], ["nosuch"], ["sql"], ["runs", "--bogus"], ["metrics", "--horizon", "x"],
         ["demo", "--nights", "1"], ["deploy", "--nightly-cron", "nonsense"],
         ["sql", "--db", "/etc/passwd", "SELECT 1"], ["report", "--since", "2027-05-01",
                                                      "--until", "2027-04-01"]]


def usage_errors(lab, night, t) -> None:
    """Mistakes a person makes, through the console script: exit 2, one line, no traceback."""
    with tempfile.TemporaryDirectory() as d:
        fifo = Path(d) / "fifo.toml"
        os.mkfifo(fifo)
        (Path(d) / "afile").write_text("x\n")
        cases = [*USAGE, ["check", "-c", str(fifo)],
                 ["export", "-c", str(lab.cfg_path), "--out", str(Path(d) / "afile")]]
        bad = []
        for args in cases:
            t.injected += 1
            try:
                r = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True,
                                   timeout=60, cwd=d)
            except subprocess.TimeoutExpired:
                bad.append(f"{args}: hung")
                continue
            out = r.stdout + r.stderr
            if "Traceback" in out or "internal error" in out:
                t.tracebacks = getattr(t, "tracebacks", 0) + 1
                bad.append(f"{args}: traceback")
            elif r.returncode != 2 or len([x for x in r.stderr.splitlines() if x.strip()]) != 1:
                bad.append(f"{args}: exit {r.returncode}")
    t.detected = not bad
    t.detail = "; ".join(bad) or f"{len(cases)} usage errors: exit 2, one line each"
    t.night = False


CLI_TRIALS = {"speed_stalled": speed_stalled, "speed_shared": speed_shared,
              "speed_restarted": speed_restarted, "redos": redos, "usage_errors": usage_errors}


class _Trial:
    def __init__(self, fault: str):
        self.fault, self.injected, self.detected = fault, 0, False
        self.tracebacks = self.distorted_speed_counted = 0
        self.detail, self.rerun_done, self.night = "", False, True


def main(argv: list[str] | None = None) -> None:
    from bench.faultlab import Lab

    names = (argv if argv is not None else sys.argv[1:]) or list(CLI_TRIALS)
    trials = []
    with tempfile.TemporaryDirectory() as root, \
            Lab(Path(root), tickers=4, draws=2, nights=len(names) + 2) as lab:
        for name, night in zip(names, lab.nights):
            t = _Trial(name)
            t0 = time.monotonic()
            CLI_TRIALS[name](lab, night, t)
            trials.append(t)
            print(f"{name:<18} injected={t.injected:<5} detected={'yes' if t.detected else 'NO'}"
                  f" tracebacks={t.tracebacks} distorted_speed_counted="
                  f"{t.distorted_speed_counted} {time.monotonic() - t0:5.1f}s  {t.detail}")
    print(f"cli_faults={len(trials)} detected={sum(t.detected for t in trials)} "
          f"tracebacks={sum(t.tracebacks for t in trials)} "
          f"distorted_speed_counted={sum(t.distorted_speed_counted for t in trials)}")


if __name__ == "__main__":
    main()
