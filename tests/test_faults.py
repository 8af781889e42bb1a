"""Fault trials at a small size: real nights through the fault proxy and process control,
rerun as a user would, then counted from the warehouse (`bench/faults.py` at full size).

The trials that run `dualpath nightly` or the console script many times, or wait out a
stall, take ~4 min together here; each has its own test of the same behaviour, so they are
left to the bench: twin_nights (test_night_lock), partial_journal and answer_50mb
(test_ingest_shapes), sigterm and prefect_cancel (test_interrupts), speed_stalled
(test_disturbed), usage_errors (test_usage_errors), killed_sql (test_sql_sigterm,
test_odd_places), read_only_warehouse (test_odd_places), telemetry_fails_midnight and
telemetry_blip (test_telemetry_faults), engine_mismatch (test_engine_proof), sql_sigint
(test_interrupts), clock_step_label (test_clock), unwritable_warehouse (test_config)."""

from __future__ import annotations

import pytest

from bench.faults import ALL, PROXY_FAULTS, SWAPS, run_trials, summary, table
from dualpath.sim.proxy import TRANSIENT

BENCH_ONLY = {"twin_nights", "partial_journal", "answer_50mb", "sigterm", "prefect_cancel",
              "speed_stalled", "usage_errors", "killed_sql", "read_only_warehouse",
              "telemetry_fails_midnight", "telemetry_blip", "engine_mismatch", "sql_sigint",
              "clock_step_label", "unwritable_warehouse"}
KINDS = tuple(k for k in ALL if k not in BENCH_ONLY)


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    out = run_trials(tmp_path_factory.mktemp("faults"), KINDS, tickers=3, draws=1, per_fault=2,
                     echo=lambda *_: None)
    print(table(out))
    return {t.fault: t for t in out}


@pytest.mark.parametrize("kind", KINDS)
def test_every_fault_is_survived_without_loss_duplication_or_counted_contamination(trials, kind):
    t = trials[kind]
    assert t.injected >= 1, f"{kind} was never injected"
    assert t.survived, table([t])
    assert (t.lost, t.duplicated, t.contaminated_counted) == (0, 0, 0), table([t])


@pytest.mark.parametrize("kind", sorted(k for k in PROXY_FAULTS if k in TRANSIENT))
def test_every_transient_fault_is_retried(trials, kind):
    t = trials[kind]
    assert t.transient == t.injected and t.retried == t.transient, table([t])


@pytest.mark.parametrize("kind", sorted(SWAPS))
def test_every_swap_is_detected(trials, kind):
    assert trials[kind].undetected_swap == 0


def test_the_summary_line_meets_every_goal(trials):
    line = summary(list(trials.values()))
    fields = dict(kv.split("=") for kv in line.split())
    assert int(fields.pop("faults")) >= 12
    assert fields == {"lost": "0", "duplicated": "0", "contaminated_counted": "0",
                      "undetected_swaps": "0", "mislabelled": "0", "tracebacks": "0",
                      "distorted_speed_counted": "0"}
