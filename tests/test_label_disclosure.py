"""A counted night's history is named in every label: a night scored late (after its due
time, or after a later night) and a night resumed after an interruption; a window night not
scored, though later ones were, is a missing night: once the window has closed it is left
out and disclosed (`tests/test_label_rule.py` has the rule's every case); a weekly look
inside the window is interim, not a sub-window. On the seeded warehouse
(`tests.seeded`), under a plan frozen before its first night, window 9 nights (the seeded
last night, whose backup run is partial, lies outside it)."""

from datetime import date, datetime, timezone

import pandas as pd
import pytest

from dualpath.prereg import draft_plan, plan_toml
from dualpath.evals.verdict import late_nights
from dualpath.flows.prereg import freeze_plan, study
from tests.cli_run import run_cli
from tests.seeded import seed_warehouse
from dualpath.warehouse.db import writer

# the seeded nights: 2027-04-29, -30, 05-03, -04, -05, -06, -07, -10, -12 (the window) and -13
NIGHT3, NIGHT4, NIGHT5, NIGHT6 = "2027-05-03", "2027-05-04", "2027-05-05", "2027-05-06"


@pytest.fixture
def planned(tmp_path):
    """The seeded warehouse under a plan as frozen before night 1: each night's runs begin at
    16:00 UTC on the night (01:00 in Seoul the next day, before the next session's close at
    15:30), one segment each."""
    cfg_path, cfg, nights = seed_warehouse(tmp_path)
    plan = tmp_path / "prereg.toml"
    plan.write_text(plan_toml(draft_plan(cfg, nights[0], 9, primary=1, margin=0.5)))
    freeze_plan(cfg, plan, force=True, reason="seeded after its nights")
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        # the rows were written directly, so the freeze came after them: put it back before
        con.execute("UPDATE plans SET forced = false, nights_before_freeze = 0, "
                    "force_reason = NULL")
        con.execute("UPDATE runs SET started_at = night + INTERVAL 16 HOUR, segments = 1")
    return cfg_path, cfg


def sql(cfg, *statements):
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        for s in statements:
            con.execute(s)


