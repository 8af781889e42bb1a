"""Statistics on hand-built inputs (expected values worked out in comments) and cross-checks
against reference implementations on shared random fixtures."""

import math

import krippendorff
import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from dualpath.evals.agreement import (grade_distribution, icc_oneway, krippendorff_alpha_ordinal,
                             quadratic_kappa, self_agreement, spearman_brown)
from dualpath.evals.compare import cross_path_agreement
from dualpath.evals.rankic import nightly_rank_ic, rank_ic_summary, spearman, summarize_ic
from dualpath.evals.returns import forward_returns
from dualpath.evals.scores import ticker_scores, usable_units
from dualpath.evals.speed import seconds

RNG_SEEDS = [0, 1, 2, 3, 4]


# ---- cross-checks against reference implementations -------------------------------------

@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_spearman_matches_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, 60).astype(float)           # grades: many ties
    b = rng.normal(size=60)
    b[::7] = b[0]                                      # ties on the return side too
    assert abs(spearman(a, b) - stats.spearmanr(a, b).statistic) < 1e-12


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_quadratic_kappa_matches_sklearn_with_full_labels(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 6, 80)
    b = np.clip(a + rng.integers(-1, 2, 80), 1, 5)
    ref = cohen_kappa_score(a, b, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert abs(quadratic_kappa(a, b) - ref) < 1e-12


def test_labels_matter_when_a_grade_is_absent():
    # grades 1, 2 and 5 only: sklearn would infer labels [1, 2, 5] and treat 2 -> 5 as one
    # step instead of three; the fixed scale keeps the real distances
    a = np.array([1, 2, 5, 2, 1, 5, 2])
    b = np.array([2, 2, 5, 5, 1, 2, 1])
    full = cohen_kappa_score(a, b, weights="quadratic", labels=[1, 2, 3, 4, 5])
    inferred = cohen_kappa_score(a, b, weights="quadratic")
    assert abs(quadratic_kappa(a, b) - full) < 1e-12
    assert abs(full - inferred) > 0.01


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_krippendorff_alpha_matches_the_package_with_missing_draws(seed):
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, 40)
    data = np.clip(truth[None, :] + rng.integers(-1, 2, (3, 40)), 1, 5).astype(float)
    data[rng.random((3, 40)) < 0.15] = np.nan           # failed draws
    ref = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal",
                             value_domain=[1, 2, 3, 4, 5])
    assert abs(krippendorff_alpha_ordinal(data) - ref) < 1e-12


# ---- hand-built inputs ----------------------------------------------------------------------

def test_quadratic_kappa_hand_values():
    assert quadratic_kappa([1, 2, 3], [1, 2, 3]) == 1.0
    # opposite extremes: observed weighted disagreement 2 (two cells with w=1), expected 1
    # (row/col sums 1,0,0,0,1 over n=2: E = 0.5 in each corner) -> 1 - 2/1 = -1
    assert quadratic_kappa([1, 5], [5, 1]) == pytest.approx(-1.0)
    assert math.isnan(quadratic_kappa([3, 3], [3, 3]))      # no variance: undefined, no crash


def test_icc_and_spearman_brown_hand_values():
    # rows 1,2 / 3,4 / 5,6: MSB = 2*((−2)²+0+2²)/2 = 8, MSW = (6 * 0.25)/3 = 0.5
    icc1, icck = icc_oneway(np.array([[1, 2], [3, 4], [5, 6]]))
    assert icc1 == pytest.approx(7.5 / 8.5) and icck == pytest.approx(7.5 / 8)
    # Spearman-Brown of ICC(1,1) over k=2 equals ICC(1,k)
    assert spearman_brown(icc1, 2) == pytest.approx(icck)


