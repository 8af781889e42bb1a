"""A starved harness is not a slow server: a complete run whose slots sat idle more than they
worked while units waited to start is flagged `starved` (`warehouse.disturbed`), shown with
the reason and kept out of every speed median.

Hand-built runs on a real server's clock (time_scale 1): `slots` lanes, each serving one-call
units back to back; `busy` is the share of each call's client interval that the server's own
timings cover."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.helpers import make_project
from dualpath.warehouse.db import reader, writer
from dualpath.warehouse.disturbed import DISTURBED

T0 = 1.8e9


def _calls(run_id, lanes, busy=0.95, period=10.0, in_flight=1.0, tail_s=0.0, timed=True):
    """Units and calls of one run: `lanes` slots × `n` units each, a unit every `period`
    seconds per lane holding its slot for `in_flight` of the period; with `tail_s` lane 0's
    last unit runs that long instead (the night's last long unit, the others done)."""
    slots, n = lanes
    units, calls = [], []
    for lane in range(slots):
        for k in range(n):
            start = T0 + k * period
            length = tail_s if (tail_s and lane == 0 and k == n - 1) else in_flight * period
            ticker, service = f"T{lane}{k}", busy * length
            units.append({"run_id": run_id, "ticker": ticker, "draw": 1, "unit_attempt": 1,
                          "start_wall": start, "end_wall": start + length, "seconds": length,
                          "n_calls": 1, "grade": 3, "outcome": "graded"})
            calls.append({"call_id": f"{run_id}/{ticker}", "run_id": run_id, "ticker": ticker,
                          "draw": 1, "unit_attempt": 1, "agent": "final", "call_seq": 1,
                          "start_wall": start, "end_wall": start + length,
                          "latency_s": length, "attempts": 1, "completion_tokens": 100,
                          "prompt_ms": service * 500 if timed else None,
                          "predicted_ms": service * 500 if timed else None})
    return units, calls


def _disturbed(tmp_path, runs: dict[str, dict]) -> dict[str, str | None]:
    """Store each run (kwargs of `_calls`, plus `session` columns) and read its reason."""
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    rows = {"runs": [], "units": [], "calls": [], "server_sessions": []}
    for name, spec in runs.items():
        run_id = f"demo/{nights[0]}/{name}"
        session = spec.pop("session", {})
        units, calls = _calls(run_id, **spec)
        end = max(u["end_wall"] for u in units)
        rows["runs"].append({"run_id": run_id, "experiment": "demo", "night": nights[0],
                             "path": name, "config_hash": "c0ffee", "status": "complete",
                             "units_planned": len(units), "units_done": len(units),
                             "slots": spec["lanes"][0], "time_scale": 1.0,
                             "wall_s": end - T0, "segments": 1})
        rows["units"] += [{**u, "path": name, "night": nights[0]} for u in units]
        rows["calls"] += [{**c, "path": name, "night": nights[0]} for c in calls]
        rows["server_sessions"].append({"session_id": f"{run_id}/1", "run_id": run_id,
                                        "segment": 1, "path": name, "how": "attached",
                                        **session})
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        for table, items in rows.items():
            frame = pd.DataFrame(items)  # noqa: F841  (read by DuckDB by name)
            cols = ", ".join(frame.columns)
            con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM frame")
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        got = dict(con.execute(f"SELECT run_id, disturbed FROM ({DISTURBED})").fetchall())
    return {run_id.rsplit("/", 1)[1]: why for run_id, why in got.items()}


def test_slots_kept_full_and_busy_are_not_starved(tmp_path):
    assert _disturbed(tmp_path, {"full": {"lanes": (4, 10), "busy": 0.95}}) == {"full": None}


def test_idle_slots_while_dualpath_kept_them_full_are_the_harness(tmp_path):
    # 4 lanes × 10 units of 10 s; the server's timings cover 2.34 s of each: the window is
    # the first call to the last unit's start (0-90 s), busy 0.234 of 4 × 90 slot-seconds
    got = _disturbed(tmp_path, {"backup": {"lanes": (4, 10), "busy": 0.234}})
    assert got == {"backup": "starved: slots busy 23% of the time units waited to start, "
                             "while dualpath kept them full — the harness's machine, not the "
                             "server, set the pace"}


def test_a_harness_slow_to_send_the_next_call_is_starved_too(tmp_path):
    # each slot holds a request 6 s of every 10 (the harness was slow to send the next one),
    # and the server served 3.12 s of it: 31% busy, requests held for 60% of the slot time
    got = _disturbed(tmp_path, {"backup": {"lanes": (4, 10), "busy": 0.52, "in_flight": 0.6}})
    assert got == {"backup": "starved: slots busy 31% of the time units waited to start, "
                             "while dualpath held requests for 60% of them — the harness's "
                             "machine, not the server, set the pace"}


def test_a_real_server_idle_because_the_last_units_are_finishing_is_not_starved(tmp_path):
    # 4 lanes × 5 units, lane 0's last unit running 100 s while the other slots have nothing
    # left: over the whole run the slots are busy (3 × 50 + 40 + 100) × 0.95 / (4 × 140) =
    # 0.49, but while units waited to start (0-40 s) they were busy 0.95 of the time
    got = _disturbed(tmp_path, {"tail": {"lanes": (4, 5), "busy": 0.95, "tail_s": 100.0}})
    assert got == {"tail": None}


@pytest.mark.parametrize("session, reason", [
    ({"unanswered_s": 20.0}, "stalled: the server answered nothing for 20 s"),
    ({"external_load_max": 2, "external_load_polls": 3},
     "shared: up to 2 request(s) on the server were not this run's"),
])
def test_idle_slots_another_disturbance_explains_are_not_blamed_on_the_harness(
        tmp_path, session, reason):
    got = _disturbed(tmp_path, {"backup": {"lanes": (4, 10), "busy": 0.2, "session": session}})
    assert got == {"backup": reason}


def test_runs_without_server_timings_or_a_window_to_judge_are_not_judged(tmp_path):
    got = _disturbed(tmp_path, {
        "untimed": {"lanes": (4, 10), "busy": 0.1, "timed": False},   # an engine with none
        "one_wave": {"lanes": (4, 1), "busy": 0.1},                    # every unit at once
    })
    assert got == {"untimed": None, "one_wave": None}


def test_a_night_at_a_clock_too_fast_for_the_harness_is_starved_end_to_end(tmp_path):
    """At --clock 0.01 a simulated call's service is 0.2-0.5 ms, less than one call's harness
    work (HTTP both ways, journal) on any machine: both runs are starved, shown with the
    reason and kept out of the medians (`_disturbance` checks all three)."""
    from dualpath.config import load_config
    from dualpath.sim.fleet import SimFleet
    from tests.helpers import ingest, score_night_plain
    from tests.test_disturbed import _disturbance

    # 20 units: enough for the main path's 8 slots to leave a window in which units waited
    cfg_path, _, nights = make_project(tmp_path, tickers=10, draws=2, nights=1, clock=0.01)
    cfg = load_config(cfg_path)
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    got = _disturbance(cfg)
    assert set(got) == {"main", "backup"}
    for why in got.values():
        assert why.startswith("starved: slots busy ") and " of the time units waited to " \
            "start, while dualpath " in why and why.endswith(
                " — the harness's machine, not the server, set the pace")


def test_the_demo_says_how_to_get_truthful_seconds():
    from dualpath.cli.night import starved_warning

    assert starved_warning(9, 40, 0.3) == (
        "9 of 40 runs were starved: this machine was too busy for the simulated clock "
        "(--clock 0.3), so their slots sat idle more than they worked and their seconds read "
        "slow; they are shown in `dualpath runs` and kept out of every speed median, and the "
        "others, on the same busy machine, may read slow too. Rerun on a quieter machine or "
        "with a slower clock (`dualpath demo --clock 1`: each night takes longer, the seconds "
        "come out truer)")
    assert "`dualpath demo --clock 3`" in starved_warning(1, 2, 1.0)


def _seeded_with_a_starved_night(root, which=(3,)):
    """The seeded warehouse (`tests.seeded`), each run with its server session, and the
    backup runs of the nights `which` played as a starved harness would: every client
    interval three times as long, the server's own timings unchanged (slots busy 0.967 / 3
    of the time)."""
    from tests.seeded import seed_warehouse

    cfg_path, cfg, nights = seed_warehouse(root)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("INSERT INTO server_sessions (session_id, run_id, segment, path, how) "
                    "SELECT run_id || '/1', run_id, 1, path, 'simulated' FROM runs")
        for i in which:
            run_id = f"demo/{nights[i]}/backup"
            t0 = con.execute("SELECT min(start_wall) FROM calls WHERE run_id = ?",
                             [run_id]).fetchone()[0]
            stretch = (f"start_wall = {t0} + 3 * (start_wall - {t0}), "
                       f"end_wall = {t0} + 3 * (end_wall - {t0})")
            con.execute(f"UPDATE calls SET {stretch}, latency_s = 3 * latency_s "
                        "WHERE run_id = ?", [run_id])
            con.execute(f"UPDATE units SET {stretch}, seconds = 3 * seconds WHERE run_id = ?",
                        [run_id])
            con.execute("UPDATE runs SET wall_s = 3 * wall_s WHERE run_id = ?", [run_id])
    return cfg_path


STARVED_ROWS = """\
2027-05-03  main    complete     16      16         0       0        0        62     248                        
2027-05-04  backup  complete     16      16         0       0        0     1,053   2,106  starved, busy 32%     
2027-05-04  main    complete     16      16         0       0        0        60     240                        
"""

STARVED_WARNING = (
    "warning: demo/2027-05-04/backup: starved: slots busy 32% of the time units waited to "
    "start, while dualpath kept them full — the harness's machine, not the server, set the "
    "pace; its speed is not a measurement (shown, kept out of every speed median)\n")

STARVED_HEADLINE_SPEED = """\
Speed — how much slower is backup?  5.7× slower than main (95% CI 5.4×–6.0×, 8 paired nights)
  throughput basis (run wall clock ÷ tickers): backup 347 s/ticker, main 61 s/ticker (medians)
  a night of 8 tickers × 2 draws (this experiment's): backup 46 min, main 8 min
  projected to 100 tickers × 2 draws: backup 9.6 h, main 1.7 h
  left out: 1 disturbed run(s) (backup 1); `dualpath runs` says why
"""

STARVED_SPEED_ROWS = """\
backup     8                      1                 0                   1                      347                  173.5                     694          0.000
main      10                      0                 0                   0                       61                   30.5                     244          0.000
"""


def test_a_starved_run_is_shown_with_its_reason_and_left_out_of_the_medians(tmp_path):
    """Its row shows its own (3x) seconds and why; the warning names it; the medians and the
    slowdown come from the other 8 backup nights (345, 345, 345, 347, 347, 349, 349, 351:
    347), the speed table counting it as disturbed."""
    from tests.test_glance import dualpath

    cfg_path = str(_seeded_with_a_starved_night(tmp_path))
    runs = dualpath("runs", "-c", cfg_path)
    assert STARVED_ROWS in runs.stdout
    assert runs.stderr.startswith(STARVED_WARNING)
    out = dualpath("metrics", "-c", cfg_path).stdout
    assert STARVED_HEADLINE_SPEED in out
    assert STARVED_SPEED_ROWS in out


def test_a_path_whose_every_run_was_starved_has_no_speed_and_says_why(tmp_path):
    """The trial's loaded machine starved nearly every run: the headline gives no slowdown
    from what is left, and says how many runs it left out (9 complete backup runs; the
    tenth is partial)."""
    from tests.test_glance import dualpath

    cfg_path = str(_seeded_with_a_starved_night(tmp_path, which=range(10)))
    out = dualpath("metrics", "-c", cfg_path, columns=100).stdout
    assert ("Speed — how much slower is backup?  unknown: no undisturbed one-segment run on "
            "both paths yet\n  left out: 9 disturbed run(s) (backup 9); `dualpath runs` says "
            "why\nEnergy — how much energy per ticker?  unknown: no complete undisturbed run on "
            "both paths yet\n\n") in out
