"""Every registered table reaches the weekly report's HTML and its Markdown (the Prefect
artifact): the reports loop over `evals.registry.every_table()`, so a table declared tomorrow
appears in both without a template edit, and this test fails if either output lacks one. The
Markdown marks each excluded run with what it is left out of and why."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest
from markupsafe import escape

from dualpath.evals.registry import TABLES, every_table, table
from dualpath.evals.weekly import sections
from dualpath.evals.weekly.render import render
from dualpath.flows.weekly import gather
from tests.test_starved import _seeded_with_a_starved_night


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from dualpath.config import load_config

    root = tmp_path_factory.mktemp("starved")
    return gather(load_config(_seeded_with_a_starved_night(root, which=(3, 5))), None, None,
                  sweeps=False)


def _render(d, tmp_path):
    html, md = render(d, tmp_path, "r")
    return html.read_text(), md.read_text()


def test_every_registered_table_reaches_the_html_and_the_markdown(data, tmp_path):
    html, md = _render(data, tmp_path)
    tables = every_table()
    assert {"headline", "comparison", "cross_path", "draws", "signal_shape", "by_grade",
            "serving", "runs", "left_out", "evidence", "hosts", "deviations", "latency",
            "projection", "sweep", "sessions", "thinking"} <= set(tables)
    for line in data.headline.lines:
        assert line in md
    frames = sections.frames(data)
    for key, spec in tables.items():
        if key == "headline":
            continue
        assert f"### {spec.title}\n" in md, key
        assert str(escape(spec.title)) in html, key     # a heading, or a fold's summary
        if key == "sweep":                  # none recorded here (tests/test_sweep.py has one)
            assert not len(frames[key]) and f"_{spec.empty}_" in md
            assert str(escape(spec.empty)) in html
            continue
        assert len(frames[key]), key
        header = "| " + " | ".join(spec.shown()) + " |"
        assert header in md, (key, header)          # with rows: its brief columns, in order
        assert "".join(f"<th>{escape(c)}</th>" for c in spec.shown()) in html.replace(
            "<wbr>", ""), key                      # a header may break after an underscore


def test_the_reports_own_tables_are_not_metric_tables():
    from dualpath.evals.registry import registered, report_tables

    assert set(report_tables()) == {"deviations", "latency", "projection", "sweep", "sessions",
                                    "thinking"}
    assert not set(report_tables()) & set(registered())     # `dualpath metrics` prints none


def test_a_table_declared_anywhere_reaches_both_outputs_without_a_template_edit(data, tmp_path):
    table("probe", "A probe table declared after the report was written",
          ["ticker", "share"], kinds={"share": "share"}, kind="report")
    try:
        m = replace(data.metrics)
        m.probe = pd.DataFrame({"ticker": ["005930"], "share": [0.25]})
        html, md = _render(replace(data, metrics=m), tmp_path)
    finally:
        del TABLES["probe"]
    section = md.split("## More tables", 1)[1]
    assert "### A probe table declared after the report was written" in section
    assert "| ticker | share |" in section and "| 005930 | 0.250 |" in section
    assert "<h3>A probe table declared after the report was written</h3>" in html
    assert "<td>005930</td><td>0.250</td>" in html


def test_an_empty_table_is_one_line_saying_what_is_missing_and_why(data, tmp_path):
    html, md = _render(replace(data, evidence=pd.DataFrame()), tmp_path)
    line = "no server evidence: no session in this range recorded the server's counters"
    assert f"_{line}_" in md
    assert str(escape(line)) in html


def test_the_markdown_marks_each_excluded_run_with_what_and_why(data, tmp_path):
    html, md = _render(data, tmp_path)
    runs = md.split("### runs (only 'complete' runs are results", 1)[1].split("###", 1)[0]
    rows = [ln for ln in runs.splitlines() if ln.startswith("| 2027-")]
    assert len(rows) == len(data.runs) == 20
    starved = [r for r in rows if "| complete, out of speed |" in r]
    assert len(starved) == 2 and all("| starved: slots busy 32% of the time" in r
                                     for r in starved)
    partial = [r for r in rows if "| partial, out of every metric |" in r]
    assert len(partial) == 1 and "| 8 of 16 units measured |" in partial[0]
    assert sum("out of" in r for r in rows) == 3       # the others are results, unmarked
