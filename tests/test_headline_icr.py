"""The headline's quality lines, whole: interchangeability first (with its nights), then the
RankIC verdict with its false-reassurance rate; an interim look is never headlined as a
decision."""

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from dualpath.evals import power as pw
from dualpath.evals.headline import quality_lines
from dualpath.evals.headline_icr import false_reassurance_of, interchange_lines
from dualpath.evals.interchange import Interchange
from dualpath.evals.verdict import PrimaryVerdict

V = PrimaryVerdict(
    label="confirmatory", label_text="confirmatory", reasons=(), baseline="main",
    candidate="backup", horizon=1, test="non-inferiority", margin=0.06, alpha=0.05,
    verdict="inconclusive", decided=False, estimate=-0.0445, ci_low=-0.0855,
    ci_high=-0.0035, ci_level=0.90, ci_text="", power=0.82, power_text="",
    n_independent=20, nights_analysed=20, window_nights=20, note="")

X = Interchange(
    baseline="main", candidate="backup", nights=10, ticker_nights=1000, tickers=100,
    rho_rr=0.12, rho_tr=0.115, rho_tt=0.118, ratio=1.006, ratio_low=0.957, ratio_high=1.057,
    share=0.958, g=0.055, g_low=0.021, g_high=0.089, interaction=0.008, noise_excess=0.002,
    shift=0.13, spread=1.04, limit=0.5, alpha=0.05, level=0.95, verdict="interchangeable",
    failed={"backup": 3, "main": 1}, flat={"backup": 0, "main": 0})


def test_interchangeability_leads_with_its_verdict_and_nights():
    lines = interchange_lines(X, "confirmatory", "confirmatory", planned=True)
    assert lines == [
        "Quality — are backup's grades interchangeable with main's?  interchangeable, 10 night(s)"
        "  [confirmatory]",
        "  disagreement backup–main ÷ main–main draws 1.01, 95% CI [0.96, 1.06]; 100 tickers",
        "  backup keeps 96% of main's draw-to-draw rank agreement (limit 50%; the excess over "
        "it ≥ +0.021, one-sided 95%)",
        "  apart: shift +0.13 grade, spread ×1.04 (not disagreement); ticker × path +0.008",
        "  draws without a grade (counted, never imputed): backup 3, main 1"]


def test_a_confirmatory_verdict_names_its_late_and_resumed_nights():
    text = "confirmatory — 1 night scored late (2027-05-03), 1 resumed (2027-05-06)"
    assert interchange_lines(X, "confirmatory", text, planned=True)[0] == (
        "Quality — are backup's grades interchangeable with main's?  interchangeable, 10 night(s)"
        "  [confirmatory — 1 night scored late (2027-05-03), 1 resumed (2027-05-06)]")


def test_an_unplanned_limit_is_exploratory_and_interim_shows_no_verdict_word():
    lines = interchange_lines(X, "confirmatory", "confirmatory", planned=False)
    assert lines[:2] == [
        "Quality — are backup's grades interchangeable with main's?  interchangeable, 10 night(s)",
        "  [confirmatory; limit 50% by default, not preregistered]"]
    text = "interim — no decision: 10 of 20 window nights collected (next: 2027-05-10)"
    lines = interchange_lines(X, "interim", text, planned=True)
    assert lines[:2] == [
        "Quality — are backup's grades interchangeable with main's?  interim — no decision, "
        "10 night(s)",
        "  10 of 20 window nights collected (next: 2027-05-10)"]
    assert not any("interchangeable," in line for line in lines[1:])


def test_rankic_worse_but_not_beyond_the_margin_says_so():
    assert quality_lines(V)[:2] == [
        "RankIC — is backup's signal as good as main's?  inconclusive — backup measurably worse "
        "(ΔIC < 0",
        "  excluded by its interval) but not shown beyond the margin  [confirmatory]"]


