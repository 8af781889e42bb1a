"""The slowdown's interval under night-to-night drift (`evals.speed.slowdown_interval`)."""

import math

import numpy as np
import pytest
from scipy import stats

from dualpath.evals.speed import drift_df, slowdown_interval


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


def test_hand_computed_cosine_variance_at_twenty_one_nights():
    # floor(0.4 * 21^(2/3)) = floor(3.045) = 3 cosine terms, t on 3 df
    x = np.array([0.05 * ((7 * i) % 11) + 0.01 * i for i in range(21)])
    n, t = 21, np.arange(1, 22)
    lam = [math.sqrt(2 / n) * float((x * np.cos(math.pi * j * (t - 0.5) / n)).sum())
           for j in (1, 2, 3)]
    half = 3.1824463052837078 * math.sqrt(np.mean(np.square(lam)) / n)   # t(0.975, 3 df)
    assert slowdown_interval(x) == pytest.approx((x.mean() - half, x.mean() + half, 3))


def test_df_rule_and_refusal():
    # Lazarus, Lewis, Stock & Watson (2018): floor(0.4 n^(2/3)) cosine terms, at least 2
    assert [drift_df(n) for n in (2, 3, 4, 5, 10, 11, 12, 20, 21, 30, 49, 50)] == \
        [1, 2, 2, 2, 2, 2, 2, 2, 3, 3, 5, 5]
    with pytest.raises(ValueError, match="2 or more"):
        slowdown_interval(np.array([0.1]))
