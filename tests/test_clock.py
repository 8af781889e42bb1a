"""Durations come from the monotonic clock, wall time only labels them: a wall clock stepped
during a night (NTP, a suspended laptop, an operator) changes no duration and no
contamination window."""

from __future__ import annotations

import time

from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader
from dualpath.warehouse.disturbed import DISTURBED
from dualpath.warehouse.journal_read import JournalContents


def test_a_wall_clock_stepped_during_a_night_changes_no_duration(tmp_path, monkeypatch):
    """The wall clock jumps +2 h after the night's first wall reads, then -3 h: runs.wall_s
    is still the night's real length (the issue's trial read -3,580 s)."""
    _, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    real, reads = time.time, [0]

    def stepped() -> float:
        reads[0] += 1
        return real() + (0 if reads[0] < 20 else 7200 if reads[0] < 60 else -3600)

    with SimFleet(cfg) as fleet:
        t0 = time.monotonic()
        monkeypatch.setattr(time, "time", stepped)
        works = score_night_plain(cfg, nights[0], fleet.urls)
        monkeypatch.setattr(time, "time", real)
        took = time.monotonic() - t0
    assert reads[0] > 60                 # the clock really was stepped both ways mid-night
    ingest(cfg, works)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        rows = con.execute("SELECT path, status, wall_s FROM runs ORDER BY path").fetchall()
    assert [(p, s) for p, s, _ in rows] == [("backup", "complete"), ("main", "complete")]
    assert all(0 < wall_s <= took for _, _, wall_s in rows), (rows, took)
    # nor a label: the starvation judge's window and the calls' service share are on the
    # monotonic clock too (a +2 h step inside the window read as slots idle 99% of it)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        labels = con.execute(f"SELECT r.path, d.disturbed FROM runs r LEFT JOIN ({DISTURBED})"
                             " d USING (run_id) ORDER BY r.path").fetchall()
    assert labels == [("backup", None), ("main", None)]


def test_the_contamination_window_is_on_the_monotonic_clock():
    """The identity watcher lost the server at mono 100 (wall stepped back an hour just
    after): a unit that ended at mono 150 is contaminated though its wall end is before the
    window's wall start; one that ended at mono 90 is not."""
    jc = JournalContents(path=None)
    jc.sessions = [{"session_id": "r#1", "identity_lost_after_wall": 10_000.0,
                    "identity_lost_after_mono": 100.0, "stopped_wall": 6_500.0,
                    "stopped_mono": 200.0, "identity_problem": "build changed"}]
    unit = {"ticker": "A", "unit_attempt": 1, "grade": 3, "n_calls": 17, "outcome": "graded",
            "failure_detail": None}
    jc.units = [{**unit, "draw": 1, "end_wall": 6_450.0, "end_mono": 150.0},
                {**unit, "draw": 2, "end_wall": 9_990.0, "end_mono": 90.0}]
    got = {u["draw"]: u["outcome"] for u in jc.unit_results()}
    assert got == {1: "contaminated", 2: "graded"}
    # a journal from before monotonic stamps keeps the wall window
    old = JournalContents(path=None)
    old.sessions = [{k: v for k, v in jc.sessions[0].items() if "mono" not in k}]
    old.units = [{**u} for u in jc.units]
    assert {u["draw"]: u["outcome"] for u in old.unit_results()} == {1: "graded", 2: "graded"}
