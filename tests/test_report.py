"""The weekly report: plan integrity labels, exclusions listed, deviations shown."""

import re
import shutil

import pytest

from dualpath.config import load_config
from dualpath.prereg import draft_plan, plan_toml
from dualpath.flows.prereg import freeze_plan
from dualpath.flows.weekly import write_report
from tests.helpers import SimFleet, ingest, make_project, score_night_plain


def study(tmp_path, nights=4, window=4, cut_last=False, change_after=None):
    cfg_path, cfg, all_nights = make_project(tmp_path, tickers=6, draws=2, nights=nights)
    plan = tmp_path / "prereg.toml"
    plan.write_text(plan_toml(draft_plan(cfg, all_nights[0], window, margin=0.03)))
    freeze_plan(cfg, plan, force=True, reason="a test window: its false reassurance is accepted")
    with SimFleet(cfg) as fleet:
        for i, n in enumerate(all_nights):
            if change_after is not None and i == change_after:
                cfg_path.write_text(cfg_path.read_text().replace("temperature = 0.7",
                                                                 "temperature = 0.6"))
                cfg = load_config(cfg_path)
                from dualpath.flows.prereg import hold_night_to_plan
                hold_night_to_plan(cfg, n)
            stop = 3 if cut_last and i == len(all_nights) - 1 else None
            ingest(cfg, score_night_plain(cfg, n, fleet.urls, stop_after_units=stop))
    return cfg, plan


@pytest.fixture(scope="module")
def studied(tmp_path_factory):
    """`study(tmp_path, **kw)`, each shape scored once for this module and copied into the
    test's folder (the config's paths and the frozen plan's are relative to its folder)."""
    built = {}

    def copy(tmp_path, **kw):
        key = tuple(sorted(kw.items()))
        if key not in built:
            root = built[key] = tmp_path_factory.mktemp("study")
            with pytest.MonkeyPatch.context() as mp:
                mp.chdir(root)
                study(root, **kw)
        shutil.copytree(built[key], tmp_path, dirs_exist_ok=True)
        return load_config(tmp_path / "dualpath.toml"), tmp_path / "prereg.toml"
    return copy


def report(cfg, tmp_path):
    html, md, data = write_report(cfg, tmp_path / "out")
    return html.read_text(), md.read_text(), data


def test_a_complete_window_with_an_intact_plan_is_confirmatory(tmp_path, studied):
    cfg, plan = studied(tmp_path)
    html, md, data = report(cfg, tmp_path)
    assert data.plan.label == "confirmatory"
    assert "**confirmatory**" in md and "matches the frozen hash" in md
    # self-contained: nothing fetched (a server's base_url in the hosts table is only text)
    assert not re.search(r'(src|href)="(https?:)?//', html), re.findall(r'(?:src|href)="[^"]*', html)
    assert html.count("data:image/png;base64,") >= 4


def test_an_edited_plan_is_a_hash_mismatch_and_never_confirmatory(tmp_path, studied):
    cfg, plan = studied(tmp_path)
    plan.write_text(plan.read_text().replace("margin = 0.03", "margin = 0.1", 1))
    html, md, data = report(cfg, tmp_path)
    assert data.plan.file_matches is False
    assert "hash mismatch" in data.plan.label and "confirmatory" not in data.plan.label
    assert "edited after freezing" in md


def test_a_partial_run_is_excluded_listed_and_leaves_the_closed_window_short(tmp_path, studied):
    cfg, plan = studied(tmp_path, cut_last=True)
    html, md, data = report(cfg, tmp_path)
    assert data.plan.label.startswith("exploratory — the window has closed with 1 of 4 window "
                                      "night(s) missing: ")
    assert data.plan.label.endswith("3 complete, below the plan's minimum of 4 (its test's 4 "
                                    "non-overlapping nights at h=1)")
    assert data.plan.nights_collected == 3
    excluded = md.split("Left out, and why")[1]
    assert "partial" in excluded
    assert "night not complete" in html


