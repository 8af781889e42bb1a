"""Fault trials of the night and the warehouse (`bench/faults.py` runs them): two writers,
an aliased server, a second config, a huge answer, partial journals, a full disk, a damaged
warehouse, SIGTERM, a Prefect cancel and a long `dualpath sql` during a night.

Each returns a `Trial` whose `injected` says the fault met a night and whose `detected` says
dualpath reacted as it must (refused, diagnosed, labelled); `bench/faults.py` then reruns
the night as a user would and counts what the warehouse shows.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.faultlab import Lab, score_night
from dualpath.errors import NightBusy, UserError
from dualpath.locks import endpoint_lock
from dualpath.sim.proxy import wait_until
from dualpath.flows import runner

DUALPATH = str(Path(sys.executable).with_name("dualpath"))
# minutes of work on two cores, whatever the warehouse holds
LONG_SQL = "SELECT sum(a.range * b.range) FROM range(300000) a, range(300000) b"
HUGE_ANSWER_BYTES = 50_000_000


def tracebacks(text: str) -> int:
    return text.count("Traceback (most recent call last)")


def mislabelled(lab: Lab, night) -> int:
    """Runs of the night that `dualpath runs` would show `running` though no process holds
    the night; the journals are first ingested as a mid-night ingest leaves them."""
    from dualpath.warehouse.db import reader, writer
    from dualpath.warehouse.ingest import ingest_journals
    from dualpath.warehouse.queries import run_summaries

    journals = [runner.journal_path(lab.cfg, night, p) for p in lab.cfg.paths]
    with writer(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        with contextlib.suppress(Exception):      # the trial's own check says if it failed
            ingest_journals(con, [j for j in journals if j.exists()], running=True)
    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        runs = runner.label_interrupted(lab.cfg, run_summaries(con))
    runs = runs[runs["run_id"].str.contains(f"/{night.isoformat()}/")]
    return int((runs["status"] == "running").sum()) if not runner.night_live(lab.cfg, night) else 0


def slow_config(lab: Lab) -> Path:
    """The lab's config with clocks 20x slower, for trials run through `dualpath nightly`
    (which starts its own simulated servers): a signal then lands mid-night. A night begun
    with it is finished with it (its fingerprint differs), so those trials rerun it."""
    slow = lab.cfg_path.with_name("slow.toml")
    if not slow.exists():
        text = re.sub(r"time_scale = ([0-9.e-]+)",
                      lambda m: f"time_scale = {float(m.group(1)) * 20:g}",
                      lab.cfg_path.read_text())
        # an unstreamed answer 20x slower takes seconds on a loaded machine: the lab's 1 s
        # read timeout failed a call of the rerun (exit 1) in 2 of 2 loaded runs
        slow.write_text(re.sub(r"read_timeout_s = [0-9.]+", "read_timeout_s = 30.0", text))
    return slow


def nightly_cli(lab: Lab, night, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([DUALPATH, "nightly", "-c", str(slow_config(lab)), "--date",
                             night.isoformat()], env=env or _env(lab),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_with_cli(lab: Lab, night, t, env: dict | None = None) -> None:
    """The user's rerun of a night begun by `dualpath nightly`: the same command again."""
    proc = nightly_cli(lab, night, env)
    out, err = proc.communicate(timeout=600)
    t.tracebacks += tracebacks(out + err)
    t.rerun_done = True
    if proc.returncode != 0:
        t.detail = (t.detail + f" rerun exit {proc.returncode}: {err[-200:]}").strip()


def _calls_journaled(lab: Lab, night, path: str = "backup") -> bool:
    return lab.calls_done(night, path) > 0


def _wait_scoring(lab: Lab, night, proc: subprocess.Popen, timeout_s: float = 180) -> bool:
    return wait_until(lambda: _calls_journaled(lab, night) or proc.poll() is not None,
                      timeout_s) and proc.poll() is None