def test_summary_hand_values():
    ic = np.array([0.1, -0.05, 0.2, 0.05])
    s = summarize_ic(ic, horizon=1)
    # mean 0.075, sd (ddof 1) = sqrt(((.025)²+(.125)²+(.125)²+(.025)²)/3) = sqrt(0.0325/3)
    assert s["mean_ic"] == pytest.approx(0.075)
    assert s["sd_ic"] == pytest.approx(math.sqrt(0.0325 / 3))
    assert s["icir"] == pytest.approx(0.075 / math.sqrt(0.0325 / 3))
    assert s["share_positive"] == 0.75
    # h=1: all 4 nights are independent, t = mean / (sd / sqrt 4) with 3 df
    assert s["t"] == pytest.approx(0.075 / (math.sqrt(0.0325 / 3) / 2)) and s["df"] == 3


def day(s):
    return pd.Timestamp(s)


def test_forward_returns_gaps_holiday_and_pending():
    # Calendar: Mon 4, Tue 5, Wed 6, (Thu 7 holiday: nobody trades), Fri 8. B lacks Wed 6.
    prices = pd.DataFrame([
        ("A", "2027-01-04", 100.0), ("A", "2027-01-05", 110.0), ("A", "2027-01-06", 121.0),
        ("A", "2027-01-08", 133.1),
        ("B", "2027-01-04", 50.0), ("B", "2027-01-05", 40.0), ("B", "2027-01-08", 60.0),
    ], columns=["ticker", "date", "adj_close"]).assign(date=lambda d: pd.to_datetime(d["date"]))
    fr = forward_returns(prices, [day("2027-01-05"), day("2027-01-06"), day("2027-01-07"),
                                  day("2027-01-08")], [1, 2])
    get = lambda n, t, h: fr[(fr.night == day(n)) & (fr.ticker == t) & (fr.horizon == h)].iloc[0]
    assert get("2027-01-05", "A", 1).fwd_return == pytest.approx(0.10)     # 110 -> 121
    r = get("2027-01-05", "B", 1)                # B has no Wed price: missing, not zero
    assert r.status == "missing" and math.isnan(r.fwd_return)
    assert get("2027-01-05", "B", 2).fwd_return == pytest.approx(0.5)      # Tue 40 -> Fri 60
    r = get("2027-01-06", "A", 1)                # the holiday is skipped: Wed -> Fri
    assert r.end_date == day("2027-01-08") and r.fwd_return == pytest.approx(0.10)
    r = get("2027-01-07", "A", 1)                # a holiday night measures from Wed's close
    assert r.start_date == day("2027-01-06") and r.fwd_return == pytest.approx(0.10)
    r = get("2027-01-08", "A", 1)                # nothing after Friday yet
    assert r.status == "pending" and math.isnan(r.fwd_return)


def test_pending_horizon_is_never_reported_as_a_value():
    prices = pd.DataFrame({"ticker": np.repeat([f"T{i}" for i in range(6)], 3),
                           "date": np.tile(pd.to_datetime(["2027-01-04", "2027-01-05",
                                                           "2027-01-06"]), 6),
                           "adj_close": np.arange(1, 19, dtype=float)})
    scores = pd.DataFrame({"night": day("2027-01-05"), "path": "main",
                           "ticker": [f"T{i}" for i in range(6)], "score": [1, 2, 3, 4, 5, 3.0],
                           "n_draws": 2, "n_failed": 0})
    nightly = nightly_rank_ic(scores, forward_returns(prices, [day("2027-01-05")], [1, 5]))
    h5 = nightly[nightly.horizon == 5].iloc[0]
    assert h5.status == "pending" and math.isnan(h5.ic)
    summary = rank_ic_summary(nightly).set_index("horizon")
    assert summary.loc[5, "nights"] == 0 and math.isnan(summary.loc[5, "mean_ic"])
    assert summary.loc[5, "pending_nights"] == 1
    assert summary.loc[1, "nights"] == 1


