"""Group-sequential looks: gsDesign's published bounds, the first crossing decides, and the
headline says when a study stopped early."""

import pytest

from dualpath.evals.headline_icr import interchange_lines
from dualpath.evals.sequential import bounds, obf_spending, planned_looks, sequential_verdict
from tests.test_headline_icr import X


def test_obrien_fleming_bounds_equal_gsdesigns_published_ones():
    # gsDesign (R) gsDesign(k=5, test.type=1, alpha=0.025, sfu=sfLDOF)$upper$bound
    assert bounds([1, 2, 3, 4, 5], 5, 0.025) == pytest.approx(
        [4.8769, 3.3569, 2.6803, 2.2898, 2.0310], abs=2e-4)
    assert obf_spending(1.0, 0.05) == pytest.approx(0.05)
    assert planned_looks(20) == [5, 10, 15, 20] and planned_looks(6) == [5, 6]


def test_obrien_fleming_bounds_equal_rpacts_published_ones():
    # rpact getDesignGroupSequential(kMax = 4 and 3, typeOfDesign = "asOF"), one-sided
    # alpha = 0.025: $criticalValues
    assert bounds([1, 2, 3, 4], 4, 0.025) == pytest.approx([4.3326, 2.9631, 2.3590, 2.0141],
                                                           abs=2e-4)
    assert bounds([1, 2, 3], 3, 0.025) == pytest.approx([3.7103, 2.5114, 1.9930], abs=2e-4)


@pytest.mark.parametrize("looks, total", [([5, 10, 15, 20], 20), ([5, 10, 15, 20, 22], 22)])
def test_the_plans_bounds_spend_what_the_spending_function_allows(looks, total):
    # independent of gsDesign's grid: the null's chance of crossing by look k, from the
    # looks' joint normal law (Genz's integration), is the O'Brien-Fleming spending there
    import numpy as np
    from scipy import stats

    b = bounds(looks, total, 0.05)
    t = np.array(looks) / total
    corr = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    for k in range(1, len(looks) + 1):
        stay = stats.multivariate_normal.cdf(np.array(b[:k]), np.zeros(k), corr[:k, :k],
                                             maxpts=200_000 * k, abseps=1e-7, releps=1e-7)
        assert 1 - stay == pytest.approx(obf_spending(t[k - 1], 0.05), abs=3e-5)


def test_the_first_crossing_decides():
    looks = [5, 10, 15, 20]
    b = bounds(looks, 20, 0.05)
    assert sequential_verdict([1.0, b[1] + 0.01], looks, 20, 0.05) == ("interchangeable", 1)
    assert sequential_verdict([-b[0] - 0.01, 5.0], looks, 20, 0.05) == (
        "not interchangeable", 0)
    assert sequential_verdict([1.0, 1.0], looks, 20, 0.05) == ("no decision yet", None)
    assert sequential_verdict([1.0] * 4, looks, 20, 0.05) == ("inconclusive", None)


def test_a_study_that_stopped_early_says_so():
    seq = {"verdict": "interchangeable", "look": 1, "looks": [5, 10, 15, 20], "reached": 2,
           "night": 10, "z": 2.71, "bound": 2.54}
    lines = interchange_lines(X, "interim", "interim — no decision: 10 of 20 window nights",
                              True, seq)
    # a crossed boundary decides under the design even at an interim look: the answer with
    # the label's word, why interim beneath, the design as a detail (--verbose, the report)
    assert lines[:4] == [
        "Quality — are backup's grades interchangeable with main's?  stopped early for "
        "interchangeable at night 10 (look 2 of 4)  [interim]",
        "  interim: 10 of 20 window nights",
        "  group-sequential: O'Brien-Fleming spending over looks at night(s) 5/10/15/20",
        "  disagreement backup–main ÷ main–main draws 1.01, 95% CI [0.96, 1.06]; 100 tickers, "
        "10 nights"]
    assert lines[4] == ("  backup keeps 96% of main's draw-to-draw rank agreement (limit 50%; "
                        "z +2.71 against ±2.54 at the look)")
    waiting = dict(seq, verdict="no decision yet", look=None, night=None)
    assert interchange_lines(X, "interim", "interim", True, waiting)[0] == (
        "Quality — are backup's grades interchangeable with main's?  interim — no decision "
        "(look 2 of 4: no boundary crossed)")


def test_the_sequential_noise_backup_rate_is_the_first_crossing_share():
    from dataclasses import replace

    from scipy import stats

    from dualpath.evals.sequential import noise_rate

    x = replace(X, nights=10, g_noise=-0.06, se_noise=0.026, sd_noise_tr=0.026)
    # one look: the fixed-sample rate, Φ(0.06/0.026 − b) with b the first look's bound
    b = bounds([10, 20], 20, 0.05)[0]
    assert noise_rate(x, [10, 20], 1, "not interchangeable") == pytest.approx(
        stats.norm.cdf(0.06 / 0.026 - b), abs=0.006)
    rates = [noise_rate(x, [5, 10, 15, 20], 2, v)
             for v in ("interchangeable", "not interchangeable", "no decision yet")]
    assert sum(rates) == pytest.approx(1.0) and rates[0] < 0.001
    # a second look only adds chances to decide
    assert rates[1] > noise_rate(x, [5, 10, 15, 20], 1, "not interchangeable")
