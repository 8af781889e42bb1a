"""Preregistration: a plan frozen by hash, nights held to it, deviations logged."""

import pytest

from dualpath.config import load_config
from dualpath.errors import ConfigError, UserError
from dualpath.prereg import draft_plan, load_plan, plan_toml
from dualpath.flows.prereg import freeze_plan, frozen_plan, hold_night_to_plan
from tests.helpers import ingest, make_project, score_night_plain, SimFleet


def project(tmp_path, **kw):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=5, draws=1, nights=2, **kw)
    plan_path = tmp_path / "prereg.toml"
    plan_path.write_text(plan_toml(draft_plan(cfg, nights[0], 4, margin=0.03)))
    return cfg_path, cfg, nights, plan_path


def test_the_hash_is_of_the_content_not_the_formatting(tmp_path):
    cfg_path, cfg, nights, plan_path = project(tmp_path)
    plan = load_plan(plan_path)
    reformatted = tmp_path / "again.toml"
    reformatted.write_text("# a comment\n\n" + plan_path.read_text().replace(" = ", "="))
    assert load_plan(reformatted).sha256() == plan.sha256()
    edited = tmp_path / "edited.toml"
    edited.write_text(plan_path.read_text().replace("margin = 0.03", "margin = 0.05", 1))
    assert load_plan(edited).sha256() != plan.sha256()


def test_freeze_then_status_then_a_changed_config_is_a_logged_deviation(tmp_path):
    cfg_path, cfg, nights, plan_path = project(tmp_path)
    frozen = freeze_plan(cfg, plan_path, force=True, reason="a test window: its false reassurance is accepted")
    assert not frozen.forced and frozen.plan_hash == load_plan(plan_path).sha256()
    assert hold_night_to_plan(cfg, nights[0]) == []          # the planned config
    cfg_path.write_text(cfg_path.read_text().replace("temperature = 0.7", "temperature = 0.6"))
    changed = load_config(cfg_path)
    differ = hold_night_to_plan(changed, nights[1])
    assert differ and "path main config changed" in differ[0]
    log = frozen_plan(changed)[1].to_dict("records")
    assert [(d["kind"], str(d["night"])[:10]) for d in log] == [
        ("config differs from plan", str(nights[1]))]


def test_a_plan_that_refuses_deviations_stops_the_night(tmp_path):
    cfg_path, cfg, nights, plan_path = project(tmp_path)
    plan_path.write_text(plan_path.read_text().replace('on_deviation = "record"',
                                                       'on_deviation = "refuse"'))
    freeze_plan(cfg, plan_path, force=True, reason="a test window: its false reassurance is accepted")
    cfg_path.write_text(cfg_path.read_text().replace("draws = 1", "draws = 2"))
    with pytest.raises(UserError, match="refused: the config differs from the frozen plan"):
        hold_night_to_plan(load_config(cfg_path), nights[0])
    assert frozen_plan(cfg)[1]["kind"].tolist() == ["night refused"]


def test_freezing_after_nights_exist_is_refused_unless_forced(tmp_path):
    cfg_path, cfg, nights, plan_path = project(tmp_path)
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    with pytest.raises(UserError, match="1 night\\(s\\) of the window already exist"):
        freeze_plan(cfg, plan_path)
    frozen = freeze_plan(cfg, plan_path, force=True, reason="pilot night kept")
    assert frozen.forced and frozen.nights_before_freeze == 1
    assert frozen.force_reason == "pilot night kept"


def test_a_plan_that_does_not_describe_the_config_cannot_be_frozen(tmp_path):
    cfg_path, cfg, nights, plan_path = project(tmp_path)
    plan_path.write_text(plan_path.read_text().replace("draws = 1", "draws = 3"))
    with pytest.raises(UserError, match="draws 1 \\(plan: 3\\)"):
        freeze_plan(cfg, plan_path)
    plan_path.write_text(plan_path.read_text().replace('baseline = "main"', 'baseline = "x"'))
    with pytest.raises(ConfigError, match="path 'x' has no fingerprint"):
        load_plan(plan_path)
