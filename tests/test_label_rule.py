"""One rule for a window night that is not a result (`evals.verdict`): a partial, failed,
off-plan or never-run window night is a missing night. While the window is open the study is
interim and the night still counts if it is scored to completion (then named as late); once
the window has closed the missing nights are left out and disclosed with their count, and the
verdict is confirmatory only with the plan's minimum of complete nights
(`dualpath.prereg.min_complete_nights`), else exploratory.

On the seeded warehouse (`tests.seeded`, nights 2027-04-29 … 2027-05-13, the last one's backup
run partial) under a plan frozen before its first night: a 9-night window is closed (its last
night, 2027-05-12, and a later one were run); a 12-night window is open (2 nights to come).
The label is read from the warehouse's facts as `flows.prereg.study` gathers them, without
the metrics (slow on a loaded machine, and not what is tested here)."""

import shutil
from dataclasses import replace

import pytest

from dualpath.config import load_config
from dualpath.prereg import draft_plan, load_plan, min_complete_nights, plan_toml
from dualpath.evals.verdict import window_label
from dualpath.flows.metrics import load_frames
from dualpath.flows.prereg import freeze_plan, window_facts
from tests.seeded import seed_warehouse
from dualpath.warehouse.db import writer

NIGHT5, NIGHT6 = "2027-05-05", "2027-05-06"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """{window nights: a seeded study folder under a plan frozen before night 1}, each built
    once (drafting sizes the plan) and copied per test."""
    out = {}
    for window in (9, 12):
        root = tmp_path_factory.mktemp(f"window{window}")
        cfg_path, cfg, nights = seed_warehouse(root)
        plan = root / "prereg.toml"
        plan.write_text(plan_toml(draft_plan(cfg, nights[0], window, primary=1, margin=0.5)))
        freeze_plan(cfg, plan, force=True, reason="seeded after its nights")
        sql(cfg, "UPDATE plans SET forced = false, nights_before_freeze = 0, "
                 "force_reason = NULL",        # as if frozen before the rows were written
            "UPDATE runs SET started_at = night + INTERVAL 16 HOUR, segments = 1")
        out[window] = root
    return out


def project(built, tmp_path, window):
    shutil.copytree(built[window], tmp_path / "study")
    return load_config(tmp_path / "study" / "dualpath.toml")


def sql(cfg, *statements):
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        for s in statements:
            con.execute(s)


def label(cfg):
    """(label, text, reasons) as every report prints it; each analysed night is taken as
    matured at the primary h=1 (the seeded market's returns all mature)."""
    f = load_frames(cfg)
    facts = window_facts(cfg, f["frozen"], f["all_runs"] if f["all_runs"] is not None
                         else f["runs"], f["deviations"], None, None, f["scored"])
    return window_label(replace(facts, matured={1: len(facts.analysed)}))


def status(night, value, path="backup"):
    return f"UPDATE runs SET status = '{value}' WHERE night = DATE '{night}' AND path = '{path}'"


def never_run(night):
    return [f"DELETE FROM {t} WHERE night = DATE '{night}'" for t in ("calls", "units", "runs")]


def test_the_plans_minimum_is_the_nights_that_keep_the_power_it_was_sized_for(built):
    plan = load_plan(built[9] / "prereg.toml")
    # sd 0.378 (8 tickers, assumed), δ = 0.5: 6 nights give power ≥ 0.80, 5 do not
    assert min_complete_nights(plan) == (6, "the power 0.80 at h=1 the window was sized for")
    # a power the test reaches on its fewest nights: the test's own minimum
    easy = plan.model_copy(update={"primary": plan.primary.model_copy(update={"margin": 1.0})})
    assert min_complete_nights(easy) == (4, "its test's 4 non-overlapping nights at h=1")
    # a window sized below its power: the nights left must keep the whole window's power
    short = plan.model_copy(update={"window": plan.window.model_copy(update={"nights": 5})})
    assert min_complete_nights(short)[0] == 5


