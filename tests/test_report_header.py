"""The report's header counts the nights it analysed and names those it left out: on the
seeded warehouse (`tests.seeded`, 10 nights, the last one's backup run partial) it analysed 9
paired nights, not 10."""

import re
from datetime import date, datetime, timezone

import pandas as pd

from dualpath.evals.weekly import ReportData, nights_line
from dualpath.flows.weekly import write_report
from tests.seeded import seed_warehouse


def test_the_seeded_report_counts_nine_nights_and_names_the_partial_one(tmp_path):
    _, cfg, _ = seed_warehouse(tmp_path)
    html, md, data = write_report(cfg, tmp_path / "out")
    line = ("9 night(s) analysed; 1 left out (2027-05-13: backup partial) · generated {} · "
            "**exploratory — no frozen plan**")
    generated = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")
    assert line in generated.sub("generated {}", md.read_text()).splitlines()
    assert "<p>9 night(s) analysed; 1 left out (2027-05-13: backup partial) · generated" in (
        html.read_text())
    assert data.analysed[-1] == date(2027, 5, 12) and len(data.analysed) == 9


def test_a_long_list_left_out_names_three_and_counts_the_rest():
    d = ReportData("demo", date(2027, 5, 3), date(2027, 5, 14), datetime.now(timezone.utc),
                   None, *[pd.DataFrame()] * 5, analysed=[date(2027, 5, 3)],
                   left_out={date(2027, 5, d): "main failed" for d in (4, 5, 6, 7, 10)})
    assert nights_line(d) == ("1 night(s) analysed; 5 left out (2027-05-04: main failed; "
                              "2027-05-05: main failed; 2027-05-06: main failed; 2 more)")
    everything = ReportData("demo", date(2027, 5, 3), date(2027, 5, 3),
                            datetime.now(timezone.utc), None, *[pd.DataFrame()] * 5,
                            analysed=[date(2027, 5, 3)])
    assert nights_line(everything) == "1 night(s) analysed"