def test_scores_use_parsed_draws_and_count_failures():
    units = pd.DataFrame({"night": day("2027-01-05"), "path": "p", "ticker": ["A", "A", "A", "B"],
                          "draw": [1, 2, 3, 1], "grade": pd.array([4, 5, None, None], "Int64"),
                          "run_status": "complete", "clean": True})
    s = ticker_scores(usable_units(units)).set_index("ticker")
    assert s.loc["A", "score"] == 4.5 and s.loc["A", "n_draws"] == 2 and s.loc["A", "n_failed"] == 1
    assert math.isnan(s.loc["B", "score"]) and s.loc["B", "n_draws"] == 0
    partial = units.assign(run_status="partial")
    assert usable_units(partial).empty


def test_self_agreement_constant_ratings_give_nan_with_reason():
    units = pd.DataFrame({"night": day("2027-01-05"), "path": "p",
                          "ticker": np.repeat(["A", "B", "C"], 2), "draw": [1, 2] * 3,
                          "grade": 3})
    out = self_agreement(units)
    assert out["exact_agreement"] == 1.0 and out["chance_agreement"] == 1.0
    assert math.isnan(out["kappa_exact"]) and math.isnan(out["mean_qwk"]) and math.isnan(out["krippendorff_alpha"])
    assert math.isnan(out["icc_1_1"]) and "undefined" in out["note"]


def test_self_agreement_hand_values():
    # 4 ticker-nights, 2 draws: agree on 3 of 4 -> exact 0.75; grades 1,1,2,2,4,4,5,4
    units = pd.DataFrame({"night": day("2027-01-05"), "path": "p",
                          "ticker": np.repeat(list("ABCD"), 2), "draw": [1, 2] * 4,
                          "grade": [1, 1, 2, 2, 4, 4, 5, 4]})
    out = self_agreement(units)
    assert out["exact_agreement"] == 0.75
    # Cohen p_e of the pair: draw 1 has 1,2,4,5 (1/4 each), draw 2 has 1,2,4,4 (1/4,1/4,1/2)
    # -> 1/16 + 1/16 + 1/8 = 1/4; kappa = (3/4 - 1/4) / (1 - 1/4) = 2/3
    assert out["chance_agreement"] == pytest.approx(0.25)
    assert out["kappa_exact"] == pytest.approx(cohen_kappa_score([1, 2, 4, 5], [1, 2, 4, 4]))
    assert out["kappa_exact"] == pytest.approx(2 / 3)
    ref = cohen_kappa_score([1, 2, 4, 5], [1, 2, 4, 4], weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert out["mean_qwk"] == pytest.approx(ref, abs=1e-12)
    dist = grade_distribution(units.assign(grade=units["grade"].astype("Int64")))
    assert dist.loc[0, "4"] == 3 / 8 and dist.loc[0, "3"] == 0


def test_cross_path_agreement():
    scores = pd.DataFrame({"night": day("2027-01-05"), "ticker": list("ABCD") * 2,
                           "path": ["main"] * 4 + ["backup"] * 4,
                           "score": [1, 2, 3, 4.5, 1, 2, 3, 4.5], "n_draws": 2})
    out = cross_path_agreement(scores, "main", "backup")
    assert out["spearman"] == pytest.approx(1.0) and out["qwk_rounded"] == pytest.approx(1.0)


def test_speed_bases_and_denominators_are_one_function():
    runs = pd.DataFrame({"run_id": ["r"], "path": ["p"], "wall_s": [100.0], "time_scale": [0.5],
                         "tickers_planned": [2]})
    units = pd.DataFrame({"run_id": "r", "seconds": [30.0, 40.0, 50.0, 40.0]})
    one = lambda basis, per: seconds(runs, basis, per, units).iloc[0]
    # throughput: 100 s wall / 0.5 scale = 200 s real; ÷ 2 tickers = 100 s, ÷ 4 units = 50 s
    assert one("throughput", "ticker") == 100.0 and one("throughput", "unit") == 50.0
    # slot-latency: mean unit 40 s / 0.5 = 80 s per unit; a ticker's 2 draws = 160 s
    assert one("slot-latency", "unit") == 80.0 and one("slot-latency", "ticker") == 160.0
    with pytest.raises(ValueError, match="basis must be one of"):
        seconds(runs, "seconds", "ticker", units)
