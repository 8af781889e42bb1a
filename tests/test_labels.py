"""Labels a reviewer would sign: 'confirmatory' only with every condition met, else the report
says which failed (issue 21's seven cases), and the plan's test is the test that runs."""

import shutil

import pytest

from dualpath.config import load_config
from dualpath.errors import UserError
from dualpath.prereg import draft_plan, plan_toml
from dualpath.flows.prereg import freeze_plan, hold_night_to_plan, study
from dualpath.flows.weekly import write_report
from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from dualpath.warehouse.db import writer


def history(tmp_path, nights=4, window=4, primary=1, skip=(), change_at=None, freeze=True,
            edit=None):
    """A project whose plan (window `window`, primary `primary`) is frozen before night 1,
    then `nights` nights scored (`skip`: not run; `change_at`: config changed from there)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg_path, cfg, all_nights = make_project(tmp_path, tickers=8, draws=1, nights=nights)
    plan = tmp_path / "prereg.toml"
    text = plan_toml(draft_plan(cfg, all_nights[0], window, primary=primary, margin=0.5))
    plan.write_text(edit(text) if edit else text)
    if freeze:
        freeze_plan(cfg, plan, force=True, reason="a test window: its false reassurance is accepted")
    with SimFleet(cfg) as fleet:
        for i, n in enumerate(all_nights):
            if i == change_at:
                cfg_path.write_text(cfg_path.read_text().replace("temperature = 0.7",
                                                                 "temperature = 0.6"))
                cfg = load_config(cfg_path)
            if i in skip:
                continue
            hold_night_to_plan(cfg, n)
            ingest(cfg, score_night_plain(cfg, n, fleet.urls))
    return cfg, plan, all_nights


@pytest.fixture(scope="module")
def _intact_built(tmp_path_factory):
    """`history`'s default project (4 nights, window 4), scored once for this module."""
    root = tmp_path_factory.mktemp("intact")
    with pytest.MonkeyPatch.context() as mp:           # built where a test would build it
        mp.chdir(root)
        return root, history(root)[2]


@pytest.fixture
def intact(tmp_path, _intact_built):
    """`history(tmp_path)`: the module's scored copy in this test's folder (the config's
    paths and the frozen plan's are relative to the config's folder, so a copy is the same
    study)."""
    root, nights = _intact_built
    shutil.copytree(root, tmp_path, dirs_exist_ok=True)
    return load_config(tmp_path / "dualpath.toml"), tmp_path / "prereg.toml", nights


def label(cfg, tmp_path, **kw):
    html, md, data = write_report(cfg, tmp_path / "out", **kw)
    return data, md.read_text()


def test_an_intact_plan_over_its_complete_window_is_confirmatory(tmp_path, intact):
    cfg, plan, nights = intact
    data, md = label(cfg, tmp_path)
    assert data.verdict.label == "confirmatory" and data.verdict.reasons == ()
    assert data.verdict.n_independent == 4 and data.verdict.test == "non-inferiority"
    assert data.verdict.ci_low <= data.verdict.estimate <= data.verdict.ci_high
    assert "90% two-sided t interval" in data.verdict.ci_text
    assert "one-sided 95% bounds" in data.verdict.ci_text
    assert 0 < data.verdict.power < 1 and "from the plan" in data.verdict.power_text
    assert "**confirmatory**" in md and "Power " in md


def test_case1_a_window_that_can_never_reach_a_verdict_is_refused_then_forced(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=1, nights=4)
    plan = tmp_path / "prereg.toml"
    plan.write_text(plan_toml(draft_plan(cfg, nights[0], 6, primary=5)))
    with pytest.raises(UserError, match=r"give 2 non-overlapping night\(s\) at the primary "
                       r"horizon h=5; its test needs 4 \(16 nights\)"):
        freeze_plan(cfg, plan)
    with pytest.raises(UserError, match="a forced freeze needs --reason"):
        freeze_plan(cfg, plan, force=True)
    frozen = freeze_plan(cfg, plan, force=True, reason="a smoke test of the flow")
    assert frozen.forced and frozen.force_reason == "a smoke test of the flow"
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    data, md = label(cfg, tmp_path)
    assert data.verdict.label == "exploratory"
    assert any("frozen with --force (reason: a smoke test of the flow)" in r
               for r in data.verdict.reasons)
    assert any("its test needs 4 (16 nights)" in r for r in data.verdict.reasons)
    assert "reason: a smoke test of the flow" in md


def test_case2_a_deviating_night_is_dropped_and_the_label_says_so(tmp_path):
    cfg, plan, nights = history(tmp_path, change_at=3)
    data, md = label(cfg, tmp_path)
    assert data.verdict.label == "exploratory"
    assert any(f"{nights[3]} (config differs from plan)" in r for r in data.verdict.reasons)
    assert set(data.metrics.nightly_ic["night"].dt.date) == set(nights[:3])   # never pooled
    assert data.plan.nights_collected == 3
    from dualpath.flows.metrics import load_metrics
    same = load_metrics(cfg)                  # `dualpath metrics` says the same, not pooled
    assert same.comparison["mean_delta"].equals(data.metrics.comparison["mean_delta"])
    assert set(same.nightly_ic["night"].dt.date) == set(nights[:3])


