"""A window that closed short (a night missing, left out): the interchangeability test's
final look happens at the nights collected and spends all α the earlier looks left, their
boundaries kept; the design spends exactly α, the noise-backup rate uses the same
boundaries, and the line is labelled as the RankIC line is."""

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from dualpath.evals.headline_icr import interchange_lines
from dualpath.evals.sequential import (bounds, closing_looks, noise_rate, obf_spending,
                              sequential_verdict)
from dualpath.flows.prereg import study
from tests.test_headline_icr import X
from tests import test_label_disclosure as disclosure
from tests.test_label_disclosure import headline, label_lines, sql


@pytest.fixture
def planned(tmp_path):
    """The seeded warehouse under its 9-night plan frozen before night 1 (as
    `tests.test_label_disclosure` has it)."""
    return disclosure.planned.__wrapped__(tmp_path)


def test_the_final_look_is_at_the_nights_collected():
    assert closing_looks([5, 9], 8) == [5, 8]
    assert closing_looks([5, 10, 15, 20], 17) == [5, 10, 15, 17]
    assert closing_looks([5, 10, 15, 20], 15) == [5, 10, 15]
    assert closing_looks([5, 9], 4) == [4]
    # the earlier looks keep the boundaries they were read against
    assert bounds([5, 8], 9, 0.05)[0] == bounds([5, 9], 9, 0.05)[0]
    assert bounds([5, 10, 15, 17], 20, 0.05)[:3] == bounds([5, 10, 15, 20], 20, 0.05)[:3]
    b = bounds([5, 8], 9, 0.05)
    assert b == pytest.approx([2.3846, 1.6644], abs=2e-4)
    assert sequential_verdict([1.0, b[1] + 0.01], [5, 8], 9, 0.05) == ("interchangeable", 1)
    assert sequential_verdict([1.0, -b[1] - 0.01], [5, 8], 9, 0.05) == (
        "not interchangeable", 1)
    assert sequential_verdict([1.0, 1.0], [5, 8], 9, 0.05) == ("inconclusive", None)


@pytest.mark.parametrize("planned_looks, total, collected", [
    ([5, 9], 9, 8), ([5, 10, 15, 20], 20, 17), ([5, 10, 15, 20], 20, 12),
    ([5, 10, 15, 20, 25, 30], 30, 26), ([5, 9], 9, 4)])
def test_a_short_final_look_spends_exactly_alpha(planned_looks, total, collected):
    # each decision is a one-sided test of g = 0 at level α: the null's chance of crossing
    # its side at any look, from the looks' joint normal law (corr √(n_i / n_j), Genz's
    # integration), is α: the short final look spends what the earlier looks left
    looks = closing_looks(planned_looks, collected)
    b = bounds(looks, total, 0.05)
    t = np.array(looks) / total
    corr = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    k = len(looks)
    stay = stats.multivariate_normal.cdf(np.array(b), np.zeros(k), corr, maxpts=200_000 * k,
                                         abseps=1e-7, releps=1e-7)
    assert 1 - stay == pytest.approx(0.05, abs=3e-5)
    # more than the spending function's α(collected / total), the share a look at that
    # information would spend in a window that ran to its end
    assert 1 - stay > obf_spending(collected / total, 0.05) + 1e-4


def test_the_short_windows_line_and_its_noise_rate_use_the_same_boundaries():
    x = replace(X, nights=8, g_noise=-0.06, se_noise=0.026, sd_noise_tr=0.026)
    b = bounds([5, 8], 9, 0.05)
    seq = {"verdict": "not interchangeable", "look": 1, "looks": [5, 8], "reached": 2,
           "night": 8, "z": -3.1, "bound": b[1], "total": 9, "planned": [5, 9]}
    told = "confirmatory — 1 of 9 window night(s) missing"
    lines = interchange_lines(x, "confirmatory", told, True, seq)
    assert lines[:3] == [
        "Quality — are backup's grades interchangeable with main's?  not interchangeable  "
        "[confirmatory]",
        "  confirmatory: 1 of 9 window night(s) missing",
        "  group-sequential: O'Brien-Fleming spending over looks at night(s) 5/8 (planned 5/9: "
        "the window closed with 8 of 9 nights, its final look spending all α left at "
        "information 8/9)"]
    assert lines[4] == ("  backup keeps 96% of main's draw-to-draw rank agreement (limit 50%; "
                        "z -3.10 against ±1.66 at the look)")
    rate = noise_rate(x, [5, 8], 2, "not interchangeable", 9)
    assert lines[-1] == (f"  noise-backup rate {rate:.3f} = P(a backup whose grades are noise "
                         "gets 'not interchangeable' here)")
    assert f"{rate:.3f}" == "0.742"
    # bounds re-planned over 8 nights would have printed another rate
    assert f"{noise_rate(x, [5, 8], 2, 'not interchangeable'):.3f}" == "0.738"


def test_a_window_closed_below_its_minimum_is_exploratory_at_its_final_look(planned):
    cfg_path, cfg = planned
    gone = ", ".join(f"DATE '{n}'" for n in ("2027-04-30", "2027-05-03", "2027-05-04",
                                             "2027-05-05"))
    sql(cfg, *[f"DELETE FROM {t} WHERE night IN ({gone})" for t in ("calls", "units", "runs")])
    seq = study(cfg).metrics.interchange_sequential
    assert (seq["verdict"], seq["looks"], seq["planned"], seq["reached"]) == (
        "inconclusive", [5], [5, 9], 1)
    why = ("exploratory: the window has closed with 4 of 9 window night(s) missing: "
           "2027-04-30 (not run),")
    assert label_lines(headline(cfg_path, "--verbose"))[:6] == [
        "Quality — are backup's grades interchangeable with main's?  inconclusive  [exploratory]",
        f"  {why}",
        "    2027-05-03 (not run), 2027-05-04 (not run), 2027-05-05 (not run); 5 complete, "
        "below the plan's",
        "    minimum of 6 (the power 0.80 at h=1 the window was sized for)",
        "  group-sequential: O'Brien-Fleming spending over looks at night(s) 5 (planned 5/9: "
        "the window",
        "    closed with 5 of 9 nights, its final look spending all α left at information 5/9)"]
