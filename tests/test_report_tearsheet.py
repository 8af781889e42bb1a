"""The report's alphalens views draw the report's own numbers: the IC histogram counts the
nightly IC table, the weekly heatmap its weekly means, the running ΔIC interval is the
comparison table's test on the nights so far (the last night's is the table's own), and the
returns by grade are the by_grade table; with nothing to draw the report says why."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from markupsafe import escape
from scipy import stats

from dualpath.evals.weekly import figures, tearsheet
from dualpath.evals.weekly.render import render
from dualpath.flows.weekly import gather
from tests.seeded import seed_warehouse

COLORS = figures.path_colors(["main", "backup"])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    cfg_path, cfg, _ = seed_warehouse(tmp_path_factory.mktemp("tear"))
    return gather(cfg, None, None, sweeps=False)


def test_the_ic_histogram_counts_each_paths_matured_nights(data):
    nightly = data.metrics.nightly_ic
    fig = tearsheet.ic_histogram(nightly, COLORS, 1, "t")
    ok = nightly[(nightly["status"] == "ok") & (nightly["horizon"] == 1)]
    for ax in fig.axes:
        path = ax.get_title().split(":")[0]
        ic = ok.loc[ok["path"] == path, "ic"].to_numpy()
        heights = [p.get_height() for p in ax.patches]
        edges = [p.get_x() for p in ax.patches] + [ax.patches[-1].get_x()
                                                   + ax.patches[-1].get_width()]
        assert heights == pytest.approx(np.histogram(ic, bins=edges)[0])
        assert sum(heights) == len(ic)                          # 9 backup, 10 main nights
        mean_line = [ln for ln in ax.lines if ln.get_label().startswith("mean")][0]
        assert mean_line.get_xdata()[0] == pytest.approx(ic.mean())


def test_weekly_ic_is_the_mean_per_iso_week_worked_by_hand():
    # Mon 2027-05-03 and Fri 05-07 are ISO week 18: mean (0.1 + 0.3) / 2 = 0.2 over 2 nights;
    # Mon 05-10 is week 19: -0.2 alone; the h=5 row and the pending row are not counted
    nightly = pd.DataFrame({
        "night": pd.to_datetime(["2027-05-03", "2027-05-07", "2027-05-10", "2027-05-10",
                                 "2027-05-11"]),
        "path": "main", "horizon": [1, 1, 1, 5, 1], "ic": [0.1, 0.3, -0.2, 0.9, np.nan],
        "n_tickers": 8, "start_pos": 0, "status": ["ok", "ok", "ok", "ok", "pending"]})
    w = tearsheet.weekly_ic(nightly, 1)
    assert w.to_dict("list") == {"path": ["main", "main"], "week": ["2027-W18", "2027-W19"],
                                 "mean_ic": pytest.approx([0.2, -0.2]), "nights": [2, 1]}
    fig = tearsheet.ic_heatmap(nightly, 1, "t")
    assert fig.axes[0].images[0].get_array().tolist() == [pytest.approx([0.2, -0.2])]
    assert [t.get_text() for t in fig.axes[0].texts] == ["+0.200\n2 n", "-0.200\n1 n"]


def test_the_running_interval_is_the_planned_test_on_the_nights_so_far():
    # five nights at h=1, non-inferiority at alpha 0.05: the interval is the two-sided 90% t
    # interval on the nights so far; with 4 (MIN_INDEPENDENT) or more it exists
    d = np.array([0.02, -0.01, 0.03, 0.00, 0.01])
    delta = pd.DataFrame({"night": pd.bdate_range("2027-05-03", periods=5), "horizon": 1,
                          "ic_baseline": 0.0, "ic_candidate": d, "delta": d, "n_common": 8,
                          "start_pos": range(5)})
    r = tearsheet.running_delta(delta, 1, "non-inferiority", 0.03, 0.05)
    assert r["ci_low"].isna().tolist() == [True, True, True, False, False]
    for k in (4, 5):
        lo, hi = stats.t.interval(0.90, k - 1, loc=d[:k].mean(), scale=stats.sem(d[:k]))
        assert r.loc[k - 1, ["ci_low", "ci_high"]].tolist() == pytest.approx([lo, hi])
        assert r.loc[k - 1, "tested_mean"] == pytest.approx(d[:k].mean())


def test_the_last_running_interval_is_the_comparison_tables(data):
    m = data.metrics
    row = m.comparison[m.comparison["horizon"] == 1].iloc[0]
    r = tearsheet.running_delta(m.nightly_delta, 1, row["test"], row["margin"], row["alpha"])
    assert r.iloc[-1][["tested_mean", "ci_low", "ci_high"]].tolist() == pytest.approx(
        [row["estimate"], row["ci_low"], row["ci_high"]])
    fig = tearsheet.delta_ic(m.nightly_delta, 1, row["test"], row["margin"], row["alpha"],
                             ("main", "backup"), "t")
    ax = fig.axes[0]
    d1 = m.nightly_delta[m.nightly_delta["horizon"] == 1].sort_values("night")["delta"]
    assert [p.get_height() for p in ax.patches] == pytest.approx(d1.tolist())
    assert len(ax.collections) == 1                     # the interval band
    fig5 = tearsheet.delta_ic(m.nightly_delta, 5, "non-inferiority", 0.03, 0.05,
                              ("main", "backup"), "t")
    assert not fig5.axes[0].collections and "no interval yet" in fig5.axes[0].get_title()


def test_returns_by_grade_are_the_by_grade_table(data):
    g = data.metrics.by_grade
    fig = tearsheet.returns_by_grade(g, COLORS, "t")
    assert len(fig.axes) == g["horizon"].nunique()
    for ax, h in zip(fig.axes, sorted(g["horizon"].unique())):
        for container in ax.containers:
            path = container.get_label().split(" ")[0]
            want = g[(g["horizon"] == h) & (g["path"] == path)].sort_values("grade")
            assert [b.get_height() for b in container] == pytest.approx(
                want["mean_fwd_return"].tolist())


def test_each_view_is_in_the_report_with_data_and_a_line_without(data, tmp_path):
    html = render(data, tmp_path / "a", "r")[0].read_text()
    for caption in ("Distribution of nightly RankIC per path", "Mean nightly RankIC per path "
                    "and ISO week", "Nightly ΔIC (bars) with the running estimate",
                    "Mean forward return by grade, per path and horizon"):
        assert f'alt="{caption}' in html, caption
    empty = replace(data.metrics, nightly_ic=data.metrics.nightly_ic.iloc[0:0],
                    nightly_delta=data.metrics.nightly_delta.iloc[0:0],
                    tables={**data.metrics.tables, "by_grade": pd.DataFrame()})
    html, md = (p.read_text() for p in render(replace(data, metrics=empty), tmp_path / "b", "r"))
    for key in ("ic_histogram", "ic_heatmap", "delta_ic", "by_grade"):
        line = tearsheet.MISSING[key]
        assert f'<p class="empty">{escape(line)}</p>' in html and f"_{line}_" in md, key
