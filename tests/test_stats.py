"""Inference, the paired comparison, the verdict, draws and signal shape: hand-built inputs
(expected values worked out in comments) cross-checked against scipy and statsmodels."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.weightstats import DescrStatsW

from dualpath.evals.agreement import grade_distribution
from dualpath.evals.compare import compare_paths, paired_delta_ic, unpaired_counts
from dualpath.evals.inference import (MIN_INDEPENDENT, holm, independent_nights, mean_test,
                             nights_needed, noninferiority)
from dualpath.evals.rankic import grouped_spearman, nightly_rank_ic
from dualpath.evals.report import compute_metrics
from dualpath.evals.returns import forward_returns
from dualpath.evals.signal import by_grade, draws_analysis, rank_autocorrelation, signal_shape


def day(s):
    return pd.Timestamp(s)


def panel(tickers=12, nights=30, seed=0, signal=0.0):
    """(prices, nights) on business days, plus a latent per night x ticker that the next
    day's return leans on by `signal`."""
    rng = np.random.default_rng(seed)
    days = pd.bdate_range("2027-01-04", periods=nights + 25)
    names = [f"T{i:02d}" for i in range(tickers)]
    latent = rng.normal(size=(len(days), tickers))
    steps = 0.01 * (rng.normal(size=(len(days), tickers)) + signal * np.roll(latent, 1, axis=0))
    close = 100 * np.exp(np.cumsum(steps, axis=0))
    prices = pd.DataFrame({"ticker": np.tile(names, len(days)), "date": np.repeat(days, tickers),
                           "adj_close": close.ravel()})
    return prices, list(days[:nights]), latent[:nights], names


# ---- inference ------------------------------------------------------------------------------

def test_independent_nights_skip_overlap_and_weekends():
    # start sessions 0,0 (a weekend night measures from Friday), 1, 2, 5, 6, 10; h = 5:
    # keep pos 0 (index 0), next >= 5 is pos 5 (index 4), next >= 10 is pos 10 (index 6)
    assert independent_nights(np.array([0, 0, 1, 2, 5, 6, 10]), 5).tolist() == [0, 4, 6]
    # h = 1: every distinct start session, the duplicate weekend night once
    assert independent_nights(np.array([0, 0, 1, 2]), 1).tolist() == [0, 2, 3]
    assert nights_needed(5) == (MIN_INDEPENDENT - 1) * 5 + 1


def test_mean_test_is_student_t_on_the_subseries():
    x = np.array([0.10, 0.5, 0.5, 0.5, 0.5, -0.05, 0.9, 0.9, 0.9, 0.9, 0.20, 0, 0, 0, 0, 0.05])
    out = mean_test(x, horizon=5)
    sub = x[[0, 5, 10, 15]]                       # nights 0, 5, 10, 15 share no 5-day window
    ref = stats.ttest_1samp(sub, 0.0)
    assert out["n_independent"] == 4 and out["df"] == 3
    assert out["t"] == pytest.approx(ref.statistic) and out["p"] == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert (out["ci_low"], out["ci_high"]) == (pytest.approx(ci.low), pytest.approx(ci.high))
    assert out["ci_level"] == 0.95 and "non-overlapping" in out["ci_method"]


def test_too_few_nights_give_a_label_and_no_statistic():
    out = mean_test(np.linspace(0.1, 0.2, 10), horizon=5)       # 10 nights -> 2 independent
    assert out["note"] == "insufficient nights (n=10, need 16)"
    assert all(math.isnan(out[k]) for k in ("t", "p", "ci_low", "ci_high"))


def test_noninferiority_hand_values_and_tost_match_statsmodels():
    d = np.array([0.01, -0.01, 0.02, 0.0])
    out = noninferiority(d, horizon=1, margin=0.03, alpha=0.05)
    # mean 0.005, sd sqrt(0.0005/3) = 0.012910, se 0.006455; t = 0.035/0.006455 = 5.42, 3 df
    ref = stats.ttest_1samp(d, -0.03, alternative="greater")
    assert out["p_noninferior"] == pytest.approx(ref.pvalue) and ref.pvalue < 0.01
    assert out["ci_low"] == pytest.approx(0.005 - stats.t.ppf(0.95, 3) * math.sqrt(0.0005 / 3) / 2)
    assert out["verdict"] == "non-inferior" and out["ci_level"] == pytest.approx(0.90)
    p_tost = DescrStatsW(d).ttost_mean(-0.03, 0.03)[0]
    assert out["p_equivalent"] == pytest.approx(p_tost)
    assert out["equivalence"] == "equivalent"