def headline(cfg_path, *args) -> str:
    """`dualpath metrics`' first screen: the headline, up to its first blank line."""
    r = run_cli("metrics", "-c", cfg_path, *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.split("\n\n")[0]


def words(text: str) -> str:
    """The text with its console wrapping undone (rich wraps at the console's width)."""
    return " ".join(text.split())


def label_lines(text: str) -> list[str]:
    """The quality questions' lines and their labels: each question line and the lines after
    it up to its first figure (Speed and Energy carry no label)."""
    out, keep = [], False
    for line in text.splitlines():
        if line.startswith(("Quality", "RankIC")):
            keep = True
        elif line.startswith(("Speed", "Energy", "  disagreement", "  ΔIC")):
            keep = False
        if keep:
            out.append(line)
    return out


def test_nights_in_order_and_on_time_are_plainly_confirmatory(planned):
    cfg_path, cfg = planned
    st = study(cfg)
    assert (st.verdict.label, st.verdict.label_text) == ("confirmatory", "confirmatory")
    assert (st.facts.late, st.facts.resumed, st.facts.missing) == ({}, [], [])


def test_a_late_and_a_resumed_night_are_named_wherever_the_label_prints(planned, tmp_path):
    cfg_path, cfg = planned
    # night 3 scored two days on, after night 4's runs began; night 6's backup run resumed
    sql(cfg, f"UPDATE runs SET started_at = TIMESTAMPTZ '{NIGHT5} 17:00:00+00' "
             f"WHERE night = DATE '{NIGHT3}'",
        f"UPDATE runs SET segments = 2 WHERE night = DATE '{NIGHT6}' AND path = 'backup'")
    told = "1 night scored late (2027-05-03), 1 resumed (2027-05-06)"
    st = study(cfg)
    assert st.verdict.label == "confirmatory" and st.verdict.reasons == ()
    assert st.verdict.label_text == f"confirmatory — {told}"
    why = ("night 2027-05-03 was scored late: its scoring began 2027-05-06 02:00 Asia/Seoul, "
           "after night 2027-05-04's scoring began")         # 17:00 UTC on the 5th
    resumed = "1 night(s) counted with a run resumed after an interruption: 2027-05-06"
    assert st.metrics.notes[1:3] == [why, resumed]
    # the label's word on each question's first line, why it is that label once (under the
    # first); the plan's margin δ = 0.5 passes a backup with no signal 79% of the time, so
    # its 'non-inferior' is said not to reassure in the same words
    assert label_lines(headline(cfg_path)) == [
        "Quality — are backup's grades interchangeable with main's?  inconclusive  [confirmatory]",
        f"  confirmatory: {told}",
        "RankIC — is backup's signal as good as main's?  non-inferior, not reassuring  "
        "[confirmatory]"]
    r = run_cli("report", "-c", cfg_path, "--out", tmp_path / "out")
    md = tmp_path / "out" / "demo-2027-04-29-2027-05-13.md"
    assert words(r.stdout) == f"report (confirmatory — {told}): {md.with_suffix('.html')} {md}"
    # the Markdown is the weekly artifact's text (flows.weekly publishes it as it is)
    text = _ungenerated(md.read_text())
    # the header counts the nights analysed and names the one left out
    assert (f"9 night(s) analysed; 1 left out (2027-05-13: outside the plan's window) · "
            f"generated {{}} · **confirmatory — {told}**") in text
    assert why in text and resumed in text


def _ungenerated(md: str) -> str:
    import re
    return re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated {}", md)


def test_a_night_begun_after_the_next_sessions_close_is_late_though_in_order(planned):
    cfg_path, cfg = planned
    # 10:00 UTC on the 6th is 19:00 in Seoul, after that session's 15:30 close, when night
    # 6 was the one to score; night 6's own runs began later (16:00 UTC), so only the time
    # says it is late
    sql(cfg, f"UPDATE runs SET started_at = TIMESTAMPTZ '{NIGHT6} 10:00:00+00' "
             f"WHERE night = DATE '{NIGHT5}'")
    st = study(cfg)
    assert st.verdict.label_text == "confirmatory — 1 night scored late (2027-05-05)"
    assert st.metrics.notes[1] == ("night 2027-05-05 was scored late: its scoring began "
                                   "2027-05-06 19:00 Asia/Seoul, after the next session's close")


def test_one_paths_run_scored_after_a_later_night_makes_its_night_late(planned):
    cfg_path, cfg = planned
    sql(cfg, f"UPDATE runs SET started_at = TIMESTAMPTZ '{NIGHT4} 18:00:00+00' "
             f"WHERE night = DATE '{NIGHT3}' AND path = 'backup'")
    assert study(cfg).verdict.label_text == "confirmatory — 1 night scored late (2027-05-03)"


def test_a_missing_middle_night_is_disclosed_then_named_when_scored_late(planned, tmp_path):
    cfg_path, cfg = planned
    keep = tmp_path / "night3"
    keep.mkdir()
    sql(cfg, *[f"COPY (SELECT * FROM {t} WHERE night = DATE '{NIGHT3}') TO "
               f"'{keep / t}.parquet'" for t in ("runs", "units", "calls")],
        *[f"DELETE FROM {t} WHERE night = DATE '{NIGHT3}'" for t in ("calls", "units", "runs")])
    st = study(cfg)
    # the window has closed (its last night was run): the night is missing, left out and
    # disclosed; 8 complete nights keep the plan's minimum
    told = ("1 of 9 window night(s) missing, left out: 2027-05-03 (not run); 8 complete (the "
            "plan's minimum 6)")
    assert st.verdict.label == "confirmatory" and st.facts.missing == [date(2027, 5, 3)]
    assert st.verdict.label_text == f"confirmatory — {told}"
    # the interchangeability test's final look is at the 8 nights collected (its boundary
    # at information 8/9 spends the α look 1 left), not a look at night 9 that never comes
    assert label_lines(headline(cfg_path, "--verbose")) == [
        "Quality — are backup's grades interchangeable with main's?  inconclusive  [confirmatory]",
        "  confirmatory: 1 of 9 window night(s) missing, left out: 2027-05-03 (not run); 8 "
        "complete (the",
        "    plan's minimum 6)",
        "  group-sequential: O'Brien-Fleming spending over looks at night(s) 5/8 (planned 5/9: "
        "the window",
        "    closed with 8 of 9 nights, its final look spending all α left at information 8/9)",
        "RankIC — is backup's signal as good as main's?  non-inferior, not reassuring  "
        "[confirmatory]"]
    # scored now, after every later night: counted, and named
    sql(cfg, *[f"INSERT INTO {t} SELECT * FROM '{keep / t}.parquet'"
               for t in ("runs", "units", "calls")],
        f"UPDATE runs SET started_at = TIMESTAMPTZ '2027-05-14 12:00:00+00' "
        f"WHERE night = DATE '{NIGHT3}'")
    assert study(cfg).verdict.label_text == "confirmatory — 1 night scored late (2027-05-03)"


def test_a_weekly_look_inside_the_window_is_interim(planned, tmp_path):
    cfg_path, cfg = planned
    r = run_cli("report", "-c", cfg_path, "--week", "2027-W18", "--out", tmp_path / "out")
    md = tmp_path / "out" / "demo-2027-04-29-2027-05-09.md"
    assert r.returncode == 0, r.stderr
    assert words(r.stdout) == ("report (interim — no decision: a look as of 2027-05-09: 7 of 9 "
                               "window nights collected by then (next: 2027-05-10)): "
                               f"{md.with_suffix('.html')} {md}")
    assert run_cli("report", "-c", cfg_path, "--week", "2027-W19", "--out",
                   tmp_path / "out").stdout.startswith("report (confirmatory): ")
    # a range that does not start at the window's first night is still a sub-window
    r = run_cli("report", "-c", cfg_path, "--since", "2027-05-03", "--out", tmp_path / "out")
    assert r.stdout.startswith("report (exploratory — the analysis covers 2027-05-03 – ")


def test_an_interim_look_names_no_verdict_word_in_notes_card_or_table(planned):
    from dualpath.evals.result import headline_table
    from dualpath.evals.weekly import ReportData
    from dualpath.evals.weekly.render import cards
    from dualpath.flows.glance import metrics_and_headline

    cfg_path, cfg = planned
    m, head = metrics_and_headline(cfg, None, None, date(2027, 5, 9))
    v = head.verdict
    assert v.label == "interim" and v.verdict == "non-inferior"      # so far; not a decision
    assert m.notes[0].startswith("primary: interim — no decision (non-inferiority, δ = 0.5, "
                                 "α = 0.05): ΔIC ")
    row = headline_table(head).set_index("question").loc["rankic"]
    assert (row["answer"], row["detail"]) == ("interim — no decision", v.label_text)
    data = ReportData("demo", date(2027, 4, 29), date(2027, 5, 9), datetime.now(timezone.utc),
                      m, *[pd.DataFrame()] * 5, headline=head)
    rankic = lambda: next(c for c in cards(data) if c["question"].startswith("RankIC"))  # noqa: E731
    assert rankic()["cls"] == "verdict open"                # never the green of a decision
    done = metrics_and_headline(cfg)[1]                       # the whole window: decided
    # δ = 0.5 passes a backup with no signal far above 10% of the time: never bare
    assert headline_table(done).set_index("question").loc["rankic", "answer"] == \
        "non-inferior, not reassuring"
    data.headline = done
    assert rankic()["cls"] == "verdict open"        # a pass that does not reassure: not green


def T(text: str) -> pd.Timestamp:
    return pd.Timestamp(text, tz="UTC")


def test_late_nights_by_hand():
    n1, n2, n3 = date(2027, 1, 4), date(2027, 1, 5), date(2027, 1, 6)
    due = {n1: T("2027-01-05 06:30"), n2: T("2027-01-06 06:30"), n3: T("2027-01-07 06:30")}
    on_time = {n1: (T("2027-01-04 08:00"),) * 2, n2: (T("2027-01-05 08:00"),) * 2,
               n3: (T("2027-01-06 08:00"),) * 2}
    assert late_nights(on_time, due) == {}
    # n2 skipped, scored after n3 began (yet before its own due time: order alone says late)
    skipped = {**on_time, n2: (T("2027-01-06 06:00"),) * 2, n3: (T("2027-01-06 05:00"),) * 2}
    assert late_nights(skipped, due) == {n2: "after night 2027-01-06's scoring began"}
    # exactly at the due time is late; one path's late start is the night's
    assert late_nights({**on_time, n1: (T("2027-01-04 08:00"), T("2027-01-05 06:30"))},
                       due) == {n1: "after the next session's close"}
    # an unknown start (a warehouse written before it was recorded) is never late
    assert late_nights({**on_time, n1: (pd.NaT, pd.NaT)}, due) == {}


def test_horizons_edited_after_the_freeze_are_a_deviation_the_label_names(planned):
    import tomllib

    from dualpath.config import dump_toml, load_config
    from dualpath.flows.prereg import hold_night_to_plan

    cfg_path, cfg = planned
    data = tomllib.loads(cfg_path.read_text())
    data["experiment"]["horizons"] = [1, 5]
    cfg_path.write_text(dump_toml(data) + "\n")
    cfg = load_config(cfg_path)
    assert hold_night_to_plan(cfg, date(2027, 5, 12)) == ["horizons [1, 5] (plan: [1, 5, 20])"]
    st = study(cfg)
    # the night is left out as the plan says; the closed window keeps the plan's minimum
    assert st.verdict.label == "confirmatory" and st.verdict.horizon == 1   # the plan's primary
    assert st.verdict.label_text == (
        "confirmatory — 1 of 9 window night(s) missing, left out: 2027-05-12 (config differs "
        "from plan); 8 complete (the plan's minimum 6)")
