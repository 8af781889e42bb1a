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
from dualpath.evals.wrap import Detail

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


def test_interchangeability_leads_with_its_verdict_and_label():
    """The first line: the answer and the label's word (fits 100 columns); the nights beside
    the tickers on the detail line."""
    lines = interchange_lines(X, "confirmatory", "confirmatory", planned=True)
    assert lines == [
        "Quality — are backup's grades interchangeable with main's?  interchangeable  "
        "[confirmatory]",
        "  disagreement backup–main ÷ main–main draws 1.01, 95% CI [0.96, 1.06]; 100 tickers, "
        "10 nights",
        "  backup keeps 96% of main's draw-to-draw rank agreement (limit 50%; the excess over "
        "it ≥ +0.021, one-sided 95%)",
        "  apart: shift +0.13 grade, spread ×1.04 (not disagreement); ticker × path +0.008",
        "  draws without a grade (counted, never imputed): backup 3, main 1"]
    assert len(lines[0]) <= 100
    # the last two are details: `dualpath metrics` prints them with --verbose only
    assert [isinstance(line, Detail) for line in lines] == [False, False, False, True, True]


def test_a_confirmatory_verdict_names_its_late_and_resumed_nights():
    """The label's word in brackets; what its nights went through on the line beneath
    (said once in a headline: the RankIC line that follows carries only the word)."""
    text = "confirmatory — 1 night scored late (2027-05-03), 1 resumed (2027-05-06)"
    assert interchange_lines(X, "confirmatory", text, planned=True)[:2] == [
        "Quality — are backup's grades interchangeable with main's?  interchangeable  "
        "[confirmatory]",
        "  confirmatory: 1 night scored late (2027-05-03), 1 resumed (2027-05-06)"]
    v = replace(V, label_text=text)
    assert quality_lines(v, label_said=True)[0].endswith("  [confirmatory]")
    assert not any("scored late" in line for line in quality_lines(v, label_said=True))
    assert quality_lines(v)[1] == "  confirmatory: 1 night scored late (2027-05-03), 1 resumed " \
                                  "(2027-05-06)"


def test_an_unplanned_limit_is_exploratory_and_interim_shows_no_verdict_word():
    lines = interchange_lines(X, "confirmatory", "confirmatory", planned=False)
    assert lines[0] == ("Quality — are backup's grades interchangeable with main's?  "
                        "interchangeable  [exploratory]")
    assert "(limit 50% by default, not preregistered; the excess" in lines[2]
    text = "interim — no decision: 10 of 20 window nights collected (next: 2027-05-10)"
    lines = interchange_lines(X, "interim", text, planned=True)
    assert lines[:2] == [
        "Quality — are backup's grades interchangeable with main's?  interim — no decision",
        "  interim: 10 of 20 window nights collected (next: 2027-05-10)"]
    assert not any("interchangeable," in line or "  [" in line for line in lines)


def test_rankic_worse_but_not_beyond_the_margin_says_so():
    """ΔIC −0.0445, 90% CI [−0.0855, −0.0035], δ 0.06: 0 is excluded on the losing side (worse)
    but −δ is inside (a loss of δ not ruled out): said short on the first line, in full on
    the line that says why it did not decide."""
    lines = quality_lines(V)
    assert lines[0] == ("RankIC — is backup's signal as good as main's?  inconclusive: "
                        "measurably worse  [confirmatory]")
    assert lines[-2:] == [
        "  before it can decide: its upper end -0.004 < 0 (worse), the interval's lower end "
        "-0.086 < −δ =",
        "    -0.060: a loss of δ is not ruled out"]
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
                         "  interim: 12 of 20 window nights collected (next: 2027-05-12)"]
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
    assert quality_lines(V, (rate, m_ic, n, m))[-4:-2] == [
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


def test_a_pass_its_false_reassurance_says_does_not_reassure_is_never_bare():
    """A 20-night 'non-inferior' whose plan passes a backup with no signal 12% of the time
    (above 0.10) says so on its first line; the rate's line gives the number once, with no
    second 'would not reassure'. At 0.05 the same pass is bare."""
    v = replace(V, verdict="non-inferior", decided=True, ci_low=-0.02, ci_high=0.05,
                estimate=0.015)
    lines = quality_lines(v, (0.12, 0.034, 20, 20))
    assert lines[0] == ("RankIC — is backup's signal as good as main's?  non-inferior, not "
                        "reassuring  [confirmatory]")
    assert len(lines[0]) <= 100
    assert lines[-2:] == [
        "  false reassurance 0.12 = P(a backup with no signal passes) > 0.10, given main's IC "
        "+0.034 (20",
        "    nights)"]
    assert not any("would not reassure" in line for line in lines)
    assert quality_lines(v, (0.05, 0.034, 20, 20))[0].endswith("non-inferior  [confirmatory]")


def test_an_interchangeable_a_noise_backup_gets_often_is_not_bare():
    """'interchangeable' with a noise-backup rate above 0.10 carries 'not reassuring' in its
    answer; the rate's line gives the threshold it is above."""
    # z = 0.03 / 0.018 = 1.67 against a reach of t(0.95, 99) × 0.026 / 0.018 = 2.40:
    # Φ(1.667 − 2.400) = 0.232 of noise backups get 'interchangeable'
    x = replace(X, g_noise=0.03, se_noise=0.026, sd_noise_tr=0.018)
    lines = interchange_lines(x, "confirmatory", "confirmatory", planned=True)
    assert lines[0].endswith("?  interchangeable, not reassuring  [confirmatory]")
    assert lines[-1] == ("  noise-backup rate 0.232 = P(a backup whose grades are noise gets "
                         "'interchangeable' here) > 0.10")
