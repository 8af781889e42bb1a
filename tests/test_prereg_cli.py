"""`dualpath prereg draft | freeze | status` from the command line: a plan sized by its power,
a forced freeze that needs a reason, and a status that says what a report would."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dualpath.cli import app
from dualpath.prereg import load_plan
from tests.helpers import make_project
from tests.test_labels import history


DATA = Path(__file__).parent / "data"


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_draft_prints_power_per_horizon_and_proposes_h1(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=20, draws=1, nights=1)
    plan = tmp_path / "prereg.toml"
    r = run("prereg", "draft", plan, "-c", cfg_path, "--first-night", nights[0], "--nights", 25)
    assert r.exit_code == 0, r.output
    for col in ("independent", "min detectable ΔIC", "power at δ=0.03", "nights for power 0.8"):
        assert col in r.output
    assert "assumed, no pilot" in r.output and "proposed primary: h=1" in r.output
    p = load_plan(plan)
    assert p.primary.horizon == 1 and p.design.power == 0.8
    assert p.design.sd_delta["1"] > 0 and p.primary.margin >= 0.03
    again = run("prereg", "draft", tmp_path / "b.toml", "-c", cfg_path, "--first-night",
                nights[0], "--nights", 25, "--sd-delta", "1=0.05,5=0.06,20=0.07",
                "--margin", 0.04, "--primary", 5)
    assert again.exit_code == 0, again.output
    b = load_plan(tmp_path / "b.toml")
    assert (b.primary.horizon, b.primary.margin) == (5, 0.04)
    assert b.design.sd_delta == {"1": 0.05, "5": 0.06, "20": 0.07}
    assert b.design.sd_source.startswith("given")


def test_a_forced_freeze_without_a_reason_is_refused(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=1, nights=1)
    plan = tmp_path / "prereg.toml"
    run("prereg", "draft", plan, "-c", cfg_path, "--first-night", nights[0], "--nights", 3)
    r = run("prereg", "freeze", plan, "-c", cfg_path)
    assert r.exit_code != 0 and "cannot test the primary" in str(r.exception)
    r = run("prereg", "freeze", plan, "-c", cfg_path, "--force")
    assert r.exit_code != 0 and "needs --reason" in str(r.exception)
    r = run("prereg", "freeze", plan, "-c", cfg_path, "--force", "--reason", "3-night smoke")
    assert r.exit_code == 0 and "forced: 3-night smoke" in r.output


def test_status_shows_file_vs_hash_matured_nights_and_todays_label(tmp_path):
    cfg, plan, nights = history(tmp_path)
    cfg_path = tmp_path / "dualpath.toml"
    r = run("prereg", "status", "-c", cfg_path)
    assert r.exit_code == 0, r.output
    assert "matches the frozen hash" in r.output
    assert "matured per horizon: h=1: 4 of 4" in r.output
    assert "label today: confirmatory" in r.output
    plan.write_text(plan.read_text().replace("margin = 0.5", "margin = 0.9", 1))
    r = run("prereg", "status", "-c", cfg_path)
    assert "EDITED AFTER FREEZING" in r.output
    assert "label today: exploratory" in r.output and "hash mismatch" in r.output


def test_freezing_an_unchanged_plan_again_records_nothing_and_says_so(tmp_path):
    """A comment changes the file, not the plan's canonical hash: a second freeze, forced
    with a new reason, finds that hash frozen, records nothing and says the options were
    ignored (it used to print the old freeze as if it were this one)."""
    import re

    from dualpath.warehouse.db import reader

    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=1, nights=1)
    plan = tmp_path / "prereg.toml"
    run("prereg", "draft", plan, "-c", cfg_path, "--first-night", nights[0], "--nights", 3)
    first = run("prereg", "freeze", plan, "-c", cfg_path, "--force", "--reason", "3-night smoke")
    assert first.exit_code == 0, first.output
    plan.write_text(plan.read_text() + "# reviewed again\n")
    normal = lambda out: re.sub(r"[0-9a-f]{64} at \d{4}-\d\d-\d\d \d\d:\d\d UTC", "H at T",
                                " ".join(out.split()))          # the test console wraps at 80
    again = run("prereg", "freeze", plan, "-c", cfg_path, "--force", "--reason", "[new] why")
    assert again.exit_code == 0, again.output
    assert normal(again.output) == ("already frozen with this hash: H at T (forced: 3-night "
                                    "smoke); nothing recorded (--force/--reason ignored)")
    assert normal(run("prereg", "freeze", plan, "-c", cfg_path).output) == (
        "already frozen with this hash: H at T (forced: 3-night smoke); nothing recorded")
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        assert con.execute("SELECT count(*), any_value(force_reason) FROM plans").fetchone() == (
            1, "3-night smoke")
    assert normal(first.output) == "frozen: H at T (forced: 3-night smoke)"


def test_a_draft_from_pilot_nights_prints_predictive_power_not_exact(tmp_path):
    from tests.seeded import seed_warehouse

    cfg_path, cfg, nights = seed_warehouse(tmp_path)
    plan = tmp_path / "prereg.toml"
    r = run("prereg", "draft", plan, "-c", cfg_path, "--first-night", "2027-06-01",
            "--nights", 30)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    # the seeded pilot: every horizon matured (prices run to 2027-06-18), on the 9 nights
    # both paths completed (sd 0.254 at h=1 on 8 degrees of freedom)
    assert ("noise: pilot: sd of nightly ΔIC over the warehouse's nights 2027-04-29 – "
            "2027-05-12 (h=1: 9, h=5: 9, h=20: 9 matured nights)") in lines
    assert ("proposed primary: h=1, δ=0.135 (30 independent nights; predictive power 0.819 "
            "at δ=0.135)") in lines
    assert "power exact" not in r.output and "predictive power: averaged" in r.output
    assert load_plan(plan).design.sd_df["1"] == 8.0


@pytest.mark.parametrize("columns", [100, 120])
def test_the_whole_draft_fits_its_width_with_each_statement_indented_under_itself(
        tmp_path, monkeypatch, columns):
    """Below the sizing table each line is one statement: at 100 and 120 columns its
    continuation is indented under it, never back at column 0 (the noise and primary lines
    were), and the freeze command sits whole on its own line, to copy."""
    from tests.cli_run import run_cli
    from tests.seeded import seed_warehouse

    seed_warehouse(tmp_path / "w")
    monkeypatch.chdir(tmp_path)                 # relative paths: the same text on any machine
    r = run_cli("prereg", "draft", "p.toml", "-c", "w/dualpath.toml", "--first-night",
                "2027-06-01", "--nights", "30", columns=columns)
    assert r.returncode == 0, r.stderr
    expected = (DATA / f"prereg_draft_{columns}.txt").read_text()
    assert r.stdout == expected
    lines = expected.splitlines()
    assert max(map(len, lines)) <= columns and not any(ln != ln.rstrip() for ln in lines)
    below = lines[lines.index("  nights_needed: nights for power 0.8") + 1:]
    starts = ("noise:", "proposed primary:", "primary:", "false reassurance", "wrote", "  ")
    assert all(ln.startswith(starts) for ln in below), below
    # the noise line's '(h=1: 9, h=5: 9, h=20: 9 matured nights)' stays whole: at 120 columns
    # it left 'nights)' alone on its last line
    assert "  (h=1: 9, h=5: 9, h=20: 9 matured nights)" in lines
    assert all(len(ln.split()) > 1 for ln in below), below
    assert "  dualpath prereg freeze p.toml -c w/dualpath.toml" in lines


@pytest.mark.parametrize("columns", [100, 120])
def test_the_whole_status_fits_its_width_with_each_statement_indented_under_itself(
        tmp_path, monkeypatch, columns):
    """`prereg status` of a plan forced over pilot nights of its window, at 100 and 120
    columns: each statement's continuation under its indent, the label said once (the
    verdict's line repeated its three lines), the plan file as the user named it."""
    import re

    from tests.cli_run import run_cli
    from tests.seeded import seed_warehouse

    seed_warehouse(tmp_path / "w")
    monkeypatch.chdir(tmp_path)
    cfg = "w/dualpath.toml"
    assert run_cli("prereg", "draft", "p.toml", "-c", cfg, "--first-night", "2027-05-03",
                   "--nights", "30").returncode == 0
    assert run_cli("prereg", "freeze", "p.toml", "-c", cfg, "--force", "--reason",
                   "pilot nights inside the window, for the test").returncode == 0
    r = run_cli("prereg", "status", "-c", cfg, columns=columns)
    assert r.returncode == 0, r.stderr
    out = re.sub(r"frozen \d{4}-\d\d-\d\d", "frozen DAY", r.stdout, count=1)
    assert out == (DATA / f"prereg_status_{columns}.txt").read_text()
    lines = out.splitlines()
    assert max(map(len, lines)) <= columns and not any(ln != ln.rstrip() for ln in lines)
    assert all(ln.startswith(("plan", "primary:", "window:", "matured", "label today:",
                              "verdict today:", "  ")) for ln in lines), lines
    assert out.count("frozen with --force after 8 night(s)") == 1