def test_verdicts_on_hand_made_series():
    rng = np.random.default_rng(3)
    near_zero = rng.normal(0.0, 0.01, 30)
    assert noninferiority(near_zero, 1, 0.03, 0.05)["verdict"] == "non-inferior"
    far_below = rng.normal(-0.15, 0.01, 30)
    out = noninferiority(far_below, 1, 0.03, 0.05)
    assert out["verdict"] == "inferior" and out["equivalence"] == "not shown"
    noisy = rng.normal(-0.03, 0.2, 30)
    assert noninferiority(noisy, 1, 0.03, 0.05)["verdict"] == "inconclusive"
    few = noninferiority(near_zero[:12], 5, 0.03, 0.05)          # 12 nights, 3 independent
    assert few["verdict"] == "insufficient nights" and few["note"].startswith("insufficient")
    assert math.isnan(few["ci_low"]) and math.isnan(few["mde"])


def test_holm_matches_statsmodels_and_skips_nan():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01 = 0.03, 2*0.03 = 0.06, max(0.06, 1*0.04) = 0.06
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    got = holm([0.2, math.nan, 0.01])
    assert math.isnan(got[1])
    assert [got[0], got[2]] == pytest.approx(multipletests([0.2, 0.01], method="holm")[1])



def test_holm_is_statsmodels_exactly_with_ties_and_ones():
    rng = np.random.default_rng(4)
    for n in (1, 2, 3, 7):
        p = np.round(rng.uniform(0, 0.6, n), 2)          # rounding makes ties
        assert holm(p.tolist()) == multipletests(p, method="holm")[1].tolist()


def test_subseries_test_keeps_its_size_on_overlapping_series():
    # MA(4) series, as nightly ICs of 5-day returns: the t on every night over-rejects; this
    # one must not (400 nulls: 5% +- 2.2% two standard errors)
    rng = np.random.default_rng(11)
    e = rng.normal(size=(400, 34))
    x = np.stack([e[:, j:j + 30] for j in range(5)]).sum(axis=0)
    rejects = np.mean([mean_test(row, 5)["p"] < 0.05 for row in x])
    naive = np.mean([stats.ttest_1samp(row, 0).pvalue < 0.05 for row in x])
    assert rejects <= 0.08 and naive > 0.2


# ---- the paired comparison --------------------------------------------------------------------

def two_paths(lost=2, nights=30, seed=0):
    prices, night_list, latent, names = panel(nights=nights, seed=seed, signal=0.5)
    rng = np.random.default_rng(seed + 1)
    frames = []
    for path in ("main", "backup"):
        s = np.clip(np.round(3 + latent + rng.normal(0, 0.7, latent.shape)), 1, 5)
        f = pd.DataFrame({"night": np.repeat(night_list, len(names)), "path": path,
                          "ticker": np.tile(names, len(night_list)), "score": s.ravel(),
                          "n_draws": 2, "n_failed": 0})
        if path == "backup" and lost:
            f = f[~f["ticker"].isin(names[:lost])]
        frames.append(f)
    return prices, night_list, pd.concat(frames, ignore_index=True)


def test_delta_ic_is_over_the_common_tickers_when_one_path_lost_some():
    prices, nights, scores = two_paths(lost=2)
    returns = forward_returns(prices, nights, [1, 5])
    paired = paired_delta_ic(scores, returns, "main", "backup")
    night = nights[4]
    ok = returns[(returns.night == night) & (returns.horizon == 5)].set_index("ticker")
    m = scores[(scores.night == night) & (scores.path == "main")].set_index("ticker")
    b = scores[(scores.night == night) & (scores.path == "backup")].set_index("ticker")
    common = b.index                              # backup's 10 tickers, all on main too
    ref = (stats.spearmanr(b.loc[common, "score"], ok.loc[common, "fwd_return"]).statistic
           - stats.spearmanr(m.loc[common, "score"], ok.loc[common, "fwd_return"]).statistic)
    row = paired[(paired.night == night) & (paired.horizon == 5)].iloc[0]
    assert row["n_common"] == 10 and row["delta"] == pytest.approx(ref, abs=1e-12)
    # each path's own IC (main over 12 tickers) would compare different cross-sections
    own = nightly_rank_ic(scores, returns)
    own = own[(own.night == night) & (own.horizon == 5)].set_index("path")["ic"]
    assert own["backup"] - own["main"] != pytest.approx(ref, abs=1e-6)
    assert unpaired_counts(scores, "main", "backup") == {"unpaired_nights": 0,
                                                         "unpaired_ticker_nights": 2 * 30}


