"""The registry of tables: every declared column is what its measure returns, a drift is an
error, and the one formatter and the one speed definition hold."""

from __future__ import annotations

import pandas as pd
import pytest

from dualpath.evals.format import cell
from dualpath.evals.result import headline_table
from dualpath.evals.registry import TableDrift, registered
from dualpath.flows.glance import metrics_and_headline
from tests.seeded import seed_warehouse


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    root = tmp_path_factory.mktemp("seeded")
    cwd = pd.io.common.os.getcwd()
    pd.io.common.os.chdir(root)
    try:
        cfg_path, cfg, _ = seed_warehouse(root)
        m, h = metrics_and_headline(cfg)
        return cfg, m, h
    finally:
        pd.io.common.os.chdir(cwd)


def test_every_registered_table_declares_exactly_what_its_measure_returns(seeded):
    cfg, m, h = seeded
    tables = registered()
    assert list(tables) == ["headline", "comparison", "rank_ic", "cross_path",
                            "self_agreement", "draws", "signal_shape", "by_grade", "grades",
                            "speed", "serving"]
    for key, spec in tables.items():
        frame = headline_table(h) if key == "headline" else getattr(m, key)
        assert len(frame), key
        assert list(frame.columns) == list(spec.columns) or \
            sorted(frame.columns) == sorted(spec.columns), key
        assert set(spec.shown()) <= set(spec.columns), key
        assert spec.measure is not None, key
        spec.select(frame)      # raises on drift


def test_a_renamed_column_is_an_error_not_a_dropped_column(seeded):
    _, m, _ = seeded
    spec = registered()["speed"]
    renamed = m.speed.rename(columns={"slot_latency_s_per_unit": "slot_latency_s"})
    with pytest.raises(TableDrift, match=r"\['slot_latency_s'\].*\['slot_latency_s_per_unit'\]"):
        spec.select(renamed)
    with pytest.raises(TableDrift):
        spec.select(m.speed.drop(columns=["resumed_excluded"]))


def test_footnotes_name_only_the_columns_shown(seeded):
    _, m, _ = seeded
    spec = registered()["speed"]
    brief = spec.select(m.speed, wide=False)
    notes = spec.footnotes(brief)
    assert any(n.startswith("slot_latency_s_per_unit: s/unit, slot-latency basis") for n in notes)
    assert not any(n.startswith("per_call_decode_tps") for n in notes)   # not shown brief
    assert any(n.startswith("per_call_decode_tps") for n in spec.footnotes(spec.select(m.speed, True)))


def test_one_formatter_for_people():
    assert [cell(v) for v in (160.0, 185400.0, 690.0000001, 173.5, 12.34, 0.25, 0.0)] == \
        ["160", "185,400", "690", "173.5", "12.3", "0.250", "0.000"]
    assert cell(3.2e-7) == "3.20e-07" and cell(None) == "—" and cell(float("nan")) == "—"
    assert cell(True) == "yes" and cell(pd.Timestamp("2027-05-03")) == "2027-05-03"
    assert cell(5.69, "x") == "5.7×" and cell(4.0, "int") == "4"


