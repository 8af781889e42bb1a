"""Power of the ΔIC tests and the three planned tests, cross-checked against statsmodels and
scipy, and by seeded simulation where no closed form exists (TOST)."""

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import DescrStatsW

from dualpath.evals import power as pw
from dualpath.evals.inference import delta_test


def test_independent_count_matches_the_greedy_subseries():
    # 20 consecutive nights at h = 5 keep nights 0, 5, 10, 15: four
    assert pw.independent_count(20, 5) == 4 and pw.independent_count(16, 5) == 4
    assert pw.independent_count(15, 5) == 3 and pw.independent_count(30, 1) == 30


@pytest.mark.parametrize("m,delta", [(20, 0.0), (30, 0.0), (6, -0.02), (40, -0.06)])
def test_noninferiority_power_is_statsmodels_one_sample_t_power(m, delta):
    sd, margin, alpha = 0.1, 0.05, 0.05
    # "non-inferior" = the one-sided t against -δ rejects: effect (Δ + δ)/σ, 'larger'
    ref = TTestPower().power(effect_size=(delta + margin) / sd, nobs=m, alpha=alpha,
                             alternative="larger")
    assert pw.decision_probability("non-inferiority", "non-inferior", sd, m, margin, alpha,
                                   delta) == pytest.approx(ref, abs=1e-9)
    # "inferior" = the upper bound below -δ: the same t, 'smaller'
    ref = TTestPower().power(effect_size=(delta + margin) / sd, nobs=m, alpha=alpha,
                             alternative="smaller")
    assert pw.decision_probability("non-inferiority", "inferior", sd, m, margin, alpha,
                                   delta) == pytest.approx(ref, abs=1e-9)


def test_difference_power_is_statsmodels_two_sided_power():
    ref = TTestPower().power(effect_size=0.05 / 0.1, nobs=25, alpha=0.05,
                             alternative="two-sided")
    assert pw.planned_power("difference", 0.1, 25, 0.05, 0.05) == pytest.approx(ref, abs=1e-9)


def test_tost_power_matches_a_seeded_simulation_with_statsmodels_ttost():
    sd, m, margin, alpha = 0.1, 20, 0.06, 0.05
    rng = np.random.default_rng(5)
    x = rng.normal(0.0, sd, size=(4000, m))
    hits = np.mean([DescrStatsW(row).ttost_mean(-margin, margin)[0] < alpha for row in x])
    got = pw.planned_power("equivalence", sd, m, margin, alpha)
    # 4000 replicates: binomial sd <= 0.008; allow 3 of them
    assert abs(got - hits) < 0.025 and 0.2 < got < 0.9