def test_unpaired_nights_are_counted_and_identical_paths_give_zero_delta():
    prices, nights, scores = two_paths(lost=0)
    same = scores[scores.path == "main"]
    scores = pd.concat([same, same.assign(path="backup")])
    scores = scores[~((scores.path == "backup") & (scores.night == nights[0]))]
    returns = forward_returns(prices, nights, [1, 5])
    assert unpaired_counts(scores, "main", "backup")["unpaired_nights"] == 1
    out = compare_paths(scores, returns, "main", "backup", [1, 5], primary=5, margin=0.03,
                        alpha=0.05).set_index("horizon")
    assert out.loc[5, "role"] == "primary" and out.loc[1, "role"] == "exploratory"
    assert out.loc[5, "nights"] == 29 and out.loc[5, "mean_delta"] == 0.0
    assert out.loc[5, "verdict"] == "inconclusive"          # no variation: no test, no claim
    assert out.loc[1, "unpaired_nights"] == 1


def test_exploratory_verdicts_use_holm_adjusted_p_values():
    prices, nights, scores = two_paths(lost=2, nights=40)
    returns = forward_returns(prices, nights, [1, 2, 5])
    out = compare_paths(scores, returns, "main", "backup", [1, 2, 5], primary=5, margin=0.03,
                        alpha=0.05).set_index("horizon")
    sec = out.loc[[1, 2]]
    assert sec["p_claim_holm"].tolist() == pytest.approx(
        multipletests(sec["p_noninferior"], method="holm")[1])
    assert math.isnan(out.loc[5, "p_claim_holm"])


# ---- RankIC, returns, grades ------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_rank_ic_matches_scipy_per_group_with_ties(seed):
    prices, nights, scores = two_paths(lost=3, seed=seed)
    returns = forward_returns(prices, nights, [1, 5])
    got = nightly_rank_ic(scores, returns).set_index(["night", "path", "horizon"])
    j = scores.merge(returns[returns.status == "ok"], on=["night", "ticker"])
    for (night, path, h), g in list(j.groupby(["night", "path", "horizon"]))[::7]:
        ref = stats.spearmanr(g["score"], g["fwd_return"]).statistic
        assert got.loc[(night, path, h), "ic"] == pytest.approx(ref, abs=1e-12)
    frame = pd.DataFrame({"g": [1, 1, 1, 2, 2, 2], "x": [1, 1, 2, 3, 3, 3],
                          "y": [3, 2, 1, 1, 2, 3]})
    out = grouped_spearman(frame, ["g"], "x", "y").set_index("g")
    # group 1: ranks x (1.5, 1.5, 3), y (3, 2, 1) -> rho = -sqrt(3)/2; group 2 constant: NaN
    assert out.loc[1, "ic"] == pytest.approx(-math.sqrt(3) / 2) and math.isnan(out.loc[2, "ic"])


def test_forward_returns_step_over_sessions_and_ignore_off_session_rows():
    # sessions Mon 4, Tue 5, Wed 6, Fri 8 (Thu 7 a holiday); the vendor has a stray Thu row
    prices = pd.DataFrame([("A", "2027-01-04", 100.0), ("A", "2027-01-05", 110.0),
                           ("A", "2027-01-06", 121.0), ("A", "2027-01-07", 999.0),
                           ("A", "2027-01-08", 133.1)], columns=["ticker", "date", "adj_close"])
    prices["date"] = pd.to_datetime(prices["date"])
    sessions = pd.to_datetime(["2027-01-04", "2027-01-05", "2027-01-06", "2027-01-08",
                               "2027-01-11"])
    fr = forward_returns(prices, [day("2027-01-06"), day("2027-01-07")], [1, 2], sessions)
    assert fr.attrs["off_session_rows"] == 1
    get = lambda n, h: fr[(fr.night == day(n)) & (fr.horizon == h)].iloc[0]
    r = get("2027-01-06", 1)                       # Wed -> Fri, the Thu row is not a close
    assert r.end_date == day("2027-01-08") and r.fwd_return == pytest.approx(0.10)
    assert get("2027-01-07", 1).start_date == day("2027-01-06")   # holiday night: Wed's close
    assert get("2027-01-06", 2).status == "pending"     # Mon 11 is a session with no price yet
    plain = forward_returns(prices, [day("2027-01-06")], [1])      # no sessions: Thu counts
    assert plain.iloc[0].end_date == day("2027-01-07") and plain.attrs["off_session_rows"] == 0


