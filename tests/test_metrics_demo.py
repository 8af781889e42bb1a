"""Metrics over a real small warehouse: the tables exist, partial runs are kept out."""

from dualpath.sim.fleet import SimFleet
from dualpath.evals.report import compute_metrics
from tests.helpers import ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader
from dualpath.warehouse.frames import calls_frame, prices_frame, runs_frame, units_frame


def test_metrics_from_a_warehouse_with_a_partial_run(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=8, draws=2, nights=3)
    with SimFleet(cfg) as fleet:
        for n in nights[:2]:
            ingest(cfg, score_night_plain(cfg, n, fleet.urls))
        ingest(cfg, score_night_plain(cfg, nights[2], fleet.urls, stop_after_units=3))
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        units = units_frame(con, cfg.experiment.name)
        calls = calls_frame(con, cfg.experiment.name)
        runs = runs_frame(con, cfg.experiment.name)
        prices = prices_frame(con)
    m = compute_metrics(units, calls, runs, prices, [1, 5, 20], ("main", "backup"), seed=1)
    # the cut-short night is in no quality metric
    assert set(m.nightly_ic["night"]) == set(units[units.run_status == "complete"]["night"])
    assert m.rank_ic.set_index(["path", "horizon"]).loc[("main", 1), "nights"] == 2
    assert any("partial" in n for n in m.notes)
    assert set(m.self_agreement["path"]) == {"main", "backup"}
    # speed: partial runs are shown but are not results. At this compressed clock the
    # harness sets the pace (`starved`), so the complete runs are shown apart too: the
    # medians are over the undisturbed runs, of which there may be none
    sr = m.speed_runs
    complete = sr["status"].eq("complete")
    assert complete.sum() == 4 and (~complete).sum() == 2
    assert (sr["is_result"] == (complete & sr["disturbed"].isna())).all()
    assert sr.loc[complete & ~sr["is_result"], "disturbed"].str.startswith("starved: ").all()
    sp = m.speed.set_index("path")
    assert (sp["not_complete_excluded"] == 1).all()
    assert (sp["runs"] + sp["disturbed_excluded"] == 2).all()
    per_path = sr[complete].groupby("path")
    assert (per_path["calls_per_unit"].median() == 17).all()
    ticker_s = per_path["throughput_s_per_ticker"].median()
    assert ticker_s["backup"] > ticker_s["main"]
    assert not per_path["per_call_decode_tps"].median().isna().any()
    assert len(m.comparison) == 3


def test_comparison_plot_is_written(tmp_path):
    import pandas as pd
    from dualpath.evals.plots import plot_comparison
    from dualpath.evals.report import Metrics
    nights = pd.date_range("2027-01-04", periods=5, freq="B")
    ic = pd.concat([pd.DataFrame({"night": nights, "path": p, "horizon": 1, "ic": v,
                                  "n_tickers": 20, "status": "ok"})
                    for p, v in (("main", 0.1), ("backup", 0.05))])
    runs = pd.DataFrame({"path": ["main", "backup"], "night": [nights[0]] * 2, "is_result": True,
                         "throughput_s_per_ticker": [25.0, 172.0]})
    m = Metrics(ic, runs, {"comparison": pd.DataFrame([{"a": "main", "b": "backup"}])})
    out = plot_comparison(m, tmp_path / "c.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
