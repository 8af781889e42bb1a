"""Fault trials at a small size: real nights through the fault proxy and process control,
rerun as a user would, then counted from the warehouse (`bench/faults.py` at full size)."""

from __future__ import annotations

import pytest

from bench.faults import ALL, PROXY_FAULTS, SWAPS, run_trials, summary, table
from dualpath.sim.proxy import TRANSIENT


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    out = run_trials(tmp_path_factory.mktemp("faults"), ALL, tickers=3, draws=1, per_fault=2,
                     echo=lambda *_: None)
    print(table(out))
    return {t.fault: t for t in out}


@pytest.mark.parametrize("kind", ALL)
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