def test_failed_draws_are_counted_in_the_grade_distribution():
    units = pd.DataFrame({"path": ["p"] * 4 + ["q"] * 2, "grade": pd.array([1, None, 3, 3, None, 5],
                                                                          "Int64"),
                          "outcome": ["graded", "parse_failed", "graded", "graded",
                                      "parse_failed", "graded"]})
    dist = grade_distribution(units).set_index("path")
    assert dist.loc["p", "failed"] == 0.25 and dist.loc["q", "failed"] == 0.5
    assert dist.loc["p", "3"] == 0.5 and dist.loc["p", "units"] == 4
    # a float column with NaN (no nullable dtype) counts the same
    dist = grade_distribution(units.assign(grade=[1.0, np.nan, 3, 3, np.nan, 5])).set_index("path")
    assert dist.loc["p", "failed"] == 0.25


# ---- draws and signal shape -------------------------------------------------------------------

def draw_units(nights=20, draws=3, seed=0, fail=0.0):
    prices, night_list, latent, names = panel(nights=nights, seed=seed, signal=0.8)
    rng = np.random.default_rng(seed + 5)
    g = np.clip(np.round(3 + latent[:, :, None] + rng.normal(0, 1, (nights, len(names), draws))),
                1, 5)
    units = pd.DataFrame({"night": np.repeat(night_list, len(names) * draws), "path": "main",
                          "ticker": np.tile(np.repeat(names, draws), nights),
                          "draw": np.tile(np.arange(1, draws + 1), nights * len(names)),
                          "grade": pd.array(g.ravel().astype(int), "Int64")})
    units.loc[rng.random(len(units)) < fail, "grade"] = pd.NA
    return prices, night_list, units


def test_draws_all_draws_equals_the_nightly_ic_and_projection_is_spearman_brown():
    from dualpath.evals.scores import ticker_scores
    prices, nights, units = draw_units(fail=0.05)
    returns = forward_returns(prices, nights, [1])
    out = draws_analysis(units, returns, project_to=6).set_index("k")
    ic = nightly_rank_ic(ticker_scores(units), returns)
    assert out.loc[3, "mean_ic"] == pytest.approx(ic[ic.status == "ok"]["ic"].mean(), abs=1e-12)
    assert out.loc[3, "basis"] == "measured" and out.loc[6, "basis"] == "projected"
    # at the measured k the projection returns the measurement; beyond, IC_inf * sqrt(SB(r, k))
    assert out.loc[3, "projected_ic"] == pytest.approx(out.loc[3, "mean_ic"])
    r = out.loc[1, "reliability"]
    assert out.loc[6, "reliability"] == pytest.approx(6 * r / (1 + 5 * r))
    assert out.loc[1, "mean_ic"] < out.loc[3, "mean_ic"]          # averaging draws helps here


def test_signal_shape_hand_values():
    nights = [day("2027-01-04"), day("2027-01-05")]
    scores = pd.DataFrame({"night": np.repeat(nights, 5), "path": "p",
                           "ticker": list("ABCDE") * 2, "score": [1, 2, 3, 4, 5.0] * 2,
                           "n_draws": 2})
    returns = pd.DataFrame({"night": np.repeat(nights, 5), "ticker": list("ABCDE") * 2,
                            "horizon": 1, "fwd_return": [-0.02, 0, 0, 0, 0.04] * 2,
                            "status": "ok", "start_pos": np.repeat([0, 1], 5)})
    shape = signal_shape(scores, returns).iloc[0]
    # top quintile = E (+4%), bottom = A (-2%): spread 0.06 both nights
    assert shape["top_minus_bottom"] == pytest.approx(0.06) and shape["nights"] == 2
    assert shape["rank_autocorr"] == pytest.approx(1.0)       # identical ranks night to night
    g = by_grade(scores, returns).set_index("grade")
    assert g.loc[5, "mean_fwd_return"] == pytest.approx(0.04) and g.loc[5, "ticker_nights"] == 2
    assert rank_autocorrelation(scores).iloc[0]["night_pairs"] == 1


