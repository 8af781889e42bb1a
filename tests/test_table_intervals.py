"""A table's point estimate is its interval's own: the RankIC table prints the mean of the
non-overlapping nights its t interval is on, and the draws table prints its interval's
ends, on the seeded warehouse (whole lines)."""

import numpy as np
import pytest

from dualpath.evals.rankic import summarize_ic
from tests.cli_run import run_cli
from tests.seeded import seed_warehouse


def test_the_rankic_estimate_never_lies_outside_its_own_interval():
    # hand case at h=5: the test uses nights 0, 5, 10, 15 (mean 0.105, a tight interval);
    # the other twelve pull the mean over every night to -0.349, far outside it
    ic = np.full(16, -0.5)
    ic[[0, 5, 10, 15]] = [0.10, 0.11, 0.10, 0.11]
    s = summarize_ic(ic, 5)
    assert s["estimate"] == s["tested_mean"] == pytest.approx(0.105)
    assert s["mean_ic"] < s["ci_low"] <= s["estimate"] <= s["ci_high"]
    rng = np.random.default_rng(3)
    for _ in range(200):
        # overlapping 5-session returns: neighbouring nights' ICs share 4 sessions
        ic = np.convolve(rng.normal(0.02, 0.05, 64), np.ones(5) / 5, "valid")[:40]
        s = summarize_ic(ic, 5)
        assert s["ci_low"] <= s["estimate"] <= s["ci_high"]
        assert s["estimate"] == s["tested_mean"]
    few = summarize_ic(np.array([0.1, 0.2, 0.3]), 5)      # no interval: the plain mean
    assert few["estimate"] == few["mean_ic"] == pytest.approx(0.2)


def test_metrics_prints_the_estimate_beside_its_interval_and_the_draws_ends(tmp_path):
    cfg_path, _, _ = seed_warehouse(tmp_path)
    out = [line.rstrip() for line in run_cli("metrics", "-c", str(cfg_path)).stdout.splitlines()]
    at = next(i for i, s in enumerate(out) if "RankIC per path × horizon" in s)
    assert out[at + 1:at + 6] == [
        "path    horizon  nights  estimate    icir  n_independent      p  ci_low  ci_high  note",
        "──────  ───────  ──────  ────────  ──────  ─────────────  ─────  ──────  ───────  "
        "───────────────────────────────────",
        "backup        1       9     0.053   0.112              9  0.746  -0.310    0.415",
        "backup        5       9     0.037   0.125              2      —       —        —  "
        "insufficient nights (n=9, need 16)",
        "backup       20       9    -0.076  -0.413              1      —       —        —  "
        "insufficient nights (n=9, need 61)"]
    assert ("  estimate: mean IC over the non-overlapping nights the t, p and CI use (the "
            "interval's centre); without an interval, over every matured night (mean_ic)") in out
    at = next(i for i, s in enumerate(out) if "What each draw buys" in s)
    assert out[at + 1] == (
        "path    horizon  k  basis      nights  mean_ic  reliability  projected_ic  "
        "projected_ci_low  projected_ci_high  projected_ci")
    assert out[at + 3] == (
        "backup        1  1  measured        9    0.057        0.554         0.047            "
        "-0.273              0.366  95% two-sided t on 9 non-overlapping nights,")
