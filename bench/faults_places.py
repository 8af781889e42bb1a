"""Fault trials of places and inputs (`bench/faults.py` runs them): the same warehouse named
through a symlink by a second config, and a second experiment on the same servers started
with another `TMPDIR` (both refused, whatever the spelling of the place); two price files
that disagree (refused, nothing imported); a long `dualpath sql` on its snapshot copy
stopped by SIGTERM and killed by SIGKILL (no copy left, no internal error); the project
seen through a read-only mount (one line, no traceback).

Each fills a `Trial` as `bench/faults_night.py`'s do: `injected` says the fault met a night,
`detected` that dualpath refused it with its own error.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from bench.faultlab import Lab, score_night
from dualpath.errors import UserError
from dualpath.locks import endpoint_lock
from dualpath.flows import runner


def symlink_warehouse(lab: Lab, night, t) -> None:
    """A second config in another folder names the lab's warehouse through a symlink and
    keeps its runs elsewhere: the experiment is bound to the first runs folder, refused."""
    from dualpath.config import load_config

    folder = lab.cfg_path.parent / "linked"
    folder.mkdir(exist_ok=True)
    link = folder / "alias.duckdb"
    if not link.is_symlink():
        link.symlink_to(lab.cfg.resolve(lab.cfg.warehouse.path))
    text = lab.cfg_path.read_text()
    text = re.sub(r'(\[warehouse\]\s*\npath = )"[^"]*"', rf'\1"{link}"', text)
    other = folder / "linked.toml"
    other.write_text(text)
    cfg2 = load_config(other)
    with runner.hold_night(lab.cfg, night):      # the lab's config binds the experiment first
        runner.claim_night(lab.cfg, night, lab.cfg_path)
    t.injected = int(link.is_symlink() and f'"{link}"' in text)   # named only through the link
    try:
        score_night(cfg2, night, lab.urls, config_path=other)
    except UserError as e:
        t.detected = "keeps its runs in" in str(e)
        t.detail = "refused: " + str(e)[:80]


@contextmanager
def _tmpdir(folder: Path):
    old = os.environ.get("TMPDIR")
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None                      # gettempdir() reads TMPDIR again
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old
        tempfile.tempdir = None


def other_tmpdir(lab: Lab, night, t) -> None:
    """Another experiment holds the backup server with one `TMPDIR`; this night, started
    with another, must still find it held: its backup path fails with `EndpointBusy`."""
    root = lab.cfg_path.parent
    with _tmpdir(root / "tmp-a"), endpoint_lock(lab.urls["backup"], "another experiment"):
        with _tmpdir(root / "tmp-b"):
            t.injected = int(tempfile.gettempdir() == str(root / "tmp-b"))
            outcomes = score_night(lab.cfg, night, lab.urls, config_path=lab.cfg_path)
    backup = next(o for o in outcomes if o.path == "backup")
    t.detected = backup.status == "failed" and "EndpointBusy" in (backup.reason or "")


def _price_rows(lab: Lab) -> int:
    from dualpath.warehouse.db import reader
    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        return con.execute("SELECT count(*) FROM prices").fetchone()[0]


def conflicting_prices(lab: Lab, night, t) -> None:
    """Two files of a drop folder give different prices for one ticker and night: `prices
    update` refuses in one line naming both files and the row, and imports nothing."""
    from bench.faults_night import _cli, _env, tracebacks

    drop = lab.cfg_path.parent / "drop"
    drop.mkdir(exist_ok=True)
    ticker = lab.cfg.tickers()[0]
    for name, close in (("a.csv", 101.0), ("b.csv", 102.0)):
        (drop / name).write_text(f"ticker,date,close,adj_close\n{ticker},{night},{close},{close}\n")
    other = lab.cfg_path.with_name("drop.toml")
    other.write_text(lab.cfg_path.read_text().replace("[market]\n",
                                                      f'[market]\nprices_dir = "{drop}"\n'))
    before = _price_rows(lab)
    r = _cli(_env(lab), "prices", "update", "-c", str(other))
    t.injected = 1
    out = r.stdout + r.stderr
    t.tracebacks = tracebacks(out)
    # the console wraps its message at the terminal's width, and the paths in it are as long
    # as the folder the trial runs in: match on the text with its line breaks undone
    flat = " ".join(out.split())
    t.detected = (r.returncode != 0 and "a.csv and b.csv" in flat and f"{ticker} {night}" in flat
                  and _price_rows(lab) == before)
    t.detail = flat[:120]


def _snapshots(lab: Lab) -> list[Path]:
    return sorted(lab.cfg.resolve(lab.cfg.warehouse.path).parent.glob(".sql-snapshot-*"))


def killed_sql(lab: Lab, night, t) -> None:
    """A long `dualpath sql` past its read-lock budget works on a snapshot copy; stopped by
    SIGTERM it removes the copy, killed by SIGKILL the next start removes it."""
    import signal
    import subprocess

    from bench.faults_night import DUALPATH, LONG_SQL, _cli, _end, _env, tracebacks
    from dualpath.sim.proxy import wait_until

    t.night, left = False, []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        proc = subprocess.Popen([DUALPATH, "sql", "-c", str(lab.cfg_path), "--timeout", "600",
                                 LONG_SQL], env=_env(lab), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        try:
            copying = wait_until(lambda: any(any(d.iterdir()) for d in _snapshots(lab)), 60, 0.1)
            time.sleep(0.5)                      # the query runs on the copy
            t.injected += int(copying)
            proc.send_signal(sig)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                t.detail = f"still running 60 s after {sig.name}; "
        finally:
            _end(proc)
        err = proc.stderr.read()
        t.tracebacks += tracebacks(err) + int("internal error" in err)   # SIGTERM: exit 143
        if sig == signal.SIGKILL:
            _cli(_env(lab), "sql", "-c", str(lab.cfg_path), "SELECT 1")   # the next start
        left.append(len(_snapshots(lab)))
    t.detected = t.injected == 2 and left == [0, 0]
    t.detail += f"snapshots left after SIGTERM, after SIGKILL and a next start: {left}"


def read_only_warehouse(lab: Lab, night, t) -> None:
    """The lab's project seen through a read-only bind mount: `dualpath nightly` says so in
    one line, no traceback; skipped, with the reason, where `mount` is not allowed."""
    import subprocess

    from bench.faults_night import _cli, _env, tracebacks

    t.night = False
    src, ro = lab.cfg_path.parent, lab.cfg_path.parent.with_name("read-only")
    ro.mkdir(exist_ok=True)
    ok = subprocess.run(["mount", "--bind", str(src), str(ro)], capture_output=True, text=True)
    if ok.returncode:
        t.detected, t.detail = True, f"skipped: no bind mount here ({ok.stderr.strip()})"
        return
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        r = _cli(_env(lab), "nightly", "--date", str(night), "-c", str(ro / lab.cfg_path.name))
    finally:
        subprocess.run(["umount", str(ro)], check=False)
    out = r.stdout + r.stderr
    t.injected, t.tracebacks = 1, tracebacks(out) + int("internal error" in out)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    t.detected = r.returncode == 2 and len(errors) == 1 and "read-only file system" in errors[0]
    t.detail = (errors or [" ".join(out.split())])[0][:120]


PLACE_TRIALS = {"read_only_warehouse": read_only_warehouse, "killed_sql": killed_sql, "symlink_warehouse": symlink_warehouse, "other_tmpdir": other_tmpdir,
                "conflicting_prices": conflicting_prices}
