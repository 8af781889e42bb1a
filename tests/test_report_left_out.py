"""The report lists every run it leaves out of something, and why: a partial run (out of
every metric) and a starved one (out of speed) on the seeded warehouse; the speed chart never
plots the starved run and says it left it out; with no speed at all there is no empty chart."""

from __future__ import annotations

import re

from dualpath.config import load_config
from dualpath.flows.weekly import write_report
from tests.test_starved import _seeded_with_a_starved_night


def _left_out_rows(md: str) -> list[str]:
    section = md.split("### Left out, and why", 1)[1].split("###", 1)[0]
    return [ln for ln in section.splitlines() if re.match(r"\| 20\d\d-", ln)]


def test_the_report_names_every_run_it_left_out_with_why(tmp_path):
    cfg_path = _seeded_with_a_starved_night(tmp_path, which=(3, 5))
    cfg = load_config(cfg_path)
    html, md, data = write_report(cfg, tmp_path / "out")
    rows = _left_out_rows(md.read_text())
    runs = data.runs
    starved = runs[runs["disturbed"].fillna("").str.startswith("starved: ")]
    partial = runs[runs["status"] != "complete"]
    assert len(starved) == 2 and len(partial) == 1
    assert len(rows) == 3, rows
    for _, r in starved.iterrows():
        assert any(f"| {r['night']:%Y-%m-%d} | {r['path']} | complete | speed | starved: slots busy "
                   in ln for ln in rows), (r["night"], rows)
    for _, r in partial.iterrows():
        assert any(f"| {r['night']:%Y-%m-%d} | {r['path']} | partial | every metric | partial: " in ln
                   for ln in rows), rows
    text = html.read_text()
    assert "nothing left out" not in text
    assert "2 disturbed run(s) left out, listed under run hygiene" not in text  # in the PNG
    from dualpath.evals.weekly import figures
    fig = figures.speed_by_night(runs, figures.path_colors(["backup", "main"]), "t")
    assert fig._suptitle.get_text() == ("t (2 disturbed run(s) left out, listed under run "
                                        "hygiene)")
    plotted = sum(len(line.get_xdata()) for line in fig.axes[0].get_lines())
    assert plotted == runs["throughput_s"].notna().sum() - 2


def test_no_speed_means_no_empty_chart_and_a_line_saying_why(tmp_path):
    cfg_path = _seeded_with_a_starved_night(tmp_path, which=tuple(range(10)))
    from dualpath.warehouse.db import writer
    cfg = load_config(cfg_path)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:    # main starved on every night too
        con.execute("UPDATE runs SET wall_s = 3 * wall_s WHERE path = 'main'")
        t = "(SELECT run_id, min(start_wall) t0 FROM calls GROUP BY run_id)"
        for table in ("calls", "units"):
            con.execute(f"UPDATE {table} SET start_wall = t.t0 + 3 * (start_wall - t.t0), "
                        f"end_wall = t.t0 + 3 * (end_wall - t.t0) FROM {t} t WHERE "
                        f"{table}.run_id = t.run_id AND {table}.path = 'main'")
    html, md, data = write_report(cfg, tmp_path / "out")
    text = html.read_text()
    assert "no quality-against-speed chart: no path has a complete, undisturbed run" in text
    assert "no projection: no path has a complete, undisturbed run yet" in text
