"""A RankIC margin stated as the share of main's IC the backup keeps: set from the pilot's
95% lower bound of main's IC (the fixed-margin 95–95 method), recorded by freeze, used by
the verdict; refused in one line where the pilot shows no signal to preserve."""

import pytest
from scipy import stats

from dualpath.errors import UserError
from dualpath.prereg import load_plan, plan_toml, draft_plan
from dualpath.prereg_design import preserved_margin, preserved_text
from dualpath.flows.prereg import freeze_plan
from tests.cli_run import run_cli
from tests.helpers import make_project
from tests.seeded import seed_warehouse


def test_the_margin_is_the_kept_share_of_main_ics_95_lower_bound():
    # 20 pilot nights at h=1, main's IC 0.06 (sd 0.08): 0.06 − t(0.975, 19) × 0.08 / √20
    low = 0.06 - stats.t.ppf(0.975, 19) * 0.08 / 20 ** 0.5
    assert round(low, 5) == 0.02256
    p = preserved_margin(0.5, 1, (0.06, 0.08, 20))
    assert (p.low, p.margin, p.independent) == (pytest.approx(low), round(0.5 * low, 6), 20)
    assert preserved_text(p, "main", "backup", 1) == (
        "margin: backup keeps ≥ 50% of main's IC at h=1: δ = (1 − 0.5) × 0.0226, the 95% lower "
        "bound of main's IC +0.0600 over 20 non-overlapping pilot nights (fixed-margin 95–95 "
        "method)")


def test_no_signal_to_preserve_is_refused_in_one_line():
    with pytest.raises(UserError) as e:
        preserved_margin(0.5, 1, (0.01, 0.08, 20))
    assert str(e.value) == (
        "--preserve 0.5: the baseline's IC at h=1 is not shown above 0 on the pilot (+0.010, "
        "95% lower bound -0.027, 20 non-overlapping nights): there is no signal to preserve a "
        "share of; score more pilot nights, or give --margin")
    with pytest.raises(UserError, match="no pilot nights with the baseline's IC at h=5"):
        preserved_margin(0.5, 5, None)


def test_freeze_records_the_preserved_share_and_the_test_uses_its_margin(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=20, draws=2, nights=1)
    kept = preserved_margin(0.5, 1, (0.06, 0.08, 20))
    plan = draft_plan(cfg, nights[0], 30, pilot=None, preserved=kept)
    assert (plan.primary.margin, plan.primary.preserve) == (kept.margin, 0.5)
    path = tmp_path / "prereg.toml"
    path.write_text(plan_toml(plan))
    assert load_plan(path).primary.baseline_ic_low == round(kept.low, 6)
    frozen = freeze_plan(cfg, path, force=True, reason="small margin")
    assert frozen.plan.primary.preserve == 0.5 and frozen.plan.primary.margin == kept.margin


def test_draft_preserve_on_a_pilot_without_main_signal_exits_with_one_line(tmp_path):
    cfg_path, _, _ = seed_warehouse(tmp_path)
    r = run_cli("prereg", "draft", str(tmp_path / "p.toml"), "-c", str(cfg_path),
                "--first-night", "2027-06-01", "--preserve", "0.5")
    assert r.returncode != 0 and r.stdout == ""
    # the seeded pilot: main's IC +0.003 (sd 0.408) over 9 nights at h=1
    assert r.stderr == (
        "error: --preserve 0.5: the baseline's IC at h=1 is not shown above 0 on the pilot "
        "(+0.003, 95% lower bound -0.311, 9 non-overlapping nights): there is no signal to "
        "preserve a share of; score more pilot nights, or give --margin\n")
    both = run_cli("prereg", "draft", str(tmp_path / "p.toml"), "-c", str(cfg_path),
                   "--first-night", "2027-06-01", "--preserve", "0.5", "--margin", "0.03")
    assert both.stderr.strip().splitlines()[-1] == "error: give --margin or --preserve, not both"