def test_case3_a_night_after_the_window_is_never_pooled(tmp_path):
    cfg, plan, nights = history(tmp_path, nights=5, window=4)
    data, md = label(cfg, tmp_path)
    assert set(data.metrics.nightly_ic["night"].dt.date) == set(nights[:4])
    assert data.verdict.label == "confirmatory"
    assert any("1 night(s) outside the plan's window" in n for n in data.metrics.notes)
    from dualpath.flows.metrics import load_metrics
    same = load_metrics(cfg)                         # `dualpath metrics` analyses the same
    assert set(same.nightly_ic["night"].dt.date) == set(nights[:4])
    assert same.comparison.equals(data.metrics.comparison)
    one = load_metrics(cfg, ["main"])               # --path main: the same window nights
    assert set(one.nightly_ic["night"].dt.date) == set(nights[:4])


def test_case4_a_missing_window_night_is_not_masked_by_an_extra_one(tmp_path):
    cfg, plan, nights = history(tmp_path, nights=5, window=4, skip=(1,))
    data, md = label(cfg, tmp_path)
    # the window has closed (a later night was run): the missing night is left out, and the
    # 3 nights left are below the plan's minimum
    assert data.verdict.label == "exploratory"
    assert data.verdict.reasons == (f"the window has closed with 1 of 4 window night(s) "
                                    f"missing: {nights[1]} (not run); 3 complete, below the "
                                    "plan's minimum of 4 (its test's 4 non-overlapping nights "
                                    "at h=1)",)
    assert data.plan.nights_collected == 3 and data.plan.window_nights == 4
    assert "Window nights analysed (complete and conforming): 3 of 4" in md


def test_a_missing_middle_night_scored_late_counts_and_is_named(tmp_path):
    cfg, plan, nights = history(tmp_path, skip=(1,))
    with SimFleet(cfg) as fleet:                   # scored now, after nights 3 and 4
        hold_night_to_plan(cfg, nights[1])
        ingest(cfg, score_night_plain(cfg, nights[1], fleet.urls))
    data, md = label(cfg, tmp_path)
    assert data.verdict.label == "confirmatory" and data.verdict.reasons == ()
    assert data.verdict.label_text == f"confirmatory — 1 night scored late ({nights[1]})"
    assert f"**confirmatory — 1 night scored late ({nights[1]})**" in md


def test_case5_a_hand_picked_sub_window_is_exploratory(tmp_path, intact):
    cfg, plan, nights = intact
    data, md = label(cfg, tmp_path, since=nights[1])
    assert data.verdict.label == "exploratory"
    assert any("a sub-window is exploratory" in r for r in data.verdict.reasons)
    assert set(data.metrics.nightly_ic["night"].dt.date) == set(nights[1:])


def test_case6_a_plan_forced_after_every_night_was_seen_is_exploratory(tmp_path, intact):
    cfg, plan, nights = intact
    again = tmp_path / "again.toml"
    again.write_text(plan.read_text().replace("margin = 0.5", "margin = 0.4"))
    with pytest.raises(UserError, match="already has a frozen plan"):
        freeze_plan(cfg, again)
    freeze_plan(cfg, again, force=True, reason="looked at the data")
    data, md = label(cfg, tmp_path)
    assert data.verdict.label == "exploratory" and data.verdict.margin == 0.4
    assert any("frozen with --force after 4 night(s) of the window (reason: looked at the "
               "data)" in r for r in data.verdict.reasons)


def test_case7_a_primary_horizon_matured_on_one_night_is_interim(tmp_path, intact):
    cfg, plan, nights = intact
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("DELETE FROM prices WHERE date > ?", [nights[1]])
    data, md = label(cfg, tmp_path)
    assert data.verdict.label == "interim"
    assert "the primary horizon h=1 has matured on 1 of 4 window nights" in data.verdict.reasons
    assert data.verdict.verdict == "insufficient nights"


def test_an_edited_plan_in_a_copied_study_folder_is_caught(tmp_path, _intact_built):
    shutil.copytree(_intact_built[0], tmp_path / "a")
    cfg = load_config(tmp_path / "a" / "dualpath.toml")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    copy = tmp_path / "b" / "prereg.toml"
    copy.write_text(copy.read_text().replace("margin = 0.5", "margin = 0.9", 1))
    moved = load_config(tmp_path / "b" / "dualpath.toml")
    data, md = label(moved, tmp_path)
    assert data.plan.file_state == "edited" and str(copy) == data.plan.file_path
    assert data.verdict.label == "exploratory" and "hash mismatch" in data.verdict.label_text
    assert label(cfg, tmp_path / "a")[0].verdict.label == "confirmatory"   # the original


def test_a_difference_plan_gets_a_difference_test(tmp_path):
    cfg, plan, nights = history(tmp_path, edit=lambda t: t.replace(
        'test = "non-inferiority"', 'test = "difference"', 1))
    st = study(cfg)
    row = st.metrics.comparison.set_index("horizon").loc[1]
    assert row["test"] == "difference" and row["ci_level"] == pytest.approx(0.95)
    assert st.verdict.test == "difference"
    assert st.verdict.verdict in ("candidate better", "candidate worse", "inconclusive")
    assert "95% two-sided t interval" in st.verdict.ci_text
    assert st.metrics.comparison.set_index("horizon").loc[5, "test"] == "non-inferiority"


def test_a_method_the_code_does_not_implement_is_refused_even_forced(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=1, nights=1)
    plan = tmp_path / "prereg.toml"
    plan.write_text(plan_toml(draft_plan(cfg, nights[0], 4)).replace(
        'inference = "t-nonoverlapping"', 'inference = "Newey-West HAC"'))
    with pytest.raises(UserError, match="inference 'Newey-West HAC' is not a method"):
        freeze_plan(cfg, plan, force=True, reason="x")
