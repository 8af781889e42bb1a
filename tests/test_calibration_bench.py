"""The calibration bench simulates vectorised, so it must equal the project's own functions on
the replicates it checks, and its power table must say what the plan predicts."""

import importlib.util
from pathlib import Path

import numpy as np


def bench():
    path = Path(__file__).parents[1] / "bench" / "calibration.py"
    spec = importlib.util.spec_from_file_location("calibration_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_vectorised_panels_equal_the_projects_ics_and_verdicts():
    b = bench()
    sim = b.simulate(np.random.default_rng(1), 4)
    b.check_against_project(sim, b.ics(sim), reps=2)       # raises on any difference


def test_power_rows_hold_simulated_and_predicted_power(capsys):
    b = bench()
    b.main(60, 3, quick=True)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    keys = [kv.split("=")[0] for kv in last.split()]
    assert keys == ["worst_reject", "worst_coverage", "cells", "worst_power_gap",
                    "worst_seq_reject", "icr_worst_reject", "icr_worst_coverage", "nights_to_decide_equal",
                    "nights_to_decide_noise", "nights_to_decide_noise_main3", "noise_rate_gap",
                    "slowdown_drift_coverage",
                    "pilot5_power_gap", "pilot10_power_gap", "dgps", "icr_seq_size_20",
                    "icr_seq_size_100", "planner_power_worst", "nights_to_decide_worst_dgp",
                    "slowdown_drift08_coverage"]
    figures = dict(kv.split("=") for kv in last.split())
    assert int(figures["dgps"]) >= 3
    assert all(0 <= float(figures[k]) <= 1 for k in ("icr_seq_size_20", "icr_seq_size_100",
                                                      "planner_power_worst",
                                                      "slowdown_drift08_coverage"))
    size, power = b.run(60, 3)
    assert set(zip(power["h"], power["n"])) == {(1, 20), (1, 30), (5, 20), (5, 30)}
    assert (power["pred_ni_0"].between(0, 1)).all() and (power["gap"] >= 0).all()


def test_interchange_bench_equals_the_project_and_prints_its_cells():
    icr = bench().icr_bench()
    icr.check_against_project(np.random.default_rng(2), reps=2)   # raises on any difference
    r = icr.run(20, 3)
    cells = r["size"]
    assert set(cells[cells["status"] == "reported"]["draws"]) == {2, 3}
    assert set(cells[cells["draws"] == 1]["status"]) == {"not estimable (main needs 2 draws)"}
    assert 0 <= r["worst_reject"] <= 1 and 0 <= r["worst_coverage"] <= 1


def test_slowdown_bench_runs_the_projects_interval_on_every_cell():
    speed = bench().icr_bench("calibration_speed")
    t = speed.run(50, 4)
    assert set(zip(t["scenario"], t["nights"])) == {
        (s, n) for s in ("independent", "drift", "drift08", "drift08_t3", "runaways")
        for n in (5, 10, 20, 30)}
    assert t["coverage"].between(0, 1).all() and t["df"].tolist()[:4] == [4, 4, 4, 4]
    assert 0 <= speed.drift_coverage(t) <= 1
    assert 0 <= speed.drift_coverage(0.8, 5, 0.07, reps=200, seed=1, heavy=True) <= 1
    assert speed.report(t, 50, drift08=0.5)[-1].split()[1] == "slowdown_drift08_coverage=0.500"


def test_pilot_bench_drafts_with_the_projects_power_and_prints_both_kinds():
    pilot = bench().icr_bench("calibration_pilot")
    r = pilot.run(20, 5)
    assert set(zip(r["pilot_nights"], r["power"])) == {
        (n, k) for n in (5, 10) for k in ("predictive", "plug-in")}
    assert r[["claimed", "delivered"]].stack().between(0, 1).all()
    assert set(pilot.gaps(r)) == {5, 10}


def test_dgp_bench_equals_the_project_and_reads_every_dgp():
    d = bench().icr_bench("calibration_dgps")
    d.check_against_project(np.random.default_rng(6))     # raises on any difference
    r = d.run(8, size_reps=40, pilots=1, true_panels=20)
    assert set(r["size"]["dgp"]) == {"gaussian", "heavy", "tied"} == set(r["plan"]["dgp"])
    assert set(r["size"]["tickers"]) == {20, 100} and r["dgps"] == 3