def twin_nights(lab: Lab, night, t) -> None:
    """A second `dualpath nightly` of a night being scored is refused, naming its holder."""
    first = nightly_cli(lab, night)
    try:
        if _wait_scoring(lab, night, first, 240):
            t.injected = 1
            second = nightly_cli(lab, night)
            out, err = second.communicate(timeout=300)
            t.tracebacks += tracebacks(out + err)
            t.detected = (second.returncode == 2 and f"pid {first.pid}" in err
                          and "since" in err)
            if not t.detected:
                t.detail = f"second start: exit {second.returncode}: {err[-200:]}"
        out, err = first.communicate(timeout=600)
        t.tracebacks += tracebacks(out + err)
    finally:
        _end(first)
    finish_with_cli(lab, night, t)


def host_alias(lab: Lab, night, t) -> None:
    """`localhost` for a server that another experiment holds as 127.0.0.1 is refused."""
    held = lab.urls["backup"]
    alias = {**lab.urls, "backup": held.replace("127.0.0.1", "localhost")}
    with endpoint_lock(held, "another experiment on the same server"):
        outcomes = score_night(lab.cfg, night, alias, config_path=lab.cfg_path)
    t.injected = 1
    backup = next(o for o in outcomes if o.path == "backup")
    t.detected = backup.status == "failed" and "EndpointBusy" in (backup.reason or "")


def second_config(lab: Lab, night, t) -> None:
    """The same experiment from a second config with another runs folder is refused."""
    from dualpath.config import load_config

    other = lab.cfg_path.with_name("second.toml")
    text = lab.cfg_path.read_text()
    other.write_text(re.sub(r'runs_dir = "[^"]*"', 'runs_dir = "runs-second"', text))
    cfg2 = load_config(other)
    t.injected = 1
    try:
        score_night(cfg2, night, lab.urls, config_path=other)
    except UserError as e:
        t.detected = "keeps its runs in" in str(e)


def answer_50mb(lab: Lab, night, t) -> None:
    """One 50 MB answer: stored whole, the night ingested (DuckDB's 16 MiB limit broke it)."""
    proxy = lab.proxies["main"]
    proxy.inject("huge_answer", 1)
    lab.score(night)
    proxy.clear()
    t.injected = proxy.injected["huge_answer"]
    try:
        lab.ingest(night)
    except Exception as e:       # noqa: BLE001 - counted: the night could not be ingested
        t.detail = f"{type(e).__name__}: {e}"[:200]
        return
    from dualpath.warehouse.db import reader
    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        longest = con.execute("SELECT max(length(t.text)) FROM calls c JOIN texts t ON "
                              "t.hash = c.output_hash WHERE c.night = ?", [night]).fetchone()[0]
    t.detected = (longest or 0) >= HUGE_ANSWER_BYTES
    if not t.detected:
        with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
            errs = con.execute("SELECT error_kind, any_value(error_detail), count(*) FROM calls "
                               "WHERE night = ? AND error_kind IS NOT NULL GROUP BY 1",
                               [night]).fetchall()
        t.detail = f"longest answer stored: {longest} characters; {errs}"[:400]


def partial_journal(lab: Lab, night, t) -> None:
    """The harness killed when units have started and none finished: the journal ingests."""
    proc = nightly_cli(lab, night)
    try:
        j = runner.journal_path(lab.cfg, night, "backup")
        wait_until(lambda: j.exists() and b'"k":"ustart"' in j.read_bytes()
                   or proc.poll() is not None, 240, every_s=0.005)
        if proc.poll() is None and b'"k":"unit"' not in j.read_bytes():
            proc.send_signal(signal.SIGKILL)
            t.injected = 1
        proc.wait(timeout=60)
    finally:
        _end(proc)
    t.mislabelled += mislabelled(lab, night)
    try:
        lab.ingest(night)
        t.detected = True
    except Exception as e:      # noqa: BLE001
        t.detail = f"{type(e).__name__}: {e}"[:200]
    finish_with_cli(lab, night, t)


