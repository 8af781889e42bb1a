"""The user's own retuning questions as candidates scored on past nights of a real small
study (simulated main path, 20 tickers x 2 draws, its inputs frozen as the nightly flow
freezes them): another slot count, a degraded model, thinking on."""

from __future__ import annotations

import asyncio
import re

import pytest

from dualpath.evals.candidate import RETROSPECTIVE
from dualpath.flows import candidate as fc
from dualpath.flows import candidate_answer as fa
from dualpath.flows import inputs, runner
from dualpath.flows.frozen import freeze_night
from dualpath.demo import demo_config_data
from dualpath.flows.demo import synthetic_project
from tests.helpers import SimFleet, ingest

NIGHTS = 5     # at the sim's ρ_RR ~0.55, 20 tickers: power ~0.96 (noise) and ~0.99 (equal)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study: main alone scored on NIGHTS nights, each night's inputs frozen first."""
    root = tmp_path_factory.mktemp("study")
    data = demo_config_data(root, 20, 2, 0.01)
    del data["paths"]["backup"]
    cfg_path, cfg, market, _ = synthetic_project(root, data, NIGHTS)
    nights = market.nights(NIGHTS)
    history = inputs.price_history(cfg)
    with SimFleet(cfg) as fleet:
        for night in nights:
            freeze_night(cfg, night, history, cfg.tickers(), {})
            works = runner.plan_night(cfg, night)
            asyncio.run(runner.run_path(cfg, night, works[0], history, {},
                                        override_url=fleet.urls["main"]))
            ingest(cfg, works)
    return cfg, cfg_path, nights


def score(study, name, sp, sampling=None, nights=None):
    cfg, cfg_path, all_nights = study
    cfg_c = fc.candidate_config(cfg, name, sp, 2, sampling=sampling)
    outcomes = fc.run_candidate(cfg, cfg_c, name, "main", nights or all_nights, cfg_path)
    assert [o.status for o in outcomes] == ["complete"] * len(nights or all_nights)
    return cfg_c, fa.answer(cfg, cfg_c.experiment.name, name, "main",
                            fc.settings_of(cfg_c, name))


def test_every_night_kept_its_inputs_and_the_candidate_is_handed_them(study):
    cfg, _, nights = study
    available, lacking = fc.past_nights(cfg, "main")
    assert available == nights and lacking == []


def test_another_slot_count_is_interchangeable_and_named_and_slower_by_its_time_model(study):
    cfg = study[0]
    sp = cfg.paths["main"].model_copy(update={"slots": 4})
    cfg_c, a = score(study, "slots4", sp)
    assert a.verdict == "interchangeable"
    assert a.differences == ("paths.slots 8 → 4",)
    assert all(n in a.nights for n in study[2])
    # the time model's seconds per unit double at half the slots (its rates are per slot)
    cost4 = fa.decide_cost(cfg, cfg_c, "slots4", "main", study[2])
    main_c = fc.candidate_config(cfg, "again", cfg.paths["main"], 2)
    cost8 = fa.decide_cost(cfg, main_c, "again", "main", study[2])
    assert cost4.speed_source == cost8.speed_source == "time model (no measurements yet)"
    assert cost4.s_per_unit == pytest.approx(2 * cost8.s_per_unit)
    assert sum(RETROSPECTIVE in line for line in a.lines) >= 3
    # handed exactly the reference's input: each ticker's first prompt of a night is the
    # same text on both (the same hash of the same bytes), over every ticker-night
    from dualpath.warehouse.db import reader
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        same = con.execute(
            "SELECT count(DISTINCT c.night || c.ticker), count(*) FILTER (WHERE c.prompt_hash "
            "IS DISTINCT FROM r.prompt_hash) FROM calls c JOIN calls r ON r.night = c.night "
            "AND r.ticker = c.ticker AND r.agent = c.agent AND r.draw = 1 AND r.path = 'main' "
            "WHERE c.path = 'slots4' AND c.agent = 'data_summary' AND c.draw = 1").fetchone()
    assert same == (20 * NIGHTS, 0)


