"""Each night read with the draws it was scored with (`evals.draws`): a path's draws changed
between nights leave the stored nights' speed and energy as they were, the ratio compares
per unit where paired runs' draws differ, the change is named, and the draws table measures
each k only on the nights scored with at least k draws."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dualpath.config import dump_toml, load_config
from dualpath.demo import demo_config_data
from dualpath.evals import draws as rd
from dualpath.evals import energy
from dualpath.flows.demo import synthetic_project
from tests.cli_run import run_cli

N = [pd.Timestamp("2026-03-02"), pd.Timestamp("2026-03-03"), pd.Timestamp("2026-03-04")]


def test_a_runs_draws_are_its_units_over_its_tickers():
    runs = pd.DataFrame({"units_planned": [16, 24, 10, 5], "tickers_planned": [8, 8, None, 0]})
    got = rd.run_draws(runs).tolist()
    assert got[:2] == [2.0, 3.0] and math.isnan(got[2]) and math.isnan(got[3])


def _frame(rows):
    """rows: (night index, path, draws, s/ticker); s/unit = s/ticker ÷ draws."""
    return pd.DataFrame([{"night": N[i], "path": p, "draws": d, "s_t": s, "s_u": s / d}
                         for i, p, d, s in rows])


def test_the_ratio_is_per_ticker_while_paired_draws_agree_and_per_unit_once_they_differ():
    # nights 1-2: main 3, backup 3 draws, backup 600 s/ticker, main 100: 6× per ticker
    same = _frame([(0, "main", 3, 100.0), (0, "backup", 3, 600.0),
                   (1, "main", 3, 100.0), (1, "backup", 3, 600.0)])
    logs, per = rd.paired_logs(same, "main", "backup", "s_t", "s_u", {"main": 3, "backup": 2})
    assert per == "ticker" and np.exp(logs) == pytest.approx([6.0, 6.0])
    # night 3 the backup scores 2 draws at 400 s/ticker = 200 s/unit against main's 33.3:
    # per unit 6× on every night, where per ticker night 3 would read 4×
    mixed = pd.concat([same, _frame([(2, "main", 3, 100.0), (2, "backup", 2, 400.0)])])
    logs, per = rd.paired_logs(mixed, "main", "backup", "s_t", "s_u", 3)
    assert per == "unit" and np.exp(logs) == pytest.approx([6.0, 6.0, 6.0])


def test_a_change_of_draws_is_found_and_named():
    f = _frame([(0, "main", 3, 1.0), (0, "backup", 2, 1.0), (1, "main", 3, 1.0),
                (1, "backup", 2, 1.0), (2, "main", 3, 1.0), (2, "backup", 3, 1.0)])
    steps = rd.changes(f, ("backup", "main"))
    assert steps == {"backup": [(N[2], 2, 3)]}
    assert rd.change_line(steps) == ("  draws changed mid-study: backup 2 → 3 from 2026-03-04; "
                                     "each night read at its own draws")
    assert rd.now_draws(f, ("backup", "main"), {"backup": 9, "main": 9}) == \
        {"backup": 3, "main": 3}
    assert rd.change_line({}) is None


def test_energy_reads_each_run_at_its_own_draws_not_the_configs():
    """Backup 60 kJ/ticker at 2 draws (30 kJ/unit) on nights 1-2, 90 kJ at 3 (30 kJ/unit) on
    night 3; main 30 kJ at 3 draws (10 kJ/unit): 3× per unit every night, whatever the
    config says now; a 100-ticker night at the backup's 3 draws now is 100 × 3 × 30 kJ =
    2.5 kWh, main's 100 × 30 kJ = 0.83 kWh."""
    rows = [(0, "backup", 2, 60e3), (1, "backup", 2, 60e3), (2, "backup", 3, 90e3)] + \
        [(i, "main", 3, 30e3) for i in range(3)]
    runs = pd.DataFrame([{"path": p, "night": N[i], "is_result": True, "draws": d,
                          "j_per_ticker": j, "j_per_unit": j / d,
                          "j_above_idle_per_ticker": j / 2, "idle_w": 30.0,
                          "energy_unknown": None} for i, p, d, j in rows])
    for config in ({"main": 3, "backup": 2}, {"main": 3, "backup": 3}, 2):
        e = energy.compare(runs, "main", "backup", config, 100)
        assert (e.ratio, e.nights, e.per) == (pytest.approx(3.0), 3, "unit")
        assert e.kwh == pytest.approx({"backup": 2.5, "main": 30e3 * 100 / 3.6e6})
        assert e.draws_changed == {"backup": [(N[2], 2, 3)]}


