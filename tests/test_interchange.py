"""Interchangeability of grades: a hand-computed case, scipy and statsmodels cross-checks, the
invariances RankIC has (shift, monotone rescaling) and failed draws counted, never imputed."""

import math

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats

from dualpath.evals.interchange import interchange, nightly_interchange


def frame(draws: dict, night="2027-01-04") -> pd.DataFrame:
    """{(path, draw): grades by ticker} as a units frame."""
    rows = [{"night": pd.Timestamp(night), "path": p, "draw": d, "ticker": f"T{i}", "grade": g}
            for (p, d), gs in draws.items() for i, g in enumerate(gs)]
    return pd.DataFrame(rows).astype({"grade": "Int64"})


# Centred ranks (mean 2.5, population variance 1.25):
#   main 0 [1,2,3,4] -> [-1.5,-.5,.5,1.5]   main 1 [2,1,3,4] -> [-.5,-1.5,.5,1.5]
#   backup 0 [2,3,4,5] (main 0 + 1)  -> [-1.5,-.5,.5,1.5]
#   backup 1 [1,2,5,4] (ranks 1,2,4,3) -> [-1.5,-.5,1.5,.5]
# per ticker, z products (centred products / 1.25):
#   RR = M0*M1            = [.6, .6, .2, 1.8]  -> ρ_RR = 0.8
#   TR = mean(M)*mean(B)  = [1.2, .4, .4, 1.2] -> ρ_TR = 0.8
#   TT = B0*B1            = [1.8, .2, .6, .6]  -> ρ_TT = 0.8
# ratio (1-.8)/(1-.8) = 1, share 1, g = .8 - .5*.8 = .4, interaction 0, noise excess 0.
# Ticker influences: log ratio (rr - tr)/(4*.2) = [-.75, .25, -.25, .75]: Σψ² = 1.25,
#   var 4/3*1.25, se 1.2910, t(3, .975) = 3.1824 -> ratio CI exp(±4.1086) = [0.01644, 60.85].
# g: (tr - .8 - .5 (rr - .8))/4 = [.125, -.075, -.025, -.025]: Σψ² = .0225, var .03,
#   se .17321, t(3, .95) = 2.3534 -> g_low = .4 - .40762 = -.00762 < 0: inconclusive.
# Shift: ticker means main [1.5,1.5,3,4], backup [1.5,2.5,4.5,4.5] -> +0.75; spread: sd
#   1.5 / 1.2247 = 1.2247.
HAND = {("main", 0): [1, 2, 3, 4], ("main", 1): [2, 1, 3, 4],
        ("backup", 0): [2, 3, 4, 5], ("backup", 1): [1, 2, 5, 4]}


def test_hand_computed_case():
    x = interchange(frame(HAND), "main", "backup", min_tickers=3)
    assert (x.rho_rr, x.rho_tr, x.rho_tt) == pytest.approx((0.8, 0.8, 0.8))
    assert x.ratio == pytest.approx(1.0)
    assert (x.ratio_low, x.ratio_high) == pytest.approx((0.016435, 60.845), rel=1e-3)
    assert x.share == pytest.approx(1.0) and x.g == pytest.approx(0.4)
    assert x.g_low == pytest.approx(-0.00762, abs=1e-4)
    assert x.interaction == pytest.approx(0.0, abs=1e-12)
    assert x.noise_excess == pytest.approx(0.0, abs=1e-12)
    assert x.shift == pytest.approx(0.75) and x.spread == pytest.approx(1.5 / math.sqrt(1.5))
    assert x.verdict == "inconclusive" and x.tickers == 4 and x.ticker_nights == 4
    # by default 4 tickers are too few for a calibrated interval: estimates only
    y = interchange(frame(HAND), "main", "backup")
    assert y.verdict == "insufficient tickers" and y.note == "insufficient tickers (n=4, need 20)"
    assert y.ratio == pytest.approx(1.0) and math.isnan(y.ratio_low) and math.isnan(y.g_low)


def panel(rng, nights=6, tickers=60, w=0.8):
    lat = rng.normal(size=(nights, tickers))
    back = w * lat + math.sqrt(1 - w * w) * rng.normal(size=(nights, tickers))
    rows = []
    for n in range(nights):
        for p, l in (("main", lat[n]), ("backup", back[n])):
            for d in range(2):
                g = np.clip(np.round(3 + 0.6 * l + rng.normal(0, 0.7, tickers)), 1, 5)
                rows += [{"night": pd.Timestamp("2027-01-04") + pd.Timedelta(days=n),
                          "path": p, "draw": d, "ticker": f"T{t:02d}", "grade": int(g[t])}
                         for t in range(tickers)]
    return pd.DataFrame(rows).astype({"grade": "Int64"})