def test_min_detectable_inverts_power_and_nights_needed_is_the_first_enough():
    sd, alpha = 0.1, 0.05
    mde = pw.min_detectable("non-inferiority", sd, 20, alpha, 0.8)
    assert pw.planned_power("non-inferiority", sd, 20, mde, alpha) == pytest.approx(0.8, abs=1e-6)
    # the normal approximation (z_.95 + z_.8) σ/√m is close but smaller at 19 df
    assert mde > (stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * sd / math.sqrt(20)
    n = pw.nights_needed_for("non-inferiority", sd, 5, 0.05, alpha, 0.8)
    m = (n - 1) // 5 + 1
    assert pw.planned_power("non-inferiority", sd, m, 0.05, alpha) >= 0.8
    assert pw.planned_power("non-inferiority", sd, m - 1, 0.05, alpha) < 0.8
    assert math.isnan(pw.min_detectable("non-inferiority", sd, 3, alpha, 0.8))


def test_brentq_finds_the_same_root_as_scipys():
    """The plain-Python Brent loop behind `min_detectable` is scipy.optimize.brentq's, float
    for float: every root of the grid below is the same number (well inside 1e-9)."""
    from scipy import optimize

    from dualpath.evals.roots import brentq

    for test in pw.TESTS:
        for sd in (0.03, 0.1, 0.4):
            for m in (4, 9, 20):
                for df in (None, 3.5, 12.0):
                    if test == "equivalence" and df is not None:
                        continue           # the predictive TOST integrates twice: slow
                    f = lambda d: pw.planned_power(test, sd, m, d, 0.05, df) - 0.8
                    hi = sd
                    while f(hi) < 0:
                        hi *= 2
                    try:
                        theirs = optimize.brentq(f, 1e-9, hi, xtol=1e-7)
                    except ValueError:     # a NaN power on the way: both refuse alike
                        with pytest.raises(ValueError, match="NaN"):
                            brentq(f, 1e-9, hi, xtol=1e-7)
                        continue
                    ours = brentq(f, 1e-9, hi, xtol=1e-7)
                    assert ours == theirs, (test, sd, m, df, ours, theirs)
    for f, a, b, tol in ((lambda x: x ** 3 - 2 * x - 5, 2, 3, 1e-12), (math.cos, 0, 3, 1e-7),
                         (lambda x: math.exp(x) - 10, -5, 5, 2e-12), (lambda x: x - 0.5, 0, 1, 1e-9)):
        assert brentq(f, a, b, xtol=tol) == optimize.brentq(f, a, b, xtol=tol)
    with pytest.raises(ValueError, match="different signs"):
        brentq(lambda x: x * x + 1, -1, 1, xtol=1e-7)


def test_the_group_sequential_bounds_are_those_scipys_brentq_gives(monkeypatch):
    from scipy import optimize

    from dualpath.evals import sequential as sq

    designs = [([5, 10, 15, 20], 20, 0.05), ([5, 10, 12], 30, 0.025), ([4, 8], 8, 0.1)]
    ours = [sq.bounds(*d) for d in designs]
    monkeypatch.setattr(sq, "brentq", optimize.brentq)
    assert ours == [sq.bounds(*d) for d in designs]


def test_a_four_to_six_week_window_proposes_h1_and_a_margin_it_can_show():
    sd = {1: 0.1, 5: 0.1, 20: 0.1}
    rows = pw.power_table(sd, 25, 0.03, 0.05, 0.8)
    primary, margin = pw.propose(rows, 0.03, 0.8)
    assert primary == 1
    assert pw.planned_power("non-inferiority", 0.1, 25, margin, 0.05) >= 0.8
    assert margin == pytest.approx(math.ceil(rows[0]["mde"] / 0.005) * 0.005)
    # a margin the window already has power for is kept
    assert pw.propose(rows, 0.2, 0.8) == (1, 0.2)


def test_each_test_verdict_and_interval_against_scipy_and_statsmodels():
    rng = np.random.default_rng(2)
    d = rng.normal(0.01, 0.05, 24)
    ni = delta_test(d, 1, "non-inferiority", 0.03, 0.05)
    ref = stats.ttest_1samp(d, -0.03, alternative="greater")
    assert ni["p_claim"] == pytest.approx(ref.pvalue) and ni["ci_level"] == pytest.approx(0.9)
    ci90 = stats.ttest_1samp(d, 0).confidence_interval(0.90)
    assert (ni["ci_low"], ni["ci_high"]) == (pytest.approx(ci90.low), pytest.approx(ci90.high))
    eq = delta_test(d, 1, "equivalence", 0.05, 0.05)
    assert eq["p_claim"] == pytest.approx(DescrStatsW(d).ttost_mean(-0.05, 0.05)[0])
    diff = delta_test(d, 1, "difference", 0.03, 0.05)
    two = stats.ttest_1samp(d, 0)
    assert min(diff["p_claim"], diff["p_counter"]) == pytest.approx(two.pvalue)
    ci95 = two.confidence_interval(0.95)
    assert (diff["ci_low"], diff["ci_high"]) == (pytest.approx(ci95.low), pytest.approx(ci95.high))
    assert diff["verdict"] == ("candidate better" if two.pvalue < 0.05 and d.mean() > 0
                               else "inconclusive")
    assert "95% two-sided" in diff["ci_text"] and "one-sided 95% bounds" in ni["ci_text"]


def test_the_interval_always_contains_the_estimate_it_prints():
    # h = 5 over 23 nights: the test's mean (nights 0, 5, 10, 15, 20) differs from the mean of
    # every night; the interval is centred on the former, which is what is printed beside it
    rng = np.random.default_rng(9)
    for _ in range(50):
        d = rng.standard_t(3, 23) * 0.05
        out = delta_test(d, 5, "non-inferiority", 0.03, 0.05)
        assert out["ci_low"] <= out["tested_mean"] <= out["ci_high"]
        assert out["tested_mean"] == pytest.approx(d[[0, 5, 10, 15, 20]].mean())


def test_power_uses_the_plans_sd_when_given_and_says_so():
    d = np.random.default_rng(1).normal(0, 0.05, 20)
    planned = delta_test(d, 1, "non-inferiority", 0.05, 0.05, sd_plan=0.1)
    assert planned["power"] == pytest.approx(pw.planned_power("non-inferiority", 0.1, 20,
                                                              0.05, 0.05))
    assert "from the plan" in planned["power_basis"]
    seen = delta_test(d, 1, "non-inferiority", 0.05, 0.05)
    sd = d.std(ddof=1)
    assert seen["power_basis"] == ("to show non-inferiority if ΔIC = 0; t on 20 non-overlapping "
                                   f"nights, sd of nightly ΔIC {sd:.3f} observed (predictive "
                                   "over its sampling error, df=19)")
    assert seen["power"] == pytest.approx(pw.predictive_power("non-inferiority", sd, 19, 20,
                                                              0.05, 0.05))
    assert seen["power"] > planned["power"]


def test_each_secondary_gets_its_own_test_margin_and_alpha():
    from statsmodels.stats.multitest import multipletests

    from dualpath.evals.compare import DeltaTest, compare_paths
    from dualpath.evals.returns import forward_returns
    from tests.test_stats import two_paths
    prices, nights, scores = two_paths(lost=2, nights=40)
    returns = forward_returns(prices, nights, [1, 2, 5])
    tests = {1: DeltaTest(1, "equivalence", 0.2, 0.10), 2: DeltaTest(2, "difference", 0.05, 0.01),
             5: DeltaTest(5, "non-inferiority", 0.1, 0.05)}
    out = compare_paths(scores, returns, "main", "backup", [1, 2, 5], primary=5, margin=0.03,
                        alpha=0.05, tests=tests).set_index("horizon")
    assert out.loc[1, ["test", "margin", "alpha"]].tolist() == ["equivalence", 0.2, 0.10]
    assert out.loc[2, ["test", "margin", "alpha"]].tolist() == ["difference", 0.05, 0.01]
    assert out.loc[1, "ci_level"] == pytest.approx(0.8) and out.loc[2, "ci_level"] == 0.99
    sec = out.loc[[1, 2]]
    adj = multipletests(sec["p_claim"], method="holm")[1]
    assert sec["p_claim_holm"].tolist() == pytest.approx(adj)
    counter = multipletests(sec["p_counter"], method="holm")[1]
    from dualpath.evals.inference import verdict_of
    # each row against its own α: 0.10 for the equivalence row, 0.01 for the difference row
    assert out.loc[1, "verdict"] == verdict_of("equivalence", adj[0], counter[0], 0.10)
    assert out.loc[2, "verdict"] == verdict_of("difference", adj[1], counter[1], 0.01)
    assert out.loc[5, "verdict"] in ("non-inferior", "inferior", "inconclusive")


def test_predictive_power_is_the_exact_power_averaged_over_sigma_given_the_pilot_sd():
    from scipy import integrate, stats as st
    # σ² = ν s² / χ²_ν: integrate the exact power over χ²_ν's density (ν = 4: a 5-night pilot)
    s, nu, m, d = 0.1, 4, 30, 0.06
    ref = integrate.quad(lambda v: pw.planned_power("non-inferiority", s * math.sqrt(nu / v),
                                                    m, d, 0.05) * st.chi2.pdf(v, nu),
                         0, np.inf)[0]
    got = pw.planned_power("non-inferiority", s, m, d, 0.05, df=nu)
    assert got == pytest.approx(ref, abs=0.002)
    # lower than the plug-in power at s, which a plan sized at s claims
    assert got < pw.planned_power("non-inferiority", s, m, d, 0.05) - 0.02


def test_the_sd_of_overlapping_nights_has_fewer_degrees_of_freedom():
    assert pw.sd_df(10, 1) == 9
    # h = 5: 1 + 2 (0.8² + 0.6² + 0.4² + 0.2²) = 3.4
    assert pw.sd_df(10, 5) == pytest.approx(9 / 3.4)


def test_a_pilots_sd_sizes_by_predictive_power_and_the_plan_records_its_df(tmp_path):
    from dualpath.prereg import draft_plan, planned_power, size_window
    from tests.helpers import make_project

    _, cfg, nights = make_project(tmp_path, tickers=20, draws=2, nights=1)
    sd = {1: 0.1, 5: 0.12, 20: 0.14}
    known = size_window(cfg, 30, sd, "given")
    piloted = size_window(cfg, 30, sd, "pilot", sd_df={1: 4.0})
    assert piloted.design.sd_df == {"1": 4.0} and known.design.sd_df == {}
    # the uncertain sd asks for a wider margin to keep power 0.8
    assert (known.margin, piloted.margin) == (0.05, 0.06)
    p = draft_plan(cfg, nights[0], 30, piloted)
    assert planned_power(p) == pytest.approx(
        pw.planned_power("non-inferiority", 0.1, 30, 0.06, 0.05, df=4.0))


def test_a_plans_pilot_sd_gives_predictive_power_in_the_comparison():
    """The comparison's power "from the plan" is predictive where the plan says on how many
    df its pilot estimated the sd (it was the plug-in power at that estimate)."""
    import numpy as np

    from dualpath.evals import power as pw
    from dualpath.evals.inference import delta_test

    d = np.random.default_rng(3).normal(0.0, 0.1, 20)
    exact = delta_test(d, 1, margin=0.06, sd_plan=0.1)
    pred = delta_test(d, 1, margin=0.06, sd_plan=0.1, sd_plan_df=4)
    assert exact["power"] == pw.planned_power("non-inferiority", 0.1, 20, 0.06, 0.05)
    assert pred["power"] == pw.predictive_power("non-inferiority", 0.1, 4, 20, 0.06, 0.05)
    assert pred["power"] < exact["power"]           # a 5-night pilot's sd is uncertain
    assert pred["power_basis"].endswith("sd of nightly ΔIC 0.100 from the plan (its pilot's; "
                                        "predictive over its sampling error, df=4)")
    assert exact["power_basis"].endswith("sd of nightly ΔIC 0.100 from the plan")


def _tost_by_scipy_stats(sd, m, margin, alpha, delta):
    """TOST power as first written: the integrand through scipy.stats' norm.cdf and
    chi2.pdf (the module now calls the special functions behind them)."""
    from scipy import integrate

    df, se = m - 1, sd / math.sqrt(m)
    q = stats.t.ppf(1 - alpha, df)
    v_max = df * (margin * math.sqrt(m) / (q * sd)) ** 2

    def given(v):
        half = margin - q * sd * math.sqrt(v / df) / math.sqrt(m)
        p = stats.norm.cdf((half - delta) / se) - stats.norm.cdf((-half - delta) / se)
        return max(p, 0.0) * stats.chi2.pdf(v, df)

    return float(min(1.0, integrate.quad(given, 0, v_max, limit=200)[0]))


@pytest.mark.parametrize("sd,m,margin,alpha,delta", [
    (0.1, 20, 0.06, 0.05, 0.0), (0.03, 4, 0.03, 0.05, 0.0), (0.2, 41, 0.12, 0.1, -0.02),
    (0.1, 9, 0.01, 0.05, 0.03), (0.05, 5, 0.06, 0.1, 0.0)])
def test_tost_power_is_the_scipy_stats_integral_to_1e12(sd, m, margin, alpha, delta):
    ref = _tost_by_scipy_stats(sd, m, margin, alpha, delta)
    got = pw.decision_probability("equivalence", "equivalent", sd, m, margin, alpha, delta)
    assert abs(got - ref) <= 1e-12


def test_predictive_tost_power_is_the_mean_over_the_sigma_grid_to_1e12():
    s, nu, m, d = 0.1, 4.0, 20, 0.06
    q = stats.chi2.ppf((np.arange(pw.SD_GRID) + 0.5) / pw.SD_GRID, nu)
    ref = np.mean([_tost_by_scipy_stats(x, m, d, 0.05, 0.0) for x in s * np.sqrt(nu / q)])
    assert abs(pw.predictive_power("equivalence", s, nu, m, d, 0.05) - ref) <= 1e-12


def test_the_equivalence_beside_non_inferiority_is_read_for_its_p_value_only():
    from dualpath.evals.inference import noninferiority

    d = np.random.default_rng(11).normal(0.0, 0.05, 20)
    alone = delta_test(d, 1, "equivalence", 0.06, 0.05)
    unsized = delta_test(d, 1, "equivalence", 0.06, 0.05, sized=False)
    assert math.isnan(unsized["power"]) and math.isnan(unsized["mde"])
    assert (unsized["p_claim"], unsized["verdict"]) == (alone["p_claim"], alone["verdict"])
    out = noninferiority(d, 1, 0.06, 0.05)
    assert out["p_equivalent"] == alone["p_claim"] and out["power"] > 0
