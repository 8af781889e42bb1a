"""The slowdown's interval under night-to-night drift (`evals.speed.slowdown_interval`): the
cosine variance, its df rule, and the drift-robust critical value (`evals.drift`)."""

import math

import numpy as np
import pytest
from scipy import fft, stats

from dualpath.evals.drift import coverage, critical
from dualpath.evals.speed import drift_df, slowdown_interval


def test_independent_nights_give_students_t_exactly():
    """With φ = 0 the mean and the cosine coefficients are independent normals, so T is
    Student t on ν df: Imhof's integral must give t's own probability."""
    for n, nu in ((5, 4), (10, 4), (3, 2)):
        c = stats.t.ppf(0.975, nu)
        assert coverage(c, n, nu, 0.0) == pytest.approx(0.95, abs=1e-9)
        assert coverage(2.0, n, nu, 0.0) == pytest.approx(1 - 2 * stats.t.sf(2.0, nu), abs=1e-9)
    assert critical(5, 4, phi=0.0) == pytest.approx(stats.t.ppf(0.975, 4))


def test_the_critical_value_holds_95_percent_under_ar1_at_0_8_by_simulation():
    """400,000 Gaussian AR(1) windows of 5 nights at φ 0.8 (no other noise: the hardest
    case): the share with |T| <= c is 0.95 within simulation error (se ~0.0003), where the
    t value (2.776 on 4 df) covers far less."""
    rng = np.random.default_rng(5)
    n, nu, reps, phi = 5, 4, 400_000, 0.8
    x = np.empty((reps, n))
    x[:, 0] = rng.standard_normal(reps)
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + math.sqrt(1 - phi ** 2) * rng.standard_normal(reps)
    lam = fft.dct(x, type=2, norm="ortho", axis=1)[:, 1:nu + 1]
    tstat = np.abs(x.mean(axis=1)) / np.sqrt((lam ** 2).mean(axis=1) / n)
    c = critical(n, nu)
    assert c == pytest.approx(9.80, abs=0.01)
    assert np.mean(tstat <= c) == pytest.approx(0.95, abs=0.002)
    assert np.mean(tstat <= stats.t.ppf(0.975, nu)) < 0.80


def test_hand_computed_cosine_variance_at_five_nights():
    x = np.array([0.1, 0.2, 0.4, 0.3, 0.5])
    n, t = 5, np.arange(1, 6)
    lam = [math.sqrt(2 / n) * float((x * np.cos(math.pi * j * (t - 0.5) / n)).sum())
           for j in (1, 2, 3, 4)]
    half = critical(5, 4) * math.sqrt(np.mean(np.square(lam)) / n)
    assert slowdown_interval(x) == pytest.approx((x.mean() - half, x.mean() + half, 4))


def test_hand_computed_cosine_variance_at_fifty_nights():
    # floor(0.4 * 50^(2/3)) = floor(5.43) = 5 cosine terms
    x = np.array([0.05 * ((7 * i) % 11) + 0.01 * i for i in range(50)])
    n, t = 50, np.arange(1, 51)
    lam = [math.sqrt(2 / n) * float((x * np.cos(math.pi * j * (t - 0.5) / n)).sum())
           for j in range(1, 6)]
    half = critical(50, 5) * math.sqrt(np.mean(np.square(lam)) / n)
    assert slowdown_interval(x) == pytest.approx((x.mean() - half, x.mean() + half, 5))


def test_df_rule_and_refusal():
    # Lazarus, Lewis, Stock & Watson (2018): floor(0.4 n^(2/3)) cosine terms, at least 4
    assert [drift_df(n) for n in (2, 3, 4, 5, 10, 11, 12, 20, 21, 30, 49, 50)] == \
        [1, 2, 3, 4, 4, 4, 4, 4, 4, 4, 5, 5]
    with pytest.raises(ValueError, match="2 or more"):
        slowdown_interval(np.array([0.1]))