# ---- the whole table set ----------------------------------------------------------------------

def test_compute_metrics_labels_insufficient_nights_and_names_methods():
    prices, nights, units = draw_units(nights=12)
    units = pd.concat([units, units.assign(path="backup")]).assign(run_status="complete",
                                                                    clean=True)
    m = compute_metrics(units, pd.DataFrame(), pd.DataFrame(), prices, [1, 5, 20],
                        ("main", "backup"), margin=0.03, alpha=0.05)
    c = m.comparison.set_index("horizon")
    assert c.loc[5, "role"] == "primary" and c.loc[5, "verdict"] == "insufficient nights"
    assert c.loc[5, "note"] == "insufficient nights (n=12, need 16)"
    assert c.loc[1, "role"] == "exploratory" and c.loc[1, "ci_method"]
    r = m.rank_ic.set_index(["path", "horizon"])
    assert math.isnan(r.loc[("main", 5), "t"]) and r.loc[("main", 1), "df"] == 11
    assert {"draws", "signal_shape", "by_grade"} <= set(m.tables)     # every metric, by key
    assert len(m.draws) and len(m.signal_shape) and len(m.by_grade)


def test_metrics_carry_the_paired_nightly_delta_and_the_plot_draws_it(tmp_path):
    from dualpath.evals.plots import plot_comparison
    prices, nights, units = draw_units(nights=12)
    units = pd.concat([units, units.assign(path="backup")]).assign(run_status="complete",
                                                                    clean=True)
    m = compute_metrics(units, pd.DataFrame(), pd.DataFrame(), prices, [1, 5], ("main", "backup"))
    assert set(m.nightly_delta["horizon"]) == {1, 5}
    assert (m.nightly_delta["delta"] == 0).all()          # the same grades on both paths
    assert plot_comparison(m, tmp_path / "c.png").stat().st_size > 10_000


def test_failed_units_reach_every_metric():
    prices, nights, units = draw_units(nights=12, fail=0.0)
    units = pd.concat([units, units.assign(path="backup")]).assign(run_status="complete",
                                                                    clean=True)
    units = units.reset_index(drop=True)
    # backup: every draw of T00 fails on every night; one more failed draw elsewhere
    lost = (units.path == "backup") & (units.ticker == "T00")
    units.loc[lost, "grade"] = pd.NA
    one = (units.path == "backup") & (units.ticker == "T01") & (units.draw == 1)
    units.loc[one, "grade"] = pd.NA
    m = compute_metrics(units, pd.DataFrame(), pd.DataFrame(), prices, [1], ("main", "backup"))
    g = m.grades.set_index("path")
    # 12 tickers x 3 draws: T00's 3 draws plus 1 of T01's fail -> 4 of 36 each night
    assert g.loc["backup", "failed"] == pytest.approx(4 / 36) and g.loc["main", "failed"] == 0
    ic = m.nightly_ic.set_index(["path", "horizon"]).sort_index()
    assert (ic.loc[("backup", 1), "n_tickers"] == 11).all()      # T00 has no score at all
    c = m.comparison.iloc[0]
    assert c["unpaired_ticker_nights"] == 12 and c["mean_common_tickers"] == 11
    sa = m.self_agreement.set_index("path")
    assert sa.loc["backup", "ticker_nights"] == 11 * 12          # T00 has no grade to compare
    measured = m.draws[(m.draws.path == "backup") & (m.draws.basis == "measured")]
    assert (measured["nights"] == 12).all() and len(measured) == 3   # k = 1, 2, 3


def test_small_p_values_print_in_scientific_notation():
    from dualpath.cli import _cell
    assert _cell(3.2e-7) == "3.20e-07" and _cell(0.0) == "0.000" and _cell(0.25) == "0.250"