def test_one_definition_of_seconds_per_ticker():
    """`grep` finds one computation of per-ticker seconds: evals.speed.seconds."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    hits = []
    for f in [*root.glob("evals/**/*.py"), *root.glob("flows/*.py"), *root.glob("warehouse/*.py"),
              *root.glob("dualpath/**/*.py"), *root.glob("viewer/*.py")]:
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if re.search(r"wall_s\s*/\s*(nullif\()?\(?\s*(r\.)?(units|tickers|n\b|coalesce)", line) \
                    or re.search(r"def \w*(per_ticker|ticker_seconds)\w*\(", line):
                hits.append(f"{f.relative_to(root)}:{i}")
    assert hits == [], hits


def test_a_decided_verdict_prints_its_interval_and_power_within_100_columns():
    from dualpath.evals.headline import quality_lines
    from dualpath.evals.verdict import PrimaryVerdict

    v = PrimaryVerdict(
        label="confirmatory", label_text="confirmatory", reasons=(), baseline="main",
        candidate="backup", horizon=5, test="non-inferiority", margin=0.03, alpha=0.05,
        verdict="non-inferior", decided=True, estimate=0.004, ci_low=-0.012, ci_high=0.020,
        ci_level=0.90, ci_text="90% two-sided t interval on 20 non-overlapping nights, df=19",
        power=0.83, power_text="to show non-inferiority if ΔIC = 0", n_independent=20,
        nights_analysed=96, window_nights=96, note="")
    assert quality_lines(v) == [
        "RankIC — is backup's signal as good as main's?  non-inferior  [confirmatory]",
        "  ΔIC = IC(backup) − IC(main) at h=5: +0.004, 90% CI [-0.012, +0.020]; margin δ = 0.030",
        "  (90% two-sided t interval on 20 non-overlapping nights, df=19)",
        "  power 0.83 to show non-inferiority if ΔIC = 0"]
    assert all(len(line) <= 100 for line in quality_lines(v))


def test_an_inconclusive_verdict_says_which_end_of_its_interval_kept_it_open():
    """A well-powered study can be inconclusive: the reason is the interval against the
    margin, not "power too low" (power 0.82 sat beside that claim)."""
    from dataclasses import replace

    from dualpath.evals.headline import quality_lines
    from dualpath.evals.verdict import PrimaryVerdict

    v = PrimaryVerdict(
        label="confirmatory", label_text="confirmatory", reasons=(), baseline="main",
        candidate="backup", horizon=1, test="non-inferiority", margin=0.06, alpha=0.05,
        verdict="inconclusive", decided=False, estimate=-0.0445, ci_low=-0.0855,
        ci_high=0.0100, ci_level=0.90, ci_text="", power=0.82, power_text="",
        n_independent=20, nights_analysed=20, window_nights=20, note="")
    # (an interval wholly below 0 also says 'worse': tests/test_headline_icr.py)
    assert quality_lines(v)[-1] == ("  before it can decide: the interval's lower end -0.086 < "
                                    "−δ = -0.060: a loss of δ is not ruled out")
    assert quality_lines(replace(v, test="difference"))[-1] == (
        "  before it can decide: the interval [-0.086, +0.010] contains 0")


def test_a_metric_is_one_function_and_one_declaration(seeded, capsys):
    """A metric declared here, and nowhere else, is computed by compute_metrics, read as
    ``m.<key>``, printed by `dualpath metrics` (table and json) in its declared order, and
    placed in its declared report section with its declared empty line."""
    from dualpath.cli.results import print_metrics
    from dualpath.evals.registry import TABLES, table
    from dualpath.evals.weekly.sections import placed
    from dualpath.flows.metrics import load_frames
    from dualpath.evals.report import compute_metrics

    @table("units_per_path", "Usable units per path", ["path", "units"], kind="metric",
           kinds={"units": "int"}, order=85, section="quality", empty="no units yet")
    def units_per_path(d):
        # the seeded warehouse: 10 nights x 8 tickers x 2 draws = 160 units on main, and
        # backup's last run is partial (8 of 16 measured, left out): 9 x 16 = 144
        return d.usable.groupby("path").size().rename("units").reset_index()

    try:
        cfg, _, _ = seeded
        f = load_frames(cfg)
        m = compute_metrics(f["units"], f["calls"], f["runs"], f["prices"],
                            cfg.experiment.horizons, ("main", "backup"))
        assert m.units_per_path.to_dict("records") == [{"path": "backup", "units": 144},
                                                        {"path": "main", "units": 160}]
        keys = list(registered())
        assert keys.index("grades") < keys.index("units_per_path") < keys.index("speed")
        assert placed()["quality"][-1] == "units_per_path"
        capsys.readouterr()
        print_metrics(m, "json", only=["units_per_path"])
        import json
        doc = json.loads(capsys.readouterr().out)
        assert doc["tables"] == {"units_per_path": [{"path": "backup", "units": 144},
                                                    {"path": "main", "units": 160}]}
    finally:
        del TABLES["units_per_path"]
    with pytest.raises(AttributeError):
        m.no_such_table
