"""Energy per run, stored and shown: a simulated night's joules in the warehouse, a GPU change
mid-night disturbing the run (out of speed and energy medians), no counters stored as unknown
(NULL, never 0), a night's samples well under 1 MB, and the energy ratio's interval
calibrated by simulation and cross-checked against scipy."""

from __future__ import annotations

import os

import duckdb
import numpy as np
import orjson
import pandas as pd
import pytest
from scipy import stats

from dualpath.evals.energy import compare, energy_lines, paired_ratio
from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader, writer
from dualpath.warehouse.energy import energy_runs_frame, store_telemetry
from dualpath.warehouse.migrations import migrate
from dualpath.warehouse.queries import speed_runs


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    cfg_path, cfg, nights = make_project(tmp_path_factory.mktemp("energy"), tickers=3,
                                         draws=1, nights=1, clock=0.01)
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, nights[0], fleet.urls)
    ingest(cfg, works)
    return cfg, works


def _frame(cfg):
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        return energy_runs_frame(con, cfg.experiment.name).set_index("path")


def test_a_simulated_night_stores_each_paths_joules_and_idle_floor(night):
    cfg, _ = night
    e = _frame(cfg)
    for path in ("main", "backup"):
        p = cfg.paths[path].power
        assert e.loc[path, "energy_basis"] == "counter" and e.loc[path, "joules"] > 0
        assert e.loc[path, "idle_w"] == pytest.approx(p.idle_w, rel=1e-3)
        # the mean lies between the idle floor and every slot busy
        assert p.idle_w <= e.loc[path, "mean_w"] <= p.idle_w + p.w_per_busy_slot * cfg.paths[path].slots
        assert e.loc[path, "gpu_changes"] is None


def _rewrite(cfg, works, path, fn):
    w = next(w for w in works if w.path == path)
    f = w.journal.parent / "telemetry.jsonl"
    recs = [fn(orjson.loads(x)) for x in f.read_bytes().splitlines()]
    f.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    ingest(cfg, works)


@pytest.mark.parametrize("change", [
    "power limit changed on GPU 0: 210 → 150 W",
    "PCIe link retrained narrower on GPU 0: Gen5 x16 → Gen5 x4",
    "another process (pid 4242) on GPU 0, 2048 MiB"])
def test_a_gpu_change_disturbs_the_run_and_keeps_it_out_of_the_medians(night, change):
    cfg, works = night
    def changed(r):
        r["summary"]["changes"] = [change]
        return r
    _rewrite(cfg, works, "backup", changed)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        kept = speed_runs(con)["path"].tolist()
        from dualpath.warehouse.disturbed import DISTURBED
        why = dict(con.execute(f"SELECT run_id, disturbed FROM ({DISTURBED})").fetchall())
    assert kept == ["main"]
    assert why[works[1].run_id if works[1].path == "backup" else works[0].run_id] == "gpu: " + change
    _rewrite(cfg, works, "backup", lambda r: {**r, "summary": {**r["summary"], "changes": []}})


def test_no_counters_is_stored_as_unknown_never_zero(night):
    cfg, works = night
    saved = {}
    def unknown(r):
        saved.update(r)
        return {k: v for k, v in r.items() if k not in ("summary", "info")} | {
            "unknown": "NVML could not start: NVML Shared Library Not Found"}
    _rewrite(cfg, works, "main", unknown)
    e = _frame(cfg)
    assert pd.isna(e.loc["main", "joules"])
    assert e.loc["main", "energy_unknown"] == "NVML could not start: NVML Shared Library Not Found"
    _rewrite(cfg, works, "main", lambda r: saved)


