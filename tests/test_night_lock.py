"""One writer per night, one experiment per runs folder, one lock per server address."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.faultlab import score_night
from dualpath.errors import EndpointBusy, NightBusy, UserError
from dualpath.locks import endpoint_key, endpoint_lock, night_holder
from dualpath.flows import runner
from tests.helpers import make_project

ROOT = Path(__file__).resolve().parents[1]
HOLD = """
import sys, time
from dualpath.config import load_config
from datetime import date
from dualpath.flows.runner import hold_night
cfg = load_config(sys.argv[1])
with hold_night(cfg, date.fromisoformat(sys.argv[2])):
    print("held", flush=True)
    time.sleep(600)
"""


def holder_process(cfg_path, night):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(cfg_path), night.isoformat()],
                         stdout=subprocess.PIPE, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_start_of_a_night_is_refused_before_it_writes_anything(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    wh = cfg.resolve(cfg.warehouse.path)
    before = wh.read_bytes()
    p = holder_process(cfg_path, nights[0])
    try:
        with pytest.raises(NightBusy) as e:
            score_night(cfg, nights[0], {"main": "http://127.0.0.1:9", "backup":
                                         "http://127.0.0.1:9"}, config_path=cfg_path)
        msg = str(e.value)
        assert f"host {socket.gethostname()}, pid {p.pid}, since 20" in msg
        assert f"night {nights[0]} of experiment" in msg
        assert not cfg.resolve(cfg.warehouse.runs_dir).exists()      # no journal touched
        assert wh.read_bytes() == before                              # nor the warehouse
        assert runner.night_live(cfg, nights[0])
    finally:
        p.kill()
        p.wait()
    # its holder killed (-9): nobody holds the night, and the next start takes it over
    assert not runner.night_live(cfg, nights[0])
    with runner.hold_night(cfg, nights[0]):
        assert runner.night_live(cfg, nights[0])
    assert not runner.night_lock_path(cfg, nights[0]).exists()


def _foreign_lock(path: Path, age_s: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": "gpu-box-2", "pid": 4242, "since": "2027-01-04T09:00:00+00:00",
                                "what": "dualpath nightly", "token": "t0", "started": "1"}))
    then = time.time() - age_s
    os.utime(path, (then, then))


def test_a_holder_on_another_host_holds_while_its_heartbeat_is_fresh(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    lock = runner.night_lock_path(cfg, nights[0])
    _foreign_lock(lock, age_s=5)
    with pytest.raises(NightBusy, match="on host gpu-box-2, pid 4242, since 2027-01-04"):
        with runner.hold_night(cfg, nights[0]):
            pass
    _foreign_lock(lock, age_s=3600)            # that host crashed an hour ago
    assert night_holder(lock) is None
    with runner.hold_night(cfg, nights[0]):
        assert night_holder(lock).host == socket.gethostname()


def test_an_experiment_is_bound_to_one_runs_folder(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    runner.claim_night(cfg, nights[0], cfg_path)
    other = tmp_path / "second.toml"
    other.write_text(cfg_path.read_text().replace('runs_dir = ', 'runs_dir = "elsewhere" #'))
    from dualpath.config import load_config
    second = load_config(other)
    assert second.resolve(second.warehouse.runs_dir) != cfg.resolve(cfg.warehouse.runs_dir)
    with pytest.raises(UserError, match=f"experiment '{cfg.experiment.name}' keeps its runs in"):
        runner.claim_night(second, nights[0], other)
    runner.claim_night(cfg, nights[0], cfg_path)                     # its own folder: fine


def test_localhost_and_its_address_are_one_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert endpoint_key(f"http://localhost:{port}") == endpoint_key(f"http://127.0.0.1:{port}/")
    assert endpoint_key(f"http://127.0.0.1:{port}") != endpoint_key(f"http://127.0.0.1:{port + 1}")
    with endpoint_lock(f"http://localhost:{port}", "run A"):
        with pytest.raises(EndpointBusy, match="in use by dualpath pid"):
            with endpoint_lock(f"http://127.0.0.1:{port}", "run B"):
                pass


def test_a_run_left_running_reads_interrupted_once_no_process_holds_its_night(tmp_path):
    from dualpath.warehouse.db import reader, writer
    from dualpath.warehouse.ingest import ingest_journals
    from dualpath.warehouse.queries import run_summaries
    from tests.helpers import SimFleet, score_night_plain
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, nights[0], fleet.urls, stop_after_units=1)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:   # the mid-night ingest, then kill -9
        ingest_journals(con, [w.journal for w in works], running=True)

    def statuses():
        with reader(cfg.resolve(cfg.warehouse.path)) as con:
            return set(runner.label_interrupted(cfg, run_summaries(con))["status"])
    p = holder_process(cfg_path, nights[0])
    try:
        assert statuses() == {"running"}             # someone still scores it
    finally:
        p.kill()
        p.wait()
    assert statuses() == {"interrupted"}