def _mount_small(folder: Path, size: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                       capture_output=True)
    return r.returncode == 0


def disk_full(lab: Lab, night, t) -> None:
    """The disk of the backup's journal fills mid-night (a small tmpfs over its folder);
    space is freed (the journal moved to the real disk) and the night rerun."""
    folder = runner.journal_path(lab.cfg, night, "backup").parent
    if not _mount_small(folder, "48k"):
        t.detail = "could not mount a tmpfs (not root?): not tried"
        return
    try:
        child = lab.child(night)
        out, err = child.communicate(timeout=180)
        t.tracebacks += tracebacks(out + err)
        t.injected = 1
        t.detected = "No space left" in err or "is full" in err
        saved = {f.name: f.read_bytes() for f in folder.iterdir() if f.is_file()}
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
    for name, data in saved.items():           # space freed: the files on the real disk
        (folder / name).write_bytes(data)
    t.mislabelled += mislabelled(lab, night)


def truncated_warehouse(lab: Lab, night, t) -> None:
    """The warehouse cut short: `runs` says so in one line; `rebuild` restores every call."""
    lab.score(night)
    lab.ingest(night)
    before = _all_calls(lab)
    wh = lab.cfg.resolve(lab.cfg.warehouse.path)
    wh.write_bytes(wh.read_bytes()[:wh.stat().st_size // 2])
    t.injected = 1
    env = _env(lab)
    r = _cli(env, "runs", "-c", str(lab.cfg_path))
    t.tracebacks += tracebacks(r.stdout + r.stderr)
    said = r.returncode == 2 and "is damaged" in r.stderr and "dualpath rebuild" in r.stderr
    r = _cli(env, "rebuild", "-c", str(lab.cfg_path))
    t.tracebacks += tracebacks(r.stdout + r.stderr)
    lab.ensure_prices()
    t.lost += max(before - _all_calls(lab), 0)
    t.detected = said and r.returncode == 0


def sigterm(lab: Lab, night, t) -> None:
    """`dualpath nightly` sent SIGTERM (what a worker sends on cancel) mid-night."""
    _interrupt_cli(lab, night, t, signal.SIGTERM)


def prefect_cancel(lab: Lab, night, t) -> None:
    """A Prefect cancel of the night's flow run: its state set to Cancelling, then SIGTERM
    from the worker, as a process worker cancels."""
    from prefect.settings import PREFECT_HOME, temporary_settings

    from dualpath.flows.prefect_api import temporary_api

    with temporary_settings({PREFECT_HOME: lab.cfg_path.parent / "prefect"}), \
            temporary_api(lab.cfg) as api:
        _interrupt_cli(lab, night, t, signal.SIGTERM, api=api, cancel=True)


def _interrupt_cli(lab: Lab, night, t, sig, api: str | None = None,
                   cancel: bool = False) -> None:
    env = _env(lab, api)
    proc = nightly_cli(lab, night, env)
    try:
        if not _wait_scoring(lab, night, proc, 240):
            t.detail = "the night ended before the signal"
            return
        if cancel:
            _set_cancelling(f"{lab.cfg.experiment.name}/{night.isoformat()}")
        proc.send_signal(sig)
        t.injected = 1
        out, err = proc.communicate(timeout=180)
        t.tracebacks += tracebacks(out + err)
        t.detected = proc.returncode in (130, 143) and "interrupted; rerun the night" in err
        if not t.detected:
            t.detail = f"exit {proc.returncode}: {err[-300:]}"
    finally:
        _end(proc)
    r = _cli(env, "runs", "-c", str(lab.cfg_path), "-f", "csv")
    t.tracebacks += tracebacks(r.stdout + r.stderr)
    t.mislabelled += sum(1 for ln in r.stdout.splitlines()
                         if ln.startswith(night.isoformat()) and ",running," in ln)
    finish_with_cli(lab, night, t, env)


def _set_cancelling(name: str) -> None:
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.states import Cancelling

    async def go():
        async with get_client() as c:
            runs = await c.read_flow_runs(flow_run_filter=FlowRunFilter(
                name=FlowRunFilterName(any_=[name])))
            for r in runs:
                await c.set_flow_run_state(r.id, Cancelling(), force=True)
    asyncio.run(go())


def long_sql(lab: Lab, night, t) -> None:
    """A long `dualpath sql` while the night is scored and ingested."""
    proc = subprocess.Popen([DUALPATH, "sql", "-c", str(lab.cfg_path), "--timeout", "600",
                             LONG_SQL], env=_env(lab), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)                          # it holds its read lock now
        lab.score(night)
        try:
            lab.ingest(night)                    # the writer the night's ingest is
            t.detected = True
        except Exception as e:                   # noqa: BLE001 - counted as not survived
            t.detail = f"{type(e).__name__}: {e}"[:200]
        t.injected = int(proc.poll() is None)
    finally:
        _end(proc)


def _all_calls(lab: Lab) -> int:
    from dualpath.warehouse.db import reader
    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        return con.execute("SELECT count(DISTINCT call_id) FROM calls").fetchone()[0]


def _env(lab: Lab, api: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update(PREFECT_HOME=str(lab.cfg_path.parent / "prefect"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="90")
    if api:
        env["PREFECT_API_URL"] = api
    return env


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([DUALPATH, *args], env=env, capture_output=True, text=True,
                          timeout=300)


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def binary_swap(lab: Lab, night, t) -> None:
    """A rebuilt llama-server (other bytes, the same `build_info`) put on the backup's port
    mid-night, on a real server only (a simulated one reports no binary). The path is
    scored without the proxy: the hash is of the process listening on the path's port."""
    import shutil

    from bench.faultlab import RealServer, swap_detected
    if not lab.real:
        t.detail = "a real llama-server only (--real)"
        return
    binary, model = lab.real
    rebuilt = lab.cfg_path.parent / "rebuilt-bin"
    if not rebuilt.exists():
        shutil.copytree(Path(binary).parent, rebuilt, symlinks=True)
        with open(rebuilt / Path(binary).name, "ab") as f:
            f.write(b"\0rebuilt")
    port = lab.servers["backup"].port
    direct = {**lab.urls, "backup": lab.servers["backup"].url}

    def on_port(exe: str) -> None:
        lab.servers["backup"].kill9()
        for _ in range(50):                  # the killed server's port may take a moment
            try:
                server = RealServer(exe, model, port=port).start()
                break
            except RuntimeError:
                time.sleep(0.2)
        lab.spare.append(server)
        lab.put_behind("backup", server)

    def swap() -> None:
        total = len(lab.cfg.tickers()) * lab.cfg.draws_for("backup") * 17
        wait_until(lambda: lab.calls_done(night) >= total // 3, 300)
        on_port(str(rebuilt / Path(binary).name))
        t.injected = 1
    score_night(lab.cfg, night, direct, swap, config_path=lab.cfg_path)
    lab.ingest(night)
    t.detected = swap_detected(lab.cfg, night, "backup")
    t.undetected_swap = int(t.injected and not t.detected)
    on_port(binary)                          # the user puts the right binary back and reruns
    score_night(lab.cfg, night, direct, config_path=lab.cfg_path)
    t.rerun_done = True


REAL_TRIALS = {"binary_swap": binary_swap}    # kinds only a real llama-server can take
NIGHT_TRIALS = {"twin_nights": twin_nights, "host_alias": host_alias,
                "second_config": second_config, "answer_50mb": answer_50mb,
                "partial_journal": partial_journal, "disk_full": disk_full,
                "truncated_warehouse": truncated_warehouse, "sigterm": sigterm,
                "prefect_cancel": prefect_cancel, "long_sql": long_sql}
