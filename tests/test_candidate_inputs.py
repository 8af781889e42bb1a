"""Frozen unit inputs and the candidate's planning, on tiny hand-built inputs."""

from __future__ import annotations

import math
from datetime import date

import duckdb
import pytest

from dualpath.errors import DataError, UserError
from dualpath.frozen import FrozenHistory, FrozenInput
from dualpath.warehouse.migrations import migrate
from dualpath.warehouse.unit_inputs import (freeze, frozen_inputs, frozen_nights,
                                            nights_without_inputs)

N1, N2 = date(2027, 1, 5), date(2027, 1, 6)
CLOSES = ((date(2027, 1, 4), 101.25), (N1, 0.1 + 0.2))     # 0.30000000000000004 round-trips


def test_an_input_is_addressed_by_its_content_and_reads_back_as_the_same_bytes():
    a = FrozenInput("AAA", N1, CLOSES, "doc")
    back = FrozenInput.from_stored("AAA", N1, a.closes_json(), "doc")
    assert back == a and back.sha256 == a.sha256
    # one cent on one close, or another document, is another input
    assert FrozenInput("AAA", N1, (CLOSES[0], (N1, 0.31)), "doc").sha256 != a.sha256
    assert FrozenInput("AAA", N1, CLOSES, None).sha256 != a.sha256


def test_a_night_is_frozen_once_and_old_nights_are_named_as_lacking_inputs():
    with duckdb.connect() as con:
        migrate(con)
        a, b = FrozenInput("AAA", N1, CLOSES), FrozenInput("BBB", N1, CLOSES, "b")
        assert freeze(con, "exp", [a, b]) == 2
        # a resumed night keeps what its first segment was given
        assert freeze(con, "exp", [FrozenInput("AAA", N1, CLOSES[:1])]) == 0
        assert frozen_inputs(con, "exp", N1) == {"AAA": a, "BBB": b}
        # the same input in another experiment is stored once, mapped twice
        assert freeze(con, "other", [a]) == 1
        assert con.execute("SELECT count(*) FROM unit_inputs").fetchone()[0] == 2
        assert frozen_nights(con, "exp") == {N1: 2}
        con.execute("INSERT INTO runs (run_id, experiment, night, path, config_hash, status) "
                    "VALUES ('exp/2027-01-05/main', 'exp', ?, 'main', 'h', 'complete'), "
                    "('exp/2027-01-06/main', 'exp', ?, 'main', 'h', 'complete')", [N1, N2])
        assert nights_without_inputs(con, "exp") == [N2]


def test_a_frozen_history_serves_only_what_was_stored():
    h = FrozenHistory(N1, {"AAA": FrozenInput("AAA", N1, CLOSES, "doc")})
    assert h.closes("AAA", N1, 5) == CLOSES        # as stored, whatever history_days is now
    assert h.documents("AAA") == "doc"
    with pytest.raises(DataError, match="no frozen input for BBB on 2027-01-05"):
        h.closes("BBB", N1, 5)
    with pytest.raises(DataError, match="no frozen input for AAA on 2027-01-06"):
        h.closes("AAA", N2, 5)


def test_progress_gives_an_eta_from_this_sittings_own_pace():
    from dualpath.flows.candidate import SittingProgress

    t = [0.0]
    lines: list[str] = []
    p = SittingProgress(total=100, done_before=20, say=lines.append, every_s=0.0,
                        clock=lambda: t[0])
    assert p.line() == "20/100 units, 0 s this sitting, ETA after the first unit"
    t[0] = 30.0
    p("c", 10, 40, 170)
    # 10 units in 30 s -> 3 s a unit; 70 left -> 210 s (the 20 resumed cost nothing here)
    assert lines[-1] == "30/100 units, 30 s this sitting, ETA 210 s"
    p.next_night()
    t[0] = 60.0
    p("c", 10, 40, 170)
    assert lines[-1] == "40/100 units, 60 s this sitting, ETA 180 s"


def test_budget_and_cost_choose_the_latest_nights_that_fit():
    from dualpath.cli.candidate import parse_budget
    from dualpath.flows.candidate_answer import Cost, choose_nights

    assert parse_budget("2h") == 2.0 and parse_budget("90m") == 1.5
    assert parse_budget("1800s") == 0.5
    with pytest.raises(UserError, match="give a duration such as 2h"):
        parse_budget("two hours")
    # 20 tickers x 2 draws x 45 s = 1,800 s = 0.5 h a night; 200 W -> 0.1 kWh a night
    cost = Cost(3, 0.4, "x", 2, 2, 20, 45.0, "time model", 200.0, 0.5, 0.05)
    nights = [date(2027, 1, d) for d in range(4, 12)]
    assert cost.hours_per_night == 0.5 and cost.nights_in(2.0) == 4
    assert math.isclose(cost.kwh(3), 0.3)
    assert choose_nights(nights, cost, budget_h=2.0) == nights[-4:]
    assert choose_nights(nights, cost) == nights[-3:]          # what power needs
    assert choose_nights(nights, cost, nights=2) == nights[-2:]
    assert choose_nights(nights, cost, budget_h=0.2) == []


def test_the_nights_for_power_come_from_the_references_own_agreement():
    from dualpath.flows.candidate_answer import nights_for_power

    # more reference agreement, a larger g to detect: fewer nights; one reference draw: none
    hi = nights_for_power(20, 0.45, 0.5, 0.05, (2, 2))
    lo = nights_for_power(20, 0.12, 0.5, 0.05, (2, 2))
    assert hi is not None and lo is not None and hi < lo
    # no stored draws to resample: the normal approximation at the measured agreement with
    # the heavy-tailed DGP's variances (equal 0.59, noise 0.81 at 2 x 2 draws):
    # g = 0.5 x 0.45 = 0.225; 0.225 / sqrt(0.81 / (20 T)) >= 1.645 + 0.842 -> T >= 4.95 -> 5
    assert hi == 5
    assert nights_for_power(20, 0.45, 0.5, 0.05, (1, 2)) is None
