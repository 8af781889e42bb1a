"""Data-generating processes for the interchangeability study's grades.

Each DGP draws both paths' grades for many panels at once: arrays (reps, nights, tickers +
SWAP, draws) of grades 1-5, NaN for a failed draw (FAILED of draws, at random) and for a
ticker outside that night's universe (the first SWAP tickers leave at mid-window and SWAP
new ones join: a universe change). A ticker's latent quality persists from night to night
(AR(1)); each draw's grade is the latent read through that DGP's noise. The backup's latent
is w x main's + √(1 - w²) x its own (same law): w = 1 an equal backup, w = 0 a noise backup
(grades with the same marginal and persistence and no relation to main's tickers).

Every DGP is calibrated to the user's self-agreement of two main draws, mean QWK 0.12 and
56-61% exact agreement (`self_agreement` prints them):

- ``gaussian``: the latent N(0, 1), AR(1) 0.9; grade = round(3 + 0.19 latent + N(0, 0.42²))
  clipped to 1-5 (`bench/calibration_icr.py`'s model).
- ``heavy``: the latent's innovations Student t with 3 df (scaled to variance 1), AR(1) 0.9,
  so a few tickers sit far out and stay there; the same grade rule with its own scale.
- ``tied``: an ordinal logit with skewed cutpoints, ~70% of grades 3 and a longer tail up
  than down; each ticker's draw noise has its own scale (log-normal, sd 0.5) and each draw
  a small offset common to its tickers; the latent Gaussian, AR(1) 0.9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PERSIST, FAILED, SWAP = 0.9, 0.03, 5


@dataclass(frozen=True)
class DGP:
    """One generating process: its name, its latent's innovations and how a draw is graded."""

    name: str
    about: str
    tail_df: float | None         # Student t innovations (None: Gaussian)
    scale: float                  # the latent's weight in a draw's grade
    noise: float                  # a draw's noise sd (logistic scale for `ordinal`)
    ordinal: bool = False
    ticker_noise_sd: float = 0.0  # log-sd of each ticker's own noise scale
    draw_offset: float = 0.0      # sd of each draw's offset common to its tickers


GAUSSIAN = DGP("gaussian", "Gaussian latent, AR(1) 0.9", None, 0.19, 0.42)
HEAVY = DGP("heavy", "t3 latent innovations, AR(1) 0.9", 3.0, 0.20, 0.44)
TIED = DGP("tied", "ordinal logit, ~70% ties at 3, ticker-varying noise", None, 0.72, 0.70,
           ordinal=True, ticker_noise_sd=0.5, draw_offset=0.15)
ALL = (GAUSSIAN, HEAVY, TIED)
CUTS = np.array([-2.88, -1.76, 1.24, 2.32])     # logit cutpoints: 1|2, 2|3, 3|4, 4|5


def innovations(rng: np.random.Generator, dgp: DGP, shape: tuple) -> np.ndarray:
    if dgp.tail_df is None:
        return rng.normal(size=shape)
    nu = dgp.tail_df
    return rng.standard_t(nu, size=shape) / math.sqrt(nu / (nu - 2))


def latent(rng: np.random.Generator, dgp: DGP, reps: int, nights: int, tickers: int
           ) -> np.ndarray:
    """(reps, nights, tickers): AR(1) PERSIST with unit variance, the DGP's innovations."""
    x = np.empty((reps, nights, tickers))
    x[:, 0] = innovations(rng, dgp, (reps, tickers))
    keep = math.sqrt(1 - PERSIST ** 2)
    for t in range(1, nights):
        x[:, t] = PERSIST * x[:, t - 1] + keep * innovations(rng, dgp, (reps, tickers))
    return x


def grade(rng: np.random.Generator, dgp: DGP, lat: np.ndarray, draws: int,
          ticker_scale: np.ndarray) -> np.ndarray:
    """Grades 1-5 of `draws` draws of each ticker-night of `lat` (reps, nights, tickers)."""
    shape = lat.shape + (draws,)
    offset = rng.normal(0, dgp.draw_offset, lat.shape[:2] + (1, draws)) if dgp.draw_offset \
        else 0.0
    if not dgp.ordinal:
        e = rng.normal(0, dgp.noise, shape) * ticker_scale[:, None, :, None]
        return np.clip(np.round(3 + dgp.scale * lat[..., None] + e + offset), 1, 5)
    u = rng.random(shape).clip(1e-12, 1 - 1e-12)
    e = dgp.noise * np.log(u / (1 - u)) * ticker_scale[:, None, :, None]
    y = dgp.scale * lat[..., None] + e + offset
    return 1.0 + (y[..., None] > CUTS).sum(-1)


def panels(rng: np.random.Generator, dgp: DGP, reps: int, nights: int, tickers: int,
           w: float, draws: tuple[int, int] = (2, 2), failed: float = FAILED,
           swap: int = SWAP) -> dict:
    """Both paths' grades ({'main', 'backup'}: (reps, nights, tickers + swap, draws)) with
    failed draws and the universe change ('absent': (nights, tickers + swap), True where a
    ticker is outside that night's universe); backup latent w x main's + √(1 - w²) x its
    own."""
    width = tickers + swap
    main = latent(rng, dgp, reps, nights, width)
    own = latent(rng, dgp, reps, nights, width)
    back = w * main + math.sqrt(max(0.0, 1 - w * w)) * own
    scale = np.exp(rng.normal(0, dgp.ticker_noise_sd, (reps, width))) \
        if dgp.ticker_noise_sd else np.ones((reps, width))
    out = {"main": grade(rng, dgp, main, draws[0], scale),
           "backup": grade(rng, dgp, back, draws[1], scale)}
    absent = np.zeros((nights, width), dtype=bool)
    if swap:
        absent[nights // 2:, :swap] = True      # these leave mid-window ...
        absent[:nights // 2, tickers:] = True   # ... and these join
    for g in out.values():
        g[rng.random(g.shape) < failed] = np.nan
        g[:, absent] = np.nan
    return {**out, "absent": absent}


def self_agreement(rng: np.random.Generator, dgp: DGP, reps: int = 20, nights: int = 30
                   ) -> tuple[float, float, float]:
    """(QWK, exact agreement, share of grade 3) of main's first two draws, failures aside."""
    from sklearn.metrics import cohen_kappa_score

    g = panels(rng, dgp, reps, nights, 100, 1.0, failed=0.0, swap=0)["main"]
    a, b = g[..., 0].ravel().astype(int), g[..., 1].ravel().astype(int)
    qwk = cohen_kappa_score(a, b, weights="quadratic", labels=[1, 2, 3, 4, 5])
    return float(qwk), float((a == b).mean()), float((a == 3).mean())


def to_units(p: dict, r: int, n: int | None = None):
    """Panel r's first n nights as a project ``units`` frame (a ticker outside a night's
    universe has no rows; a failed draw has its row, grade NaN)."""
    import pandas as pd

    rows = []
    for path in ("main", "backup"):
        g = p[path]
        nights, width, draws = g.shape[1:]
        for t in range(n or nights):
            keep = ~p["absent"][t]
            for d in range(draws):
                rows.append(pd.DataFrame({"night": t, "path": path, "draw": d,
                                          "ticker": np.arange(width)[keep],
                                          "grade": g[r, t, keep, d]}))
    return pd.concat(rows, ignore_index=True)
