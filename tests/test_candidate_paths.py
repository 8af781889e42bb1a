"""The user's own retuning questions as candidates scored on past nights of a real small
study (simulated main path, 20 tickers x 2 draws, its inputs frozen as the nightly flow
freezes them): another slot count, a degraded model, thinking on."""

from __future__ import annotations

import asyncio

import pytest

from dualpath.evals.candidate import RETROSPECTIVE
from dualpath.flows import candidate as fc
from dualpath.flows import candidate_answer as fa
from dualpath.flows import inputs, runner
from dualpath.flows.frozen import freeze_night
from tests.helpers import SimFleet, ingest, make_project

NIGHTS = 5     # at the sim's ρ_RR ~0.55, 20 tickers: power ~0.96 (noise) and ~0.99 (equal)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study: main alone scored on NIGHTS nights, each night's inputs frozen first."""
    root = tmp_path_factory.mktemp("study")
    cfg_path, cfg, nights = make_project(root, tickers=20, draws=2, nights=NIGHTS)
    cfg = cfg.model_copy(update={"paths": {"main": cfg.paths["main"]}})
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
