"""The demo's clock is chosen from the CPU the machine gives it: slower on a busy machine."""

from __future__ import annotations

from dualpath.demo import CLOCK_RANGE, auto_clock, cpu_share


def test_a_busier_machine_gets_a_slower_clock_within_its_range():
    assert auto_clock(1.0) == 1.2
    assert auto_clock(0.7) == 1.7
    assert auto_clock(0.2) == CLOCK_RANGE[1] == 2.5      # the ceiling keeps 20 nights in 5 min
    assert auto_clock(0.0) == 2.5
    assert auto_clock(5.0) == CLOCK_RANGE[0] == 0.6
    shares = [1.0, 0.8, 0.5, 0.4, 0.3]
    assert [auto_clock(s) for s in shares] == sorted(auto_clock(s) for s in shares)


def test_the_share_is_of_one_core():
    assert 0.0 < cpu_share(0.05) <= 1.0


def test_a_loaded_machine_reads_as_loaded_even_when_a_spinner_gets_a_core(monkeypatch):
    """Others' work comes in bursts: a spinner's second can find a core free at a load of 8;
    the load average keeps the clock slow then."""
    import os

    import dualpath.demo as demo

    monkeypatch.setattr(demo, "cpu_share", lambda seconds=1.0: 1.0)
    monkeypatch.setattr(os, "getloadavg", lambda: (7.0, 7.0, 7.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert demo.machine_share() == 0.25 and auto_clock(demo.machine_share()) == 2.5
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert demo.machine_share() == 1.0
