"""The plan holds the decision: interchangeability as the primary question with the nights it
needs, the RankIC follow-up's false-reassurance rate, and a freeze that needs --force --reason
when that rate is above 0.10 (recorded, without making the window exploratory)."""

import math

import pytest

from dualpath.errors import UserError
from dualpath.prereg import draft_plan, load_plan, plan_toml
from dualpath.prereg_design import ASSUMED_MAIN_IC, false_reassurance, reassurance_problems
from dualpath.evals import power as pw
from dualpath.flows.prereg import freeze_plan
from tests.helpers import make_project


def test_no_pilot_rate_is_the_worst_over_the_assumed_ics():
    rate, source = false_reassurance("non-inferiority", 1, 20, 0.06, 0.05, 100, None)
    expect = max(pw.false_reassurance("non-inferiority", m, 1 / math.sqrt(99), 100, 20, 0.06,
                                      0.05) for m in ASSUMED_MAIN_IC)
    assert rate == pytest.approx(expect) and source.startswith("assumed, no pilot")
    # main's IC 0.02 is the worst: the plan passes a no-signal backup about a third of the time
    assert rate == pytest.approx(pw.false_reassurance("non-inferiority", 0.02, 1 / math.sqrt(99),
                                                      100, 20, 0.06, 0.05))
    rate, source = false_reassurance("non-inferiority", 1, 20, 0.06, 0.05, 100,
                                     (0.05, 0.1, 12))
    assert source == "pilot: 12 nights, main's IC +0.050 (sd 0.100) at h=1"


def test_the_draft_holds_interchangeability_and_the_rate(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1)
    plan = draft_plan(cfg, nights[0], 20, margin=0.3)
    assert plan.interchange.limit == 0.5
    # 6 tickers: below the test's 20 no interval, so no nights can decide it, and it says so
    assert plan.interchange.nights_for_power is None
    assert plan.interchange.nights_basis == "no verdict at 6 tickers (its interval needs 20)"
    assert plan.design.false_reassurance > 0.10
    assert reassurance_problems(plan)[0].startswith(
        f"its false-reassurance rate is {plan.design.false_reassurance:.2f} (> 0.10)")
    # the fields survive the file, and a plan without them hashes as it did
    path = tmp_path / "prereg.toml"
    path.write_text(plan_toml(plan))
    assert load_plan(path) == plan
    old = plan.model_copy(update={"interchange": None, "design": plan.design.model_copy(
        update={"false_reassurance": None, "main_ic_source": None})})
    assert "interchange" not in old.model_dump_json(exclude_none=True)


def test_a_plan_that_would_not_reassure_needs_force_and_a_reason(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1)
    path = tmp_path / "prereg.toml"
    path.write_text(plan_toml(draft_plan(cfg, nights[0], 20, margin=0.3)))
    with pytest.raises(UserError, match=r"the plan would not reassure: its false-reassurance "
                       r"rate is 0\.\d\d \(> 0\.10\)"):
        freeze_plan(cfg, path)
    with pytest.raises(UserError, match="a forced freeze needs --reason"):
        freeze_plan(cfg, path, force=True)
    frozen = freeze_plan(cfg, path, force=True, reason="a pilot decides the margin later")
    # recorded, and the window is not exploratory for it (its test is the planned one)
    assert not frozen.forced and frozen.force_reason == "a pilot decides the margin later"


def test_draft_prints_the_primary_question_and_the_rate(tmp_path):
    from typer.testing import CliRunner

    from dualpath.cli import app

    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1)
    out = CliRunner().invoke(app, ["prereg", "draft", str(tmp_path / "p.toml"), "-c",
                                   str(cfg_path), "--first-night", str(nights[0]), "--nights",
                                   "20", "--margin", "0.3"], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    p = load_plan(tmp_path / "p.toml")
    assert (f"primary: interchangeability of grades (backup keeps ≥ 50% of main's draw-to-draw "
            "agreement), no verdict at 6 tickers (its interval needs 20); the window has "
            "20; RankIC non-inferiority is the confirmatory follow-up") in text
    assert (f"false reassurance {p.design.false_reassurance:.2f}: P(a backup with no signal "
            "passes the RankIC primary) (assumed, no pilot: the worst over main's IC 0.02–0.05)"
            " — above 0.10: freezing it needs --force --reason") in text


def _rewritten(cfg_path, change):
    import tomllib

    from dualpath.config import dump_toml, load_config

    data = tomllib.loads(cfg_path.read_text())
    change(data)
    cfg_path.write_text(dump_toml(data) + "\n")
    return load_config(cfg_path)


def test_a_reordered_universe_is_no_deviation_and_edited_horizons_are(tmp_path):
    from dualpath.prereg import deviations

    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1)
    plan = draft_plan(cfg, nights[0], 20, margin=0.3)
    cfg = _rewritten(cfg_path, lambda d: d["experiment"].update(
        universe=list(reversed(d["experiment"]["universe"]))))
    assert deviations(plan, cfg) == []
    cfg = _rewritten(cfg_path, lambda d: d["experiment"].update(horizons=[1, 5]))
    assert deviations(plan, cfg) == ["horizons [1, 5] (plan: [1, 5, 20])"]


def test_the_freeze_date_is_the_studys_not_utcs():
    from datetime import datetime, timezone

    from dualpath.flows.prereg import frozen_on

    at = datetime(2027, 1, 5, 1, 30, tzinfo=timezone.utc)      # 20:30 in New York on the 4th
    assert str(frozen_on(at, "America/New_York")) == "2027-01-04"
    assert str(frozen_on(at, "Asia/Seoul")) == "2027-01-05"
    assert str(frozen_on(at.replace(tzinfo=None), "America/New_York")) == "2027-01-04"