def test_the_draws_table_measures_k_3_only_on_nights_scored_with_3():
    """Night 1 scored with 2 draws, night 2 with 3; every grade = the ticker's rank, so every
    subset's IC is the same, Spearman's of the tied grades against the returns. k = 3 exists on night 2 alone: before, a
    2-draw night's "mean of draws 1-3" was the mean of its 2 and counted as k = 3."""
    from dualpath.evals.signal import subset_ics

    tickers = [f"T{i:02d}" for i in range(20)]
    units = pd.DataFrame([{"run_id": f"r{n}", "path": "backup", "night": N[n], "ticker": t,
                           "draw": d, "grade": 1 + i // 4}
                          for n, draws in ((0, 2), (1, 3)) for d in range(1, draws + 1)
                          for i, t in enumerate(tickers)])
    returns = pd.DataFrame([{"night": N[n], "ticker": t, "horizon": 1, "fwd_return": i / 100,
                             "status": "ok"} for n in (0, 1) for i, t in enumerate(tickers)])
    got = subset_ics(units, returns, pd.Series({"r0": 2.0, "r1": 3.0})).set_index("k")
    assert got["nights"].to_dict() == {1: 2, 2: 2, 3: 1}
    ic = stats.spearmanr([1 + i // 4 for i in range(20)], range(20))[0]     # ties: 0.981
    assert got["mean_ic"].tolist() == pytest.approx([ic, ic, ic])


def _figures(doc: dict) -> dict:
    """What `metrics -f json` says of speed and energy: the headline's rows and lines for
    both, and the speed table."""
    lines = doc["headline"]
    start = next(i for i, x in enumerate(lines) if x.startswith("Speed —"))
    rows = [r for r in doc["tables"]["headline"] if r["question"] in ("speed", "energy")]
    return {"lines": lines[start:], "rows": rows, "speed": doc["tables"]["speed"]}


def _metrics(cfg_path) -> dict:
    r = run_cli("metrics", "-c", cfg_path, "-f", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_nights_scored_at_2_backup_draws_read_the_same_after_the_config_moves_to_3(tmp_path):
    """Two nights at main 3 / backup 2 draws (`tests.seeded`: main 60-62 s/ticker, backup
    345-351), then backup 3 in the config: the two stored nights' speed and energy in
    `metrics -f json` are what they were (the config's draws once re-divided them: per unit
    (345/2)/(60/3) = 8.6× read per ticker 5.75×). A third night at 3 draws joins per unit
    and the change is named beside the figures."""
    from dualpath.evals.speed import with_speed
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.queries import run_summaries
    from tests.seeded import seed_nights

    data = demo_config_data(tmp_path, 8, 2, 0.01)
    data["paths"]["main"]["draws"] = 3
    cfg_path, cfg, market, _ = synthetic_project(tmp_path, data, 3)
    nights = market.nights(3)
    seed_nights(cfg, nights[:2], {"main": 3, "backup": 2})
    before = _figures(_metrics(cfg_path))
    # nights 0 and 1 per unit: backup 345/2 and 347/2 s, main 60/3 and 61/3 s
    ratio = math.sqrt((345 / 2) / (60 / 3) * (347 / 2) / (61 / 3))
    assert before["rows"][0]["estimate"] == pytest.approx(ratio)
    assert before["rows"][0]["detail"] == "2 paired nights"
    data["paths"]["backup"]["draws"] = 3
    cfg_path.write_text(dump_toml(data) + "\n")
    assert _figures(_metrics(cfg_path)) == before

    seed_nights(load_config(cfg_path), nights[2:], {"main": 3, "backup": 3}, first=2)
    doc = _metrics(cfg_path)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        runs = with_speed(run_summaries(con))
    assert runs.groupby("path")["draws"].apply(list).to_dict() == {
        "backup": [2.0, 2.0, 3.0], "main": [3.0, 3.0, 3.0]}
    # night 2 per unit: backup 349/3, main 62/3
    ratio3 = (ratio ** 2 * (349 / 3) / (62 / 3)) ** (1 / 3)
    speed = next(r for r in doc["tables"]["headline"] if r["question"] == "speed")
    assert speed["estimate"] == pytest.approx(ratio3) and speed["detail"] == "3 paired nights"
    lines = doc["headline"]
    at = next(i for i, x in enumerate(lines) if x.startswith("Speed —"))
    assert lines[at + 1:at + 3] == [
        "  per unit (run wall clock ÷ ticker-draws), each night at the draws it was scored with",
        f"  draws changed mid-study: backup 2 → 3 from {nights[2]}; each night read at its "
        "own draws"]
    at = next(i for i, x in enumerate(lines) if x.startswith("Energy —"))
    assert lines[at].endswith(", 3 paired nights) per") and lines[at + 1] == "  unit"
    # the change is data too, and the result still holds every number the text prints
    import jsonschema

    from dualpath.evals.result import schema
    from tests.test_result import _unmatched

    jsonschema.validate(doc["result"], schema())
    assert doc["result"]["speed"]["draws_changed"] == {
        "backup": [{"night": str(nights[2]), "before": 2, "after": 3}]}
    assert _unmatched("\n".join(lines).replace("\n    ", " ").splitlines(), doc["result"]) == []
    # the weekly report and the viewer's overview say it beside the same figures
    from dualpath.viewer.headline import headline as overview

    named = next(x for x in lines if "draws changed" in x)
    assert named in overview(load_config(cfg_path)).lines
    r = run_cli("report", "-c", cfg_path, "--out", tmp_path / "reports")
    assert r.returncode == 0, r.stderr
    assert named.strip() in next((tmp_path / "reports").glob("*.md")).read_text()
