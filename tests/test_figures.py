"""Each report figure draws exactly the numbers of the table it comes from: grade shares that
sum to 1, error bars from the RankIC table's own inference, real-scale seconds, sane axes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dualpath.evals.weekly import figures
from dualpath.evals.report_tables import latency_percentiles, real_scale_calls
from dualpath.flows.weekly import gather
from tests.seeded import SPEED, seed_warehouse

COLORS = figures.path_colors(["main", "backup"])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("fig")
    cfg_path, cfg, _ = seed_warehouse(root)
    return gather(cfg, None, None, sweeps=False)


def test_grade_bars_are_the_grade_table_and_each_path_sums_to_one(data):
    g = data.metrics.grades
    fig = figures.grade_distribution(g, COLORS, "t")
    ax = fig.axes[0]
    assert ax.get_ylim() == (0, 1)
    for container, (_, row) in zip(ax.containers, g.iterrows()):
        heights = [b.get_height() for b in container]
        assert heights == pytest.approx([row[c] for c in figures.GRADE_COLUMNS])
        assert sum(heights) == pytest.approx(1.0)      # the unit count is not a bar
        assert str(int(row["units"])) in container.get_label()


def test_quality_vs_speed_draws_the_rank_ic_tables_interval_and_real_seconds(data):
    m = data.metrics
    fig = figures.quality_vs_speed(m.rank_ic, m.speed, COLORS, 1, "t")
    ax = fig.axes[0]
    t = m.rank_ic[m.rank_ic["horizon"] == 1].set_index("path")
    sec = m.speed.set_index("path")["throughput_s_per_ticker"]
    bars = [c for c in ax.containers]
    assert len(bars) == 2
    for c in bars:
        path = c.get_label().split(" ")[0]
        (x,), (y,) = c.lines[0].get_data()
        assert x == pytest.approx(sec[path])                          # 347 / 61: real-scale
        assert y == pytest.approx(t.loc[path, "tested_mean"])
        segs = c.lines[2][0].get_segments()[0]
        assert [segs[0][1], segs[1][1]] == pytest.approx([t.loc[path, "ci_low"],
                                                          t.loc[path, "ci_high"]])
    assert sec["backup"] == pytest.approx(np.median([SPEED["backup"](i) for i in range(9)]))
    # at h=5 the table has no interval (insufficient nights): no error bar is drawn
    fig5 = figures.quality_vs_speed(m.rank_ic, m.speed, COLORS, 5, "t")
    assert not fig5.axes[0].containers and len(fig5.axes[0].lines) == 3   # 2 points + y=0


def test_speed_by_night_plots_the_run_tables_real_scale_seconds(data):
    fig = figures.speed_by_night(data.runs, COLORS, "t")
    ok = data.runs[data.runs["throughput_s"].notna()]
    for ax, col in zip(fig.axes, ("throughput_s", "slot_latency_s")):
        for line in ax.lines:
            want = ok[ok["path"] == line.get_label()].sort_values("night")[col]
            assert list(line.get_ydata()) == pytest.approx(list(want))
    backup = ok[ok["path"] == "backup"]["throughput_s"]
    assert backup.between(345, 351).all()        # real-scale, not the compressed clock


def test_one_night_gets_one_tick_not_a_span_of_hours(data):
    one = data.runs[data.runs["night"] == data.runs["night"].min()]
    ax = figures.speed_by_night(one, COLORS, "t").axes[0]
    assert ax.get_xlim() == pytest.approx((-0.6, 0.6))
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(pd.Timestamp(
        one["night"].iloc[0]).date())]


def test_latency_percentiles_are_real_scale_for_simulated_paths(data):
    lat = latency_percentiles(real_scale_calls(data.calls, data.runs)).set_index(["path", "metric"])
    # each seeded call takes half its unit: backup units of 694 s real → calls of ~347 s
    assert lat.loc[("backup", "latency_s"), "p50"] == pytest.approx(347, abs=4)
    assert lat.loc[("main", "latency_s"), "p50"] == pytest.approx(122, abs=2)


def test_sweep_plot_has_whole_slot_ticks_and_an_unclipped_knee():
    from dualpath.evals.sweep_plot import sweep_figure

    t = pd.DataFrame({"label": ["-np=1", "-np=2", "-np=4", "-np=8"], "slots": [1, 2, 4, 8],
                      "status": "ready", "verdict": "ready",
                      "decode_tps": [60.0, 110.0, 150.0, 152.0],
                      "is_knee": [False, False, True, False],
                      "ticker_s_throughput": [400.0, 220.0, 172.0, 177.0],
                      "ticker_s_latency": [400.0, 440.0, 690.0, 1400.0]})
    ax = sweep_figure(t, "t").axes[0]
    assert list(ax.get_xticks()) == [1, 2, 4, 8]
    assert ax.get_ylim()[1] >= 152.0 * 1.1 and ax.get_xlim()[1] > 8