def test_rhos_are_mean_spearman_and_the_interval_is_statsmodels_cluster_robust():
    u = panel(np.random.default_rng(3))
    x = interchange(u, "main", "backup")
    wide = u.pivot_table(index=["night", "ticker"], columns=["path", "draw"], values="grade")
    rr = [stats.spearmanr(g[("main", 0)], g[("main", 1)])[0] for _, g in wide.groupby("night")]
    tr = [stats.spearmanr(g[("backup", j)], g[("main", i)])[0] for _, g in wide.groupby("night")
          for i in (0, 1) for j in (0, 1)]
    assert x.rho_rr == pytest.approx(np.mean(rr), abs=1e-12)
    assert x.rho_tr == pytest.approx(np.mean(tr), abs=1e-12)
    # g as the mean of a per ticker-night term, its sd clustered by ticker (statsmodels, no
    # small-sample factor but G/(G-1), the one the project uses)
    z = wide.groupby("night").rank().sub(wide.groupby("night").rank().groupby("night")
                                         .transform("mean"))
    z = z / wide.groupby("night").rank().groupby("night").transform(lambda c: c.std(ddof=0))
    term = (z["backup"].mean(axis=1) * z["main"].mean(axis=1)
            - 0.5 * z[("main", 0)] * z[("main", 1)])
    fit = sm.OLS(term.to_numpy(), np.ones(len(term))).fit(
        cov_type="cluster", cov_kwds={"groups": pd.factorize(term.index.get_level_values(1))[0],
                                      "use_correction": False})
    g_tickers = 60
    se = float(fit.bse[0]) * math.sqrt(g_tickers / (g_tickers - 1))
    assert x.g == pytest.approx(float(fit.params[0]), abs=1e-12)
    assert x.g - x.g_low == pytest.approx(stats.t.ppf(0.95, g_tickers - 1) * se, rel=1e-9)


def test_shift_and_monotone_rescaling_are_no_disagreement_but_the_shift_is_reported():
    u = panel(np.random.default_rng(4))
    same = u.copy()
    b = same["path"] == "backup"
    same.loc[b, "grade"] = same.loc[~b, "grade"].to_numpy()     # backup = main, draw by draw
    moved = same.copy()
    moved.loc[b, "grade"] = (moved.loc[b, "grade"] ** 2 + 7)     # monotone: same order
    a, m = interchange(same, "main", "backup"), interchange(moved, "main", "backup")
    assert m.ratio == pytest.approx(a.ratio) and m.g == pytest.approx(a.g)
    assert a.shift == 0 and m.shift > 7


def test_a_constant_backup_carries_no_order():
    u = panel(np.random.default_rng(5))
    u.loc[u["path"] == "backup", "grade"] = 3
    x = interchange(u, "main", "backup")
    assert x.rho_tr == 0 and x.flat == {"backup": 12, "main": 0}
    assert x.ratio == pytest.approx(1 / (1 - x.rho_rr))


def test_failed_draws_are_counted_and_their_pairs_left_out():
    u = frame({**HAND, ("backup", 1): [1, 2, 5, 4]})
    u.loc[(u["path"] == "backup") & (u["draw"] == 1) & (u["ticker"] == "T3"), "grade"] = pd.NA
    x = interchange(u, "main", "backup", min_tickers=3)
    assert x.failed == {"backup": 1, "main": 0}
    # T3 keeps its backup 0 pairs; backup 1 is ranked over its three graded tickers
    assert x.ticker_nights == 4 and math.isfinite(x.ratio)


def test_one_draw_on_main_says_what_it_needs():
    u = frame({("main", 0): [1, 2, 3, 4], ("backup", 0): [1, 2, 3, 4]})
    x = interchange(u, "main", "backup")
    assert x.verdict == "inconclusive" and math.isnan(x.ratio)
    assert x.note.startswith("main needs >= 2 graded draws of a ticker on a night")


def test_per_night_rows():
    u = panel(np.random.default_rng(6), nights=3)
    rows = nightly_interchange(u, "main", "backup")
    assert len(rows) == 3 and set(rows["verdict"]) <= {"interchangeable", "inconclusive",
                                                       "not interchangeable"}


def test_the_noise_backups_mean_and_sd_are_those_over_every_relabelling_of_its_tickers():
    import itertools

    from dualpath.evals.interchange import interchange, standardized_ranks

    rng = np.random.default_rng(11)
    rows = [{"night": n, "path": p, "draw": d, "ticker": f"T{i}",
             "grade": int(rng.integers(1, 6))}
            for n in range(3) for p in ("main", "backup") for d in range(2) for i in range(6)]
    units = pd.DataFrame(rows)
    x = interchange(units, "main", "backup", min_tickers=3)
    zbar = standardized_ranks(units).groupby(["path", "ticker", "night"])["z"].mean()
    r, c = (zbar.loc[p].unstack("night").to_numpy() for p in ("main", "backup"))
    # brute force: every one of the 720 relabellings, the same every night
    tr = np.array([(r * c[list(perm)]).sum() / 18
                   for perm in itertools.permutations(range(6))])
    assert (r * c).sum() / 18 == pytest.approx(x.rho_tr)
    assert x.g_noise == pytest.approx(tr.mean() - 0.5 * x.rho_rr, abs=1e-12)
    assert x.sd_noise_tr == pytest.approx(tr.std(), abs=1e-12)
