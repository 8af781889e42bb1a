"""The slowdown interval's critical value, robust to a slowly drifting backup.

A server that warms up, or a cache that fills over a week, makes the nightly log ratios drift
slowly: AR(1) with φ near 0.8. Their mean then varies far more than the cosine (EWC) variance
of a few nights shows (the low frequencies a short window cannot see), and with Student-t
critical values the 95% interval covered 0.83-0.86 at 5 nights (drift sd 0.07-0.10 beside the
paths' own 0.05; `bench/calibration_speed.py`). Following Müller (2014, "HAC corrections for
strongly autocorrelated time series", JBES 32(3)), the critical value is instead the one that
gives the level exactly when the whole series is a Gaussian AR(1) at the largest φ allowed
(`PHI_MAX`): a mixture of drift and independent noise is less persistent, so its coverage is
at least that (never below the t value, which is exact for independent nights).

The statistic is T = x̄ / sqrt(Σ_j λ_j² / (n ν)), λ_j the series' first ν DCT-II
coefficients. |T| ≤ c is the event Q = x'(aa' - c²/(nν) B'B)x ≤ 0 for x ~ N(0, Σ_φ), a
quadratic form in Gaussians, whose distribution Imhof (1961) gives as a one-dimensional
integral of the form's eigenvalues; c solves P(Q ≤ 0) = level. Exact, deterministic and a few
milliseconds: no table, no simulation at run time.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

PHI_MAX = 0.8   # the slowest drift the interval is built to hold under (a week's warm-up)


def _cosines(n: int, nu: int) -> np.ndarray:
    """The first `nu` orthonormal DCT-II rows (j = 1..nu) over `n` nights, as scipy's
    `fft.dct(type=2, norm='ortho')` weighs them."""
    t = np.arange(n) + 0.5
    return np.array([math.sqrt(2 / n) * np.cos(math.pi * j * t / n) for j in range(1, nu + 1)])


def coverage(c: float, n: int, nu: int, phi: float) -> float:
    """P(|T| ≤ c) for a stationary Gaussian AR(1) series of `n` nights at `phi` (Imhof)."""
    from scipy import integrate, linalg

    idx = np.arange(n)
    sigma = phi ** np.abs(idx[:, None] - idx[None, :])
    a = np.full(n, 1 / n)
    b = _cosines(n, nu)
    form = np.outer(a, a) - c * c / (n * nu) * b.T @ b
    low = linalg.cholesky(sigma, lower=True)
    lam = np.linalg.eigvalsh(low.T @ form @ low)
    lam = lam[np.abs(lam) > 1e-14 * np.abs(lam).max()]

    def f(u: float) -> float:
        theta = 0.5 * np.arctan(lam * u).sum()
        rho = np.prod((1 + (lam * u) ** 2) ** 0.25)
        return math.sin(theta) / (u * rho)

    tail = integrate.quad(f, 0, np.inf, limit=400)[0]
    return 0.5 - tail / math.pi     # Imhof: P(Q > 0) = 1/2 + (1/π) ∫ sin θ(u) / (u ρ(u)) du


@lru_cache(maxsize=256)
def critical(n: int, nu: int, level: float = 0.95, phi: float = PHI_MAX) -> float:
    """The c with P(|T| ≤ c) = `level` under AR(1) at `phi`, never below Student t on `nu`
    degrees of freedom (T's exact distribution for independent nights)."""
    from scipy import optimize

    from dualpath.evals import dist

    t = float(dist.t_ppf(0.5 + level / 2, nu))
    if phi <= 0 or coverage(t, n, nu, phi) >= level:
        return t
    hi = 2 * t
    while coverage(hi, n, nu, phi) < level:
        hi *= 2
    return float(optimize.brentq(lambda c: coverage(c, n, nu, phi) - level, t, hi,
                                 xtol=1e-6))
