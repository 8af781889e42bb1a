"""Speed only from undisturbed runs: a complete run whose server restarted, stalled (SIGSTOP)
or served someone else too (or whose harness starved it: `tests/test_starved.py`) is
flagged, shown with the reason, and kept out of every speed median, as runs that were not
complete already are."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time

import httpx
import pandas as pd
import pytest

from dualpath.config import load_config
from dualpath.evals.speed import path_speed
from dualpath.flows import runner
from dualpath.flows.report import run_warnings
from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader
from dualpath.warehouse.frames import runs_frame
from dualpath.evals.speed import path_totals, with_speed
from dualpath.warehouse.queries import run_summaries


def _per_run(rows: list[tuple[str, str, float, str | None]]) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": f"e/n{i}/{p}", "path": p, "status": status,
                          "resumed": False, "disturbed": why,
                          "is_result": status == "complete" and why is None,
                          "units": 10, "throughput_s_per_ticker": s}
                         for i, (p, status, s, why) in enumerate(rows)])


def test_the_medians_leave_disturbed_runs_out_and_count_them():
    per_run = _per_run([("backup", "complete", 270.0, None),
                        ("backup", "complete", 274.0, None),
                        ("backup", "complete", 431.7, "stalled: the server answered nothing "
                                                      "for 160 s"),
                        ("backup", "complete", 400.5, "restarted: …"),
                        ("backup", "partial", 90.0, None)])
    row = path_speed(per_run).set_index("path").loc["backup"]
    assert row["runs"] == 2 and row["disturbed_excluded"] == 2
    assert row["not_complete_excluded"] == 1 and row["resumed_excluded"] == 0
    assert row["throughput_s_per_ticker"] == 272.0      # median of the undisturbed two only


def _project(tmp_path, **over):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1, clock=1.0)
    text = cfg_path.read_text()
    for path, lines in over.items():
        text = text.replace(f"[paths.{path}]\n", f"[paths.{path}]\n{lines}\n")
    cfg_path.write_text(text)
    return load_config(cfg_path), nights[0]


def _disturbance(cfg) -> dict[str, str | None]:
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        frame = runs_frame(con, cfg.experiment.name)
        summary = with_speed(run_summaries(con))
        totals = path_totals(summary).set_index("path")
        warnings = run_warnings(con)
    got = {p: (w if isinstance(w, str) else None) for p, w in zip(frame["path"],
                                                                 frame["disturbed"])}
    by_path = summary.set_index("path")
    for path, why in got.items():
        assert bool(by_path.loc[path, "speed_measured"]) == (why is None)
        if why is not None:           # shown apart: its figure beside its reason, no median
            assert pd.notna(by_path.loc[path, "throughput_s"])
            assert pd.isna(totals.loc[path, "throughput_s_median"])
            assert any(w.startswith(f"{by_path.loc[path, 'run_id']}: {why}; its speed is "
                                    "not a measurement") for w in warnings)
    return got


@pytest.mark.parametrize("dialect", ["llama.cpp", "sglang"])
def test_a_server_shared_with_another_client_is_flagged_by_its_own_counter(tmp_path, dialect):
    """On llama-server dualpath keeps slots + queue_depth requests in flight, so busy slots
    can never exceed them: the load poll is off here (one poll an hour) and only the server's
    token counter against the run's own calls can tell. SGLang's counter
    (sglang:generation_tokens_total) is read through the engine registry too: the check
    never ran on an SGLang path."""
    cfg, night = _project(tmp_path, backup="load_poll_s = 3600",
                          **{"backup.sim": f'dialect = "{dialect}"'})
    with SimFleet(cfg) as fleet:
        url, stop = fleet.urls["backup"], threading.Event()

        async def intruder():
            body = {"model": "x", "max_tokens": 300, "messages": [
                {"role": "user", "content": "someone else's experiment"}]}
            async with httpx.AsyncClient(timeout=60) as http:
                while not stop.is_set():
                    await http.post(f"{url}/v1/chat/completions", json=body)

        t = threading.Thread(target=lambda: asyncio.run(intruder()))
        t.start()
        try:
            works = score_night_plain(cfg, night, fleet.urls)
        finally:
            stop.set()
            t.join(timeout=60)
    ingest(cfg, works)
    got = _disturbance(cfg)
    assert got["main"] is None                      # the path nobody else used: a result
    assert got["backup"].startswith("shared: the server generated ")
    assert got["backup"].endswith(" tokens more than this run received")


def test_a_stopped_server_is_flagged_stalled(tmp_path):
    """SIGSTOP for longer than the stall threshold in the middle of the backup's run."""
    from dualpath.procs import spawn, stop_process
    from dualpath.sim.fleet import _command, wait_ready
    from dualpath.warehouse.disturbed import STALL_S
    from dualpath.warehouse.journal import read_journal

    cfg, night = _project(tmp_path, backup="load_poll_s = 0.2")
    proc = spawn(_command(cfg, "backup"), stdout=subprocess.PIPE, text=True)
    try:
        url = wait_ready("backup", proc, 30)
        work = runner.plan_path(cfg, night, "backup")
        from dualpath.flows import inputs
        history = inputs.price_history(cfg)

        async def go():
            task = asyncio.create_task(runner.run_path(cfg, night, work, history, {},
                                                       override_url=url))
            while not (work.journal.exists() and read_journal(work.journal).units):
                await asyncio.sleep(0.05)
            os.kill(proc.pid, signal.SIGSTOP)
            await asyncio.sleep(STALL_S + 2)
            os.kill(proc.pid, signal.SIGCONT)
            return await task
        outcome = asyncio.run(go())
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        stop_process(proc)
    assert outcome.status == "complete"
    ingest(cfg, [work])
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        unanswered = con.execute("SELECT unanswered_s FROM server_sessions").fetchone()[0]
    assert STALL_S <= unanswered < STALL_S + 10
    why = _disturbance(cfg)["backup"]
    assert why == f"stalled: the server answered nothing for {round(unanswered)} s"


def test_a_server_restarted_on_the_same_port_is_flagged(tmp_path, sim_server):
    from tests.test_guards import _backup_behind_proxy, _score_with_change

    cfg, night, profile, first, proxy = _backup_behind_proxy(tmp_path, sim_server)
    with proxy:
        fresh = sim_server(slots=4, **profile)
        outcome, work = _score_with_change(cfg, night, proxy, fresh.url)
    assert outcome.status == "complete"
    ingest(cfg, [work])
    assert _disturbance(cfg)["backup"].startswith("restarted: the server's counters reset")


def test_an_undisturbed_night_is_a_result_on_both_paths(tmp_path):
    """No server disturbance is read into a night nobody disturbed. (Whether the harness
    kept up with the simulated clock depends on this machine's load: a busy machine may
    starve it at any clock, which `tests/test_starved.py` tests on its own.)"""
    cfg, night = _project(tmp_path)
    t0 = time.monotonic()
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, night, fleet.urls))
    got = {p: why if why is None or not why.startswith("starved: ") else None
           for p, why in _disturbance(cfg).items()}
    assert got == {"main": None, "backup": None}, time.monotonic() - t0
