"""A GPU reader that fails mid-night never breaks the night's output: one warning line, no
thread or task traceback, every sample taken kept, the reads retried; the energy is stored
whole with the gap stated when the reader comes back, or as "sampling stopped at HH:MM:SS
(why)" with no joules when it does not; the night's runs stay complete and undisturbed."""

from __future__ import annotations

import logging
import re
import threading
import time

import pytest

from dualpath.telemetry import GpuState, Sampler, SimSource
from dualpath.telemetry.settings import SimPower
from dualpath.warehouse.energy import _row


class Failing(SimSource):
    """A simulated GPU whose power reads raise OSError between `fail_at` and `back_at`
    seconds (real time) after it opened (None: never back)."""

    def __init__(self, fail_at: float, back_at: float | None):
        super().__init__(SimPower(idle_w=30, w_per_busy_slot=40), 4, lambda: 2)
        self.opened, self.fail_at, self.back_at = time.monotonic(), fail_at, back_at

    def power(self):
        t = time.monotonic() - self.opened
        if t >= self.fail_at and (self.back_at is None or t < self.back_at):
            raise OSError(19, "No such device")
        return super().power()


@pytest.fixture
def thread_errors(monkeypatch):
    """Exceptions that ended a thread (what printed 'Exception in thread gpu-telemetry')."""
    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))
    return seen


def _run(src, seconds: float, caplog) -> object:
    s = Sampler(src, hz=50, name="backup")
    with caplog.at_level(logging.WARNING, logger="dualpath.telemetry.sampler"):
        s.start()
        time.sleep(seconds)
        return s.stop()


def test_a_reader_that_stops_midnight_keeps_its_samples_and_says_when(caplog, thread_errors):
    out = _run(Failing(0.2, None), 0.5, caplog)
    assert thread_errors == []
    (warning,) = caplog.records            # one line, whatever the retries
    assert re.fullmatch(r"path backup: GPU telemetry: the reader failed at \d\d:\d\d:\d\d "
                        r"\(OSError: \[Errno 19\] No such device\); retrying, samples kept",
                        warning.getMessage())
    assert re.fullmatch(r"sampling stopped at \d\d:\d\d:\d\d \(OSError: \[Errno 19\] No such "
                        r"device\)", out.stopped)
    # 0.2 s at 50 Hz: about 10 samples before the failure, all kept
    assert out.samples >= 3 and sum(1 for _ in out.buckets) >= 1
    row, samples = _row({"run_id": "e/n/backup", "segment": 1, "summary": vars(out)})
    # the part read is never the night's energy: no joules, the reason, the part apart
    assert (row["joules"], row["mean_w"], row["unknown"]) == (None, None, out.stopped)
    assert row["partial_j"] == out.joules > 0 and len(samples) == len(out.buckets)


def test_a_blip_is_retried_and_the_energy_stored_whole_with_the_gap(caplog, thread_errors):
    src = Failing(0.1, 0.3)
    out = _run(src, 0.6, caplog)
    assert thread_errors == [] and len(caplog.records) == 1
    assert out.stopped is None and out.basis == "counter"
    # the counter spans the gap: the joules are the simulated GPU's own, 30 + 2 x 40 = 110 W
    # over the window (its modelled clock is real time here)
    assert out.joules == pytest.approx(110 * out.seconds, rel=0.02)
    assert out.gap_s >= 0.15
    assert re.fullmatch(r"the reader failed \d+× \(OSError: \[Errno 19\] No such device\); "
                        r"\d+\.\d s without samples, the counter spans it", out.faults)
    row, _ = _row({"run_id": "e/n/backup", "segment": 1, "summary": vars(out)})
    assert row["unknown"] is None and row["joules"] == out.joules and row["faults"] == out.faults