def test_a_twelve_hour_nights_samples_stay_under_one_megabyte(tmp_path):
    """2048 rows (the most a segment keeps, however long its night) of a path's samples."""
    def size(rows: int) -> int:
        f = tmp_path / f"w{rows}.duckdb"
        con = duckdb.connect(str(f))
        migrate(con)
        rng = np.random.default_rng(3)
        rec = {"run_id": "e/2027-01-04/backup", "segment": 1, "host": "h", "gpus": [0],
               "summary": {"source": "nvml", "basis": "counter", "joules": 1e7,
                           "seconds": 43200, "idle_w": 117.0, "idle_s": 5, "samples": 432000,
                           "peak_w": 700, "changes": [],
                           "buckets": [[i * 32.0, 32.0, *rng.uniform(100, 700, 2).tolist(),
                                        *rng.uniform(1e4, 9e4, 1).tolist(), 1980.0, 61.0]
                                       for i in range(rows)]}}
        d = tmp_path / "j" / str(rows)
        d.mkdir(parents=True)
        (d / "telemetry.jsonl").write_bytes(orjson.dumps(rec, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        store_telemetry(con, [d / "journal.jsonl"])
        con.execute("CHECKPOINT")
        con.close()
        return os.path.getsize(f)
    assert size(2048) - size(1) < 1_000_000


def _energy(pairs, price=None):
    rows = []
    for night, (c, b) in enumerate(pairs):
        for path, j in (("backup", c), ("main", b)):
            rows.append({"run_id": f"e/{night}/{path}", "path": path, "night": night,
                         "is_result": True, "j_per_ticker": j, "j_above_idle_per_ticker": j / 2,
                         "mean_w": 150.0, "idle_w": 30.0 if path == "backup" else 70.0,
                         "energy_unknown": None,
                         # the AMD card's power integrated (no energy1_input), the other's
                         # counter; the backup's bound 0.4% one night, 0.9% the other
                         "energy_basis": "sampled" if path == "backup" else "counter",
                         "energy_hz": 10.0 - night if path == "backup" else None,
                         "energy_error_pct": (0.004, 0.009)[night % 2]
                         if path == "backup" else None})
    return compare(pd.DataFrame(rows), "main", "backup", 2, 100, price=price, currency="USD")


def test_the_energy_line_states_ratio_basis_night_and_money():
    # nightly ratios 2.0 and 2.0: geometric mean 2.0, a zero-width interval
    e = _energy([(80_000.0, 40_000.0), (60_000.0, 30_000.0)], price=0.25)
    assert energy_lines(e, "backup") == [
        "Energy — how much energy per ticker?  backup 2.00× main (95% CI 2.00×–2.00×, "
        "2 paired nights)",
        "  board energy, scoring only, idle floor included: backup 70.0 kJ, main 35.0 kJ per "
        "ticker (medians)",
        # 70 kJ × 100 / 3.6 MJ = 1.94 kWh; × 0.25 = 0.49
        "  a night of 100 tickers × 2 draws: backup 1.94 kWh (0.49 USD), main 0.97 kWh (0.24 USD)",
        "  idle floor: backup 30 W, main 70 W; above it: backup 35.0 kJ/ticker, main "
        "17.5 kJ/ticker",
        # the slowest sampling (9 Hz the second night) and the widest bound (0.9%)
        "  measured: backup by power sampled at 9 Hz and integrated (error ≤ 0.9%); main by "
        "the GPU's energy counter"]


def test_the_energy_ratios_interval_covers_at_its_level_and_matches_scipy():
    rng = np.random.default_rng(20261201)
    hits, n, true = 0, 10, 1.8
    for _ in range(4000):
        # nights vary (a night's prompts move both paths) and so does each ratio
        logs = np.log(true) + rng.standard_t(5, n) * 0.15
        _, lo, hi = paired_ratio(logs)
        hits += lo <= true <= hi
    assert 0.94 <= hits / 4000 <= 0.96
    base = rng.uniform(20_000, 40_000, n)
    e = _energy(list(zip(base * np.exp(logs), base)))
    ci = stats.ttest_1samp(logs, 0).confidence_interval(0.95)
    assert e.nights == n
    assert (e.lo, e.hi) == pytest.approx((np.exp(ci.low), np.exp(ci.high)))


def test_runs_carry_each_runs_energy_in_wide_and_json(tmp_path):
    """The seeded warehouse's backup night 0: 190 W × 345 s/ticker = 65,550 J/ticker."""
    import json

    from tests.cli_run import run_cli
    from tests.seeded import seed_warehouse

    cfg_path, _, _ = seed_warehouse(tmp_path)
    ran = run_cli("runs", "-c", cfg_path, "-f", "json")
    assert ran.returncode == 0, ran.stderr
    out = ran.stdout
    first = json.loads(out)["runs"][0]
    assert (first["path"], first["j_per_ticker"], first["mean_w"], first["idle_w"]) == \
        ("backup", 65550.0, 190.0, 30.0)
    assert first["energy_unknown"] is None