def test_a_preserved_share_margin_says_what_it_keeps():
    v = replace(V, preserve=0.5, baseline_ic_low=0.058)
    lines = quality_lines(v)
    i = next(k for k, line in enumerate(lines) if "margin δ = " in line)
    assert lines[i + 1] == ("  δ keeps ≥ 50% of main's IC: (1 − 0.5) × its pilot IC's 95% lower "
                            "bound +0.058")
    assert not any("keeps ≥" in line for line in quality_lines(V))


def test_interim_rankic_leads_with_no_decision():
    v = replace(V, label="interim", verdict="non-inferior", decided=True,
                label_text="interim — no decision: 12 of 20 window nights collected "
                           "(next: 2027-05-12)")
    lines = quality_lines(v)
    assert lines[:2] == ["RankIC — is backup's signal as good as main's?  interim — no decision",
                         "  12 of 20 window nights collected (next: 2027-05-12)"]
    assert not any("non-inferior" in line for line in lines)


def test_false_reassurance_line_and_rate():
    rng = np.random.default_rng(1)
    ic = pd.DataFrame({"night": range(20), "path": "main", "horizon": 1,
                       "ic": 0.03 + rng.normal(0, 0.1, 20), "n_tickers": 100, "status": "ok"})
    rate, m_ic, n, m = false_reassurance_of(V, ic)
    sd = math.sqrt(ic["ic"].std(ddof=1) ** 2 + 1 / 99)
    assert rate == pytest.approx(pw.decision_probability(
        "non-inferiority", "non-inferior", sd, 20, 0.06, 0.05, -ic["ic"].mean()))
    assert (n, m) == (20, 20)
    # sd √(0.0592² + 1/99) = 0.1167, ncp (0.06 − 0.0337)√20 / 0.1167 = 1.006, t(19) 1.729
    assert rate == pytest.approx(0.2501, abs=1e-4) and m_ic == pytest.approx(0.0337, abs=1e-4)
    assert quality_lines(V, (rate, m_ic, n, m))[-3:-1] == [
        "  false reassurance 0.25 = P(a backup with no signal passes), given main's IC +0.034 "
        "(20 nights);",
        "    above 0.10: a pass would not reassure"]


def test_metrics_comparison_title_names_the_primarys_margin(tmp_path):
    """The first row is h=1, exploratory; the title is the primary's (h=5 on the seeded
    warehouse), not the first row's."""
    import os
    import subprocess
    import sys

    from tests.seeded import seed_warehouse

    cfg_path, _, _ = seed_warehouse(tmp_path)
    env = {**os.environ, "COLUMNS": "250"}
    out = subprocess.run([sys.executable, "-m", "dualpath", "metrics", "-c", str(cfg_path)],
                         capture_output=True, text=True, env=env, timeout=300).stdout
    flat = " ".join(out.split())            # the title wraps to the console's width
    assert "backup vs main, primary h=5 margin δ = 0.03, α = 0.05" in flat


def test_the_verdict_carries_its_noise_backup_rate():
    from scipy import stats

    x = replace(X, verdict="inconclusive", g_noise=-0.06, se_noise=0.026, sd_noise_tr=0.018)
    # given main's draws only ρ_TR varies (sd 0.018); the test reaches t(0.95, 99) × 0.026
    reach = stats.t.ppf(0.95, 99) * 0.026 / 0.018
    expect = 1 - stats.norm.cdf(-0.06 / 0.018 - reach) - stats.norm.cdf(0.06 / 0.018 - reach)
    assert f"{expect:.3f}" == "0.175"
    lines = interchange_lines(x, "confirmatory", "confirmatory", planned=True)
    assert lines[-1] == ("  noise-backup rate 0.175 = P(a backup whose grades are noise gets "
                         "'inconclusive' here)")
    # no interval (too few tickers): no rate; an interim fixed-sample look shows none either
    assert not any("noise-backup" in s for s in interchange_lines(
        replace(x, g_low=math.nan), "confirmatory", "confirmatory", planned=True))
    assert not any("noise-backup" in s for s in interchange_lines(
        x, "interim", "interim — no decision: 10 of 20", planned=True))
