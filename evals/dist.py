"""The t, normal, noncentral-t and chi-square functions the tests use, called straight on the
scipy.special functions that scipy.stats evaluates them with (scipy 1.17: `t.cdf` is
`stdtr`, `t.ppf` is `stdtrit`, `norm.cdf` is `ndtr`, `nct.cdf` is `nctdtr`, `nct.sf` is
`_nct_sf` clipped to [0, 1], `chi2.ppf` is `2 * gammaincinv(df/2, p)`), so every value is the
one scipy.stats gives (tests/test_dist.py holds them equal on a grid) without the ~0.3 s of
CPU that importing scipy.stats costs each command that starts.
"""

from __future__ import annotations

import numpy as np
from scipy import special
from scipy.special import _ufuncs


def t_cdf(x, df):
    return special.stdtr(df, x)


def t_sf(x, df):
    return special.stdtr(df, -np.asarray(x))


def t_ppf(q, df):
    return special.stdtrit(df, q)


def norm_cdf(x):
    return special.ndtr(x)


def norm_sf(x):
    return special.ndtr(-np.asarray(x))


def norm_ppf(q):
    return special.ndtri(q)


def norm_isf(q):
    return -special.ndtri(q)


def nct_cdf(x, df, nc):
    return special.nctdtr(df, nc, x)


def nct_sf(x, df, nc):
    with np.errstate(over="ignore"):
        return np.clip(_ufuncs._nct_sf(x, df, nc), 0, 1)


def chi2_ppf(p, df):
    return 2 * special.gammaincinv(np.asarray(df) / 2, p)