def test_sampled_power_states_its_rate_and_error_bound():
    """Power 100 W then 300 W, read at 1 s steps (no counter): the held integral is
    100 + 100 + 300 = 500 J over 3 s; the bound Σ|Δw|·Δt = 200 W x 1 s = 200 J."""
    class Steps:
        kind, has_energy = "hwmon", False
        watts = iter([100.0, 300.0, 300.0])       # two ticks, then stop's read

        def power(self):
            return next(self.watts), None

        def state(self):
            return [GpuState(0)]
    s = Sampler(Steps(), hz=1)
    t = {"now": 0.0}
    s.clock = lambda: t["now"]
    s.baseline, s.t0, s.t_last, s.e0, s.w_last, s.integrated = [], 0.0, 0.0, None, 100.0, 0.0
    for now in (1.0, 2.0):
        t["now"] = now
        s._tick()
    t["now"] = 3.0
    out = s.stop()
    assert (out.basis, out.joules, out.error_j, out.hz) == ("sampled", 500.0, 200.0, 2 / 3)


def test_a_night_whose_reader_fails_scores_complete_and_stores_why(tmp_path, monkeypatch,
                                                                   capfd):
    """A real night on simulated servers, the backup's GPU failing 0.3 s in for good."""
    from dualpath.telemetry import sim
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.queries import run_summaries
    from tests.helpers import SimFleet, ingest, make_project, score_night_plain

    real, opened = sim.SimSource.power, {}

    def power(self):
        if "R9700" in self.p.name and \
                time.monotonic() - opened.setdefault(id(self), time.monotonic()) > 0.3:
            raise OSError(19, "No such device")
        return real(self)
    monkeypatch.setattr(sim.SimSource, "power", power)
    _, cfg, nights = make_project(tmp_path, tickers=4, draws=2, nights=1, clock=0.2)
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, nights[0], fleet.urls)
    ingest(cfg, works)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in thread" not in err
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        runs = run_summaries(con)
        rows = {r[0]: r[1:] for r in con.execute(
            "SELECT run_id, unknown, changes, samples FROM energy_runs").fetchall()}
    # both complete; the reader's fault is no GPU change, so it disturbs nothing (a loaded
    # test machine may still starve a run: that label is the harness's, not the GPU's)
    assert dict(zip(runs["path"], runs["status"])) == {"main": "complete", "backup": "complete"}
    assert not runs["disturbed"].fillna("").str.contains("GPU").any()
    unknown, changes, samples = rows[f"demo/{nights[0]}/backup"]
    assert re.fullmatch(r"sampling stopped at \d\d:\d\d:\d\d \(OSError: \[Errno 19\] No such "
                        r"device\)", unknown)
    assert changes is None and samples > 0
    assert rows[f"demo/{nights[0]}/main"][0] is None


def test_the_viewer_states_the_basis_beside_a_plot_or_why_there_are_no_joules():
    import pandas as pd

    from dualpath.viewer.plots import energy_note

    seg = dict(segment=1, basis="sampled", joules=10_000.0, sample_hz=9.8, error_j=50.0,
               faults=None, unknown=None)
    # 50 J of 10,000 J: the bound is 0.5%
    assert energy_note(pd.DataFrame([seg])) == (
        "board energy 10.0 kJ, by power sampled at 9.8 Hz and integrated (error ≤ 0.5%)")
    stopped = {**seg, "joules": None, "error_j": None,
               "unknown": "sampling stopped at 03:12:09 (OSError: [Errno 19] No such device)"}
    assert energy_note(pd.DataFrame([stopped])) == (
        "energy unknown (sampling stopped at 03:12:09 (OSError: [Errno 19] No such device))")
    counter = {**seg, "basis": "counter", "error_j": None,
               "faults": "the reader failed 4× (OSError: x); 1.4 s without samples, the "
                         "counter spans it"}
    assert energy_note(pd.DataFrame([counter])) == (
        "board energy 10.0 kJ, by the GPU's energy counter; the reader failed 4× (OSError: "
        "x); 1.4 s without samples, the counter spans it")