def test_the_complete_closed_window_is_plainly_confirmatory(built, tmp_path):
    cfg = project(built, tmp_path, 9)
    assert label(cfg) == ("confirmatory", "confirmatory", ())


@pytest.mark.parametrize("why,statements", [
    ("backup partial", [status(NIGHT5, "partial")]),
    ("backup failed", [status(NIGHT5, "failed")]),
    ("not run", never_run(NIGHT5)),
])
def test_a_missing_night_of_a_closed_window_is_disclosed_with_its_count(built, tmp_path, why,
                                                                        statements):
    cfg = project(built, tmp_path, 9)
    sql(cfg, *statements)
    assert label(cfg) == ("confirmatory", "confirmatory — 1 of 9 window night(s) missing, "
                          f"left out: {NIGHT5} ({why}); 8 complete (the plan's minimum 6)", ())


@pytest.mark.parametrize("why,statements", [
    ("backup partial", [status(NIGHT5, "partial")]),
    ("backup failed", [status(NIGHT5, "failed")]),
    ("not run", never_run(NIGHT5)),
])
def test_a_missing_night_of_an_open_window_keeps_the_study_interim(built, tmp_path, why,
                                                                   statements):
    cfg = project(built, tmp_path, 12)
    sql(cfg, *statements)
    gaps = (f"2 window night(s) missing so far: {NIGHT5} ({why}), 2027-05-13 (backup "
            "partial); each still counts if scored to completion, named as late")
    assert label(cfg) == (
        "interim", "interim — no decision: 8 of 12 window nights collected (next: "
        f"2027-05-14); {gaps}", ("8 of 12 window nights collected (next: 2027-05-14)", gaps))


def test_a_closed_window_below_the_plans_minimum_is_exploratory(built, tmp_path):
    cfg = project(built, tmp_path, 9)
    gone = ["2027-04-29", "2027-04-30", "2027-05-03", "2027-05-04"]
    sql(cfg, *[status(n, "failed", "main") for n in gone])
    why = ("the window has closed with 4 of 9 window night(s) missing: "
           + ", ".join(f"{n} (main failed)" for n in gone)
           + "; 5 complete, below the plan's minimum of 6 (the power 0.80 at h=1 the window "
           "was sized for)")
    assert label(cfg) == ("exploratory", f"exploratory — {why}", (why,))


def test_a_later_rerun_that_completes_a_missing_night_counts_and_is_named_late(built, tmp_path):
    cfg = project(built, tmp_path, 9)
    sql(cfg, status(NIGHT5, "failed"))
    assert label(cfg)[1].startswith("confirmatory — 1 of 9 window night(s) missing")
    # rerun after every later night: complete now, counted, and named as late
    sql(cfg, status(NIGHT5, "complete"),
        f"UPDATE runs SET started_at = TIMESTAMPTZ '2027-05-14 12:00:00+00' "
        f"WHERE night = DATE '{NIGHT5}' AND path = 'backup'")
    assert label(cfg) == ("confirmatory", f"confirmatory — 1 night scored late ({NIGHT5})", ())


def test_a_rerun_inside_an_open_window_is_named_late_and_stays_interim(built, tmp_path):
    cfg = project(built, tmp_path, 12)
    sql(cfg, status(NIGHT5, "failed"))
    sql(cfg, status(NIGHT5, "complete"),
        f"UPDATE runs SET started_at = TIMESTAMPTZ '2027-05-14 12:00:00+00' "
        f"WHERE night = DATE '{NIGHT5}' AND path = 'backup'")
    assert label(cfg)[:2] == (
        "interim", "interim — no decision: 9 of 12 window nights collected (next: 2027-05-14); "
        "1 window night(s) missing so far: 2027-05-13 (backup partial); each still counts if "
        f"scored to completion, named as late; 1 night scored late ({NIGHT5})")
