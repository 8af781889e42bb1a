"""The interchangeability test's boundaries on t, and the nights a plan asks for: resampled
from the pilot's own grades, or assumed (and said so) without one."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dualpath.evals import icr_panels as ip
from dualpath.evals import icr_plan
from dualpath.evals.interchange import ASSUMED_RHO_RR, assumed_var, interchange, nights_needed
from dualpath.evals.sequential import bounds, sequential_verdict
from dualpath.prereg_design import Pilot, plan_nights


def test_boundaries_at_20_tickers_are_t_quantiles_of_the_z_boundaries_tail():
    # looks 5/10/15/20 of 20 nights, one-sided α 0.05: the first look spends
    # α(0.25) = 2 − 2Φ(1.95996 / √0.25) = 2 − 2Φ(3.91993) = 8.86e-5, so z = 3.7496; with
    # 20 tickers g / se is t on 19 df and the boundary with that tail is t19⁻¹(1 − 8.86e-5)
    z = bounds([5, 10, 15, 20], 20, 0.05)
    t = bounds([5, 10, 15, 20], 20, 0.05, df=19)
    assert z[0] == pytest.approx(3.7496, abs=1e-4)
    assert t[0] == pytest.approx(stats.t.ppf(1 - 2 + 2 * stats.norm.cdf(1.959964 / 0.5), 19),
                                 abs=2e-3)
    assert t == pytest.approx([stats.t.ppf(stats.norm.cdf(b), 19) for b in z], abs=1e-9)
    # each look keeps its own tail: P(T19 >= b_t) = P(Z >= b_z)
    assert [stats.t.sf(b, 19) for b in t] == pytest.approx([stats.norm.sf(b) for b in z])
    assert t[-1] == pytest.approx(1.8146, abs=1e-4) and z[-1] == pytest.approx(1.7202, abs=1e-4)
    # many tickers: the t boundary is the z boundary
    assert bounds([5, 10], 10, 0.05, df=10 ** 7) == pytest.approx(bounds([5, 10], 10, 0.05))
    # g / se = 1.78 at the last look crosses z's 1.72 but not t19's 1.81
    assert sequential_verdict([0.0, 0.0, 0.0, 1.78], [5, 10, 15, 20], 20, 0.05) == (
        "interchangeable", 3)
    assert sequential_verdict([0.0, 0.0, 0.0, 1.78], [5, 10, 15, 20], 20, 0.05,
                              df=[19] * 4) == ("inconclusive", None)


def _pilot(rng, latent, nights=5, draws=2, noise=0.45):
    """A units frame of main (and an unused backup) grades: round(3 + latent + noise)."""
    rows = []
    for t in range(nights):
        for d in range(draws):
            g = np.clip(np.round(3 + latent + rng.normal(0, noise, len(latent))), 1, 5)
            for path in ("main", "backup"):
                rows.append(pd.DataFrame({"night": t, "path": path, "draw": d,
                                          "ticker": np.arange(len(latent)), "grade": g}))
    return pd.concat(rows, ignore_index=True)


def test_vectorised_statistic_equals_interchange_on_a_small_panel():
    rng = np.random.default_rng(4)
    u = _pilot(rng, rng.normal(0, 0.3, 25), nights=3)
    u.loc[u.sample(10, random_state=1).index, "grade"] = np.nan       # failed draws
    x = interchange(u, "main", "backup")
    arr = {p: np.stack([np.stack([g.sort_values("ticker")["grade"].to_numpy()
                                  for _, g in n.groupby("draw")], -1)
                        for _, n in u[u["path"] == p].groupby("night")])
           for p in ("main", "backup")}
    s = ip.statistic(ip.cumulative(ip.terms(arr["main"], arr["backup"])), 3, 0.5)
    assert s["g"] == pytest.approx(x.g, abs=1e-12) and s["se"] == pytest.approx(x.se_g,
                                                                                abs=1e-12)
    assert s["df"] == x.tickers - 1 == 24


def test_a_heavier_tailed_pilot_asks_for_more_nights():
    """Both pilots' latent has variance 0.09 across 100 tickers: Gaussian in one, in the
    other 4 tickers at ±1.5 and 96 at 0 (ρ_RR 0.18 in both, carried by 4 tickers there):
    g's variance is larger there, so the plan needs more nights (11 and 35 here)."""
    rng = np.random.default_rng(7)
    gauss = _pilot(rng, rng.normal(0, 0.3, 100))
    heavy = _pilot(rng, np.r_[np.full(2, 1.5), np.full(2, -1.5), np.zeros(96)])
    rho = [interchange(u, "main", "backup").rho_rr for u in (gauss, heavy)]
    assert rho == pytest.approx([0.18, 0.18], abs=0.01)
    kw = dict(resamples=4, panels=25, seed=3)
    a = icr_plan.pilot_nights(gauss, "main", 100, (2, 2), **kw)
    b = icr_plan.pilot_nights(heavy, "main", 100, (2, 2), **kw)
    assert a.nights is not None and b.nights is not None and b.nights > 2 * a.nights
    assert icr_plan.pilot_nights(gauss, "main", 100, (2, 2), **kw) == a      # seeded
    assert a.source.startswith("resampled from 5 pilot night(s) of main's grades")
    assert a.power_equal >= 0.8 and a.power_noise >= 0.8 and a.low <= a.nights


def test_without_a_pilot_the_plan_is_assumed_and_says_which_data():
    p = plan_nights(100, 0.8, None, draws=(2, 2))
    # ASSUMED_VARS at 2 x 2 were measured on the heavy-tailed DGP (bench/dgps.py)
    assert p.nights == nights_needed(ASSUMED_RHO_RR, assumed_var(2, 2), 100, 0.5, 0.05, 0.8)
    assert p.text().endswith("(assumed, no pilot: heavy-tailed persistent grades (t3 latent, "
                             "AR(1) 0.9, QWK 0.12; bench/dgps.py), normal approximation)")
    assert plan_nights(100, 0.8, None, draws=(1, 2)) is None
    # a pilot without grades is no pilot for this question
    empty = Pilot({}, "", {}, math.nan, math.nan)
    assert plan_nights(100, 0.8, empty, draws=(2, 2)) == p


def test_the_headline_says_the_nights_a_study_needs_from_its_own_nights():
    from dualpath.evals.headline_icr import interchange_lines

    rng = np.random.default_rng(11)
    u = _pilot(rng, rng.normal(0, 0.3, 20), nights=4)
    x = interchange(u, "main", "backup")
    got = icr_plan.study_nights(u, x)
    assert got is not None and got.source.startswith("resampled from 4 pilot night(s)")
    lines = interchange_lines(x, "exploratory", "exploratory", False, None, got)
    assert lines[-1] == "  nights to decide, from these 4 night(s)' grades: " + got.text()
    # below 20 tickers the test gives no interval: no nights are said
    few = u[u["ticker"] < 8]
    assert icr_plan.study_nights(few, interchange(few, "main", "backup")) is None