def test_a_degraded_model_whose_grades_are_noise_is_not_interchangeable(study):
    sp = study[0].paths["main"]
    noise = sp.model_copy(update={"sim": sp.sim.model_copy(update={"signal_weight": 0.0,
                                                                   "night_noise": 0.0})})
    _, a = score(study, "degraded", noise)
    assert a.verdict == "not interchangeable"
    assert a.self_words.startswith("no — ")
    assert a.differences == ("paths.sim.night_noise 0.45 → 0.0",
                             "paths.sim.signal_weight 0.5 → 0.0")


def test_thinking_on_is_named_as_a_difference_in_what_it_does(study):
    sp = study[0].paths["main"]
    thinks = sp.model_copy(update={"sim": sp.sim.model_copy(update={"thinks": True})})
    _, a = score(study, "thinking", thinks, {"thinking": "on"}, nights=study[2][:1])
    assert "sampling.thinking off → on" in a.differences
    assert "paths.sim.thinks False → True" in a.differences
    assert a.lines[1].startswith("  what thinking does differently from main: ")


def test_mistakes_on_the_command_line_say_what_was_wrong_and_how_to_fix_it(study, tmp_path):
    from tests.cli_run import run_cli

    cfg_path = study[1]
    two = tmp_path / "two.toml"
    two.write_text("[paths.a]\nengine = 'sim'\nmodel = 'm'\n[paths.b]\nengine = 'sim'\n"
                   "model = 'm'\n")
    bad = tmp_path / "bad.toml"
    bad.write_text("[paths.a]\nengine = 'sim'\nmodel = 'm'\nslots = 0\n")
    cases = [
        (["nosuch"], f"error: candidate 'nosuch' is neither a path of the config (main) nor a "
                     "TOML file; write its settings as one [paths.NAME] table in a file and "
                     "give the file"),
        ([str(two)], f"error: {two}: needs exactly one [paths.NAME] table (the candidate), "
                     "found 2"),
        ([str(bad)], f"error: {bad}: paths.a.slots: Input should be greater than or equal to 1"),
        (["main", "--nights", "2", "--budget", "1h"], "error: give --nights or --budget, not "
                                                      "both"),
        (["main", "--budget", "two hours"], "error: --budget 'two hours': give a duration such "
                                            "as 2h, 90m or 3600s"),
        (["main", "--reference", "backup"], "error: --reference 'backup' is no path of the "
                                            "config (main)"),
        (["main", "--budget", "1m"], "error: --budget 1m: not one night fits (one takes "
                                     f"~{study_hours(study):.2f} h on the candidate)"),
    ]
    for args, line in cases:
        r = run_cli("candidate", *args, "--config", cfg_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "Traceback" not in r.stdout + r.stderr
        assert r.stderr.strip() == line


def study_hours(study) -> float:
    cfg, _, nights = study
    cfg_c = fc.candidate_config(cfg, "main", cfg.paths["main"], 2)
    return fa.decide_cost(cfg, cfg_c, "main", "main", nights).hours_per_night


def test_the_cost_is_stated_whole_before_anything_is_scored(study):
    from tests.cli_run import run_cli

    cfg, cfg_path, nights = study
    r = run_cli("candidate", "main", "--config", cfg_path, "--budget", "1h", "--cost-only")
    assert r.returncode == 0, r.stderr
    c = fa.decide_cost(cfg, fc.candidate_config(cfg, "main", cfg.paths["main"], 2), "main",
                       "main", nights)
    # 20 tickers x 2 draws x s/unit a night (main's measured speed, or its time model where
    # its runs' seconds are no result); 1 h fits floor(1 / hours a night) of them
    fit = min(int(1 // c.hours_per_night), NIGHTS)
    chosen = nights[-fit:]
    assert r.stdout.splitlines() == [
        "main against main: the same settings (fresh draws: its own seeds)",
        f"to decide interchangeability with power 0.8: {c.nights_needed} past night(s) x 20 "
        f"tickers x 2 draw(s) (reference at 2; ρ_RR {c.rho_rr:.2f} from main's draws on "
        f"{NIGHTS} night(s); limit 50%, α 0.05); {NIGHTS} past night(s) have frozen inputs",
        f"that costs ~{c.hours(c.nights_needed):.2f} h on the candidate ({c.speed_source}, "
        f"{c.s_per_unit:.1f} s/unit real-scale) and ~{c.kwh(c.nights_needed):.2f} kWh "
        f"(modelled {c.watts:.0f} W)",
        f"scoring main on {fit} past night(s) {chosen[0]} … {chosen[-1]}: "
        f"~{c.hours(fit):.2f} h; stored as experiment 'demo.candidate.main'"]


def test_a_rerun_resumes_from_the_journals_and_answers_the_same(study):
    from tests.cli_run import run_cli

    cfg_path = study[1]
    first = run_cli("candidate", "main", "--config", cfg_path, "--nights", "1", "--every", "0")
    again = run_cli("candidate", "main", "--config", cfg_path, "--nights", "1", "--every", "0")
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    progress = [ln for ln in again.stdout.splitlines() if " units, " in ln]
    # every unit was measured by the first sitting: nothing left, nothing scored again
    assert len(progress) == 1
    assert re.fullmatch(r"40/40 units, \d+ s this sitting, nothing left", progress[0])
    answer = lambda out: [ln for ln in out.splitlines() if "units, " not in ln]
    assert answer(first.stdout) == answer(again.stdout)
    assert "Candidate main-candidate against main on 1 past night(s) — retrospective" in \
        first.stdout
    assert first.stdout.splitlines()[-1] == ("the preregistered verdict of 'demo' is "
                                             "unchanged: these runs are experiment "
                                             "'demo.candidate.main', never a night of the study")


def test_the_report_gains_a_retrospective_section_and_keeps_the_studys_verdict(study,
                                                                                tmp_path):
    from dualpath.flows.weekly import write_report

    cfg = study[0]
    _, md0, before = write_report(cfg, tmp_path / "before")
    score(study, "reported", cfg.paths["main"], nights=study[2][-2:])
    _, md1, after = write_report(cfg, tmp_path / "after")
    assert after.verdict == before.verdict
    assert after.headline.lines == before.headline.lines
    assert "reported" in [a.candidate for a in after.candidates]
    assert "reported" not in [a.candidate for a in before.candidates]
    text = md1.read_text()
    section = text[text.index("## Retuning: candidates scored on past nights "
                              "(retrospective)"):text.index("## 5. Data and run hygiene")]
    assert "### Candidate reported against main on 2 past night(s) — retrospective" in section
    assert "never a night of the study; the preregistered verdict above is unchanged" in section
    # the pair's speed line is there whatever this machine's load made of the seconds
    assert "Speed — how much slower is reported?" in section
    # everything before the candidates' section reads as it did without the candidate
    head = lambda t: t[t.index("\n", t.index("generated")):t.index("## Retuning")]
    assert head(text) == head(md0.read_text())


def test_the_viewer_shows_each_candidate_on_its_own_retrospective_page(study):
    from starlette.testclient import TestClient

    from dualpath.viewer.app import create_app

    cfg = study[0]
    score(study, "viewed", cfg.paths["main"].model_copy(update={"slots": 6}),
          nights=study[2][:1])
    c = TestClient(create_app(cfg), base_url="http://127.0.0.1")
    page = c.get("/candidates")
    assert page.status_code == 200
    assert "<h2>Candidate viewed against main on 1 past night(s) — retrospective</h2>" in \
        page.text
    assert "  what viewed does differently from main: paths.slots 8 → 6" in page.text
    assert '<a href="/candidates">candidates scored on past nights</a>' in c.get("/").text
