"""The slowdown's interval under night-to-night drift (`evals.speed.slowdown_interval`)."""

import math

import numpy as np
import pytest
from scipy import stats

from evals.speed import drift_df, slowdown_interval


def test_two_and_three_nights_give_the_plain_t_interval():
    for x in ([0.10, 0.30], [0.10, 0.30, 0.15]):
        x = np.array(x)
        half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
        lo, hi, df = slowdown_interval(x)
        assert (lo, hi, df) == pytest.approx((x.mean() - half, x.mean() + half, len(x) - 1))


def test_hand_computed_cosine_variance_at_five_nights():
    x = np.array([0.1, 0.2, 0.4, 0.3, 0.5])
    n, t = 5, np.arange(1, 6)
    lam = [math.sqrt(2 / n) * float((x * np.cos(math.pi * j * (t - 0.5) / n)).sum())
           for j in (1, 2)]
    half = stats.t.ppf(0.975, 2) * math.sqrt(np.mean(np.square(lam)) / n)
    assert slowdown_interval(x) == pytest.approx((x.mean() - half, x.mean() + half, 2))


def test_df_rule_and_refusal():
    assert [drift_df(n) for n in (2, 3, 4, 5, 10, 20, 30)] == [1, 2, 2, 2, 2, 4, 5]
    with pytest.raises(ValueError, match="2 or more"):
        slowdown_interval(np.array([0.1]))