def test_the_interim_label_holds_until_the_window_is_complete(tmp_path, studied):
    cfg, plan = studied(tmp_path, nights=2, window=5)
    html, md, data = report(cfg, tmp_path)
    assert data.plan.label.startswith("interim — no decision: 2 of 5 window nights collected")
    assert "Window nights analysed (complete and conforming): 2 of 5" in md


def test_a_config_change_mid_window_appears_as_a_deviation(tmp_path, studied):
    cfg, plan = studied(tmp_path, nights=2, window=4, change_after=1)
    html, md, data = report(cfg, tmp_path)
    assert "config differs from plan" in md
    assert len(data.config_hashes) == 2 and "more than one config" in html
    assert set(data.metrics.nightly_ic["night"].dt.date) == {data.since}   # never pooled
    assert any("left out" in n and "(config differs from plan)" in n for n in data.metrics.notes)


def test_the_weekly_flow_publishes_the_markdown_as_an_artifact(tmp_path, prefect_harness,
                                                               studied):
    import asyncio

    from prefect.client.orchestration import get_client

    from dualpath.flows.weekly import weekly_report
    cfg, plan = studied(tmp_path)
    cfg_path = tmp_path / "dualpath.toml"

    async def go():
        state = await weekly_report(str(cfg_path), out=str(tmp_path / "weekly"),
                                    return_state=True)
        async with get_client() as c:
            run = await c.read_flow_run(state.state_details.flow_run_id)
            arts = [a for a in await c.read_artifacts() if a.flow_run_id == run.id]
        return state, run, arts
    state, run, arts = asyncio.run(go())
    assert state.is_completed() and run.name == "report/latest"
    assert "# dualpath weekly comparison" in arts[0].data and "**confirmatory**" in arts[0].data
    assert list((tmp_path / "weekly").glob("*.html"))


def test_metrics_json_carries_metadata_and_csv_writes_one_file_per_table(tmp_path, studied):
    import json

    from typer.testing import CliRunner

    from dualpath.cli import app
    cfg, plan = studied(tmp_path, nights=2, window=4)
    cfg_path = tmp_path / "dualpath.toml"
    r = CliRunner().invoke(app, ["metrics", "-c", str(cfg_path), "-f", "json"])
    doc = json.loads(r.stdout)
    assert doc["meta"]["experiment"] == "demo" and len(doc["meta"]["plan_hash"]) == 64
    assert doc["meta"]["question"]["primary_horizon"] == 1 and "rank_ic" in doc["tables"]
    assert doc["primary"]["label"] == "interim" and doc["primary"]["horizon"] == 1
    r = CliRunner().invoke(app, ["metrics", "-c", str(cfg_path), "-f", "csv", "--out",
                                 str(tmp_path / "csv")])
    assert r.exit_code == 0
    assert {"rank_ic.csv", "comparison.csv", "speed.csv"} <= {p.name for p in (tmp_path / "csv").iterdir()}
    bad = CliRunner().invoke(app, ["metrics", "-c", str(cfg_path), "--since", "May 3"])
    assert bad.exit_code != 0 and "--since 'May 3' is not a date" in str(bad.exception)


def test_untrusted_text_in_the_html_report_is_escaped(tmp_path, studied):
    """A run's status detail holds a server's error text: in the HTML it is text, never markup
    (the *.html.j2 templates were not autoescaped, and such a string ran as script)."""
    from dualpath.warehouse.db import writer
    from dualpath.evals.weekly.render import _ENV

    cfg, plan = studied(tmp_path, cut_last=True)
    evil = "<script>document.title='XSS'</script>"
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("UPDATE runs SET status_detail = ? WHERE status <> 'complete'", [evil])
    html, md, data = report(cfg, tmp_path)
    assert "&lt;script&gt;document.title=" in html and evil not in html
    assert evil in md                                  # Markdown is text: left as written
    assert _ENV.autoescape("report.html.j2") and not _ENV.autoescape("report.md.j2")
    assert html.count("data:image/png;base64,") >= 4   # figures are still images
