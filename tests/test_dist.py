"""evals.dist gives the values scipy.stats gives, on a grid of arguments."""

import numpy as np
import pytest
from scipy import stats

from dualpath.evals import dist

X = np.linspace(-8, 8, 81)
Q = np.concatenate([[1e-12, 1e-6, 0.001], np.linspace(0.01, 0.99, 50), [0.999, 1 - 1e-6]])
DFS = [1, 2, 3, 4.5, 7, 12, 30, 99, 1000]
NCS = [-3, -0.5, 0, 0.7, 2.5, 6]


def close(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape
    assert np.array_equal(np.isnan(a), np.isnan(b))
    assert np.allclose(a, b, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("df", DFS)
def test_t(df):
    close(dist.t_cdf(X, df), stats.t.cdf(X, df))
    close(dist.t_sf(X, df), stats.t.sf(X, df))
    close(dist.t_ppf(Q, df), stats.t.ppf(Q, df))
    assert dist.t_ppf(0.975, df) == stats.t.ppf(0.975, df)    # scalars too


@pytest.mark.parametrize("df", DFS)
@pytest.mark.parametrize("nc", NCS)
def test_nct(df, nc):
    close(dist.nct_cdf(X, df, nc), stats.nct.cdf(X, df, nc))
    close(dist.nct_sf(X, df, nc), stats.nct.sf(X, df, nc))
    ncp = np.linspace(0.1, 5, 17)                 # an array of noncentralities, as power uses
    close(dist.nct_sf(1.8, df, ncp), stats.nct.sf(1.8, df, ncp))


@pytest.mark.parametrize("df", DFS)
def test_chi2(df):
    close(dist.chi2_ppf(Q, df), stats.chi2.ppf(Q, df))


def test_norm():
    close(dist.norm_cdf(X), stats.norm.cdf(X))
    close(dist.norm_sf(X), stats.norm.sf(X))
    close(dist.norm_ppf(Q), stats.norm.ppf(Q))
    close(dist.norm_isf(Q), stats.norm.isf(Q))


def test_skew_kurtosis():
    from dualpath.evals.rankic import skew_kurtosis

    rng = np.random.default_rng(7)
    for n in (3, 4, 9, 30, 250):
        for x in (rng.normal(0.05, 0.1, n), rng.standard_t(3, n), rng.exponential(1, n)):
            s, k = skew_kurtosis(x)
            close(s, stats.skew(x))
            close(k, stats.kurtosis(x))
    assert np.isnan(skew_kurtosis(np.full(5, 0.3))).all()
