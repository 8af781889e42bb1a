"""A draw count per path (paths.<name>.draws): config, a simulated night with main 3 /
backup 2 scored and analysed, the plan's frozen draws and their deviations, and the
interchangeability estimator with unequal replicates, checked by hand."""

from __future__ import annotations

import itertools
import logging
import math
from datetime import date

import numpy as np
import pandas as pd
import pytest

from dualpath.config import parse_config
from dualpath.demo import demo_config_data
from dualpath.errors import ConfigError
from dualpath.prereg import deviations, draft_plan, plan_toml, load_plan
from dualpath.prereg_design import draws_proposal, nights_to_decide
from dualpath.evals.agreement import self_agreement
from dualpath.evals.interchange import interchange, noise_terms, standardized_ranks

NIGHT = date(2026, 3, 2)


def config(tmp_path, main=None, backup=None, draws=2, tickers=6):
    data = demo_config_data(tmp_path, tickers, draws)
    if main is not None:
        data["paths"]["main"]["draws"] = main
    if backup is not None:
        data["paths"]["backup"]["draws"] = backup
    return parse_config(data, base_dir=tmp_path)


# --- config -------------------------------------------------------------------------------

def test_a_path_draws_its_own_count_else_the_experiments(tmp_path):
    cfg = config(tmp_path, main=3)
    assert cfg.path_draws() == {"main": 3, "backup": 2}
    assert cfg.draws_text() == "3 draws on main, 2 on backup"
    plain = config(tmp_path)
    assert plain.path_draws() == {"main": 2, "backup": 2} and plain.draws_text() == "2 draws"
    # a path's draws enter the fingerprint only where they change what it scores (nights
    # scored before the field existed keep their hash)
    assert config(tmp_path, main=3).fingerprint() != plain.fingerprint()
    assert config(tmp_path, main=2).fingerprint() == plain.fingerprint()


@pytest.mark.parametrize("bad", [0, 51])
def test_a_path_draws_out_of_range_is_named(tmp_path, bad):
    with pytest.raises(ConfigError) as e:
        config(tmp_path, main=bad)
    assert f"paths.main.draws = {bad}" in str(e.value)


def test_one_draw_on_main_is_warned_by_check(tmp_path):
    from dualpath.config_checks import baseline_draws_problem

    assert baseline_draws_problem(config(tmp_path, main=3)) is None
    assert baseline_draws_problem(config(tmp_path, draws=2, backup=1)) is None
    assert baseline_draws_problem(config(tmp_path, main=1)) == (
        "paths.main scores 1 draw a night: interchangeability compares the other path's "
        "disagreement with main against main's own draw-to-draw disagreement, which needs "
        ">= 2 draws on main (set paths.main.draws = 2 or more; the other path may keep 1)")


def test_units_are_draw_major_at_each_paths_count(tmp_path):
    from dualpath.night import units_for

    cfg = config(tmp_path, main=3)
    main, backup = units_for(cfg, "main", ["A", "B"]), units_for(cfg, "backup", ["A", "B"])
    assert [(u.ticker, u.draw) for u in main] == [("A", 1), ("B", 1), ("A", 2), ("B", 2),
                                                  ("A", 3), ("B", 3)]
    assert [(u.ticker, u.draw) for u in backup] == [("A", 1), ("B", 1), ("A", 2), ("B", 2)]


def test_fewer_draws_cuts_each_path_at_its_own_draws(tmp_path, monkeypatch):
    """over_deadline = 'fewer-draws': the draws that fit, path by path."""
    import dualpath.flows.planning as planning
    from dualpath.flows import runner
    from dualpath.flows.nightly import night_window

    cfg = config(tmp_path, main=3)
    cfg = cfg.model_copy(update={"schedule": cfg.schedule.model_copy(
        update={"deadline": "07:00", "over_deadline": "fewer-draws"})})
    tickers = cfg.tickers()
    works = [runner.PathWork(path=p, run_id=p, journal=tmp_path / p, units=tuple(
        runner.units_for(cfg, p, tickers)), attempts={}, segment=1,
        units_planned=len(tickers) * cfg.draws_for(p), tickers_planned=len(tickers))
        for p in ("main", "backup")]
    # 600 s left: main at 40 s a unit fits 2 of its 3 draws (6 tickers), backup at 90 s 1 of 2
    monkeypatch.setattr(planning, "seconds_until", lambda *a: 600.0)
    monkeypatch.setattr(planning, "estimates", lambda c: [
        planning.Estimate("main", "measured", 5, 40.0, 40.0, 40.0),
        planning.Estimate("backup", "measured", 5, 90.0, 90.0, 90.0)])
    got = night_window(cfg, works, logging.getLogger("test"))
    assert {p: v[1] for p, v in got.items()} == {"main": 2, "backup": 1}


# --- the interchangeability estimator with unequal replicates -----------------------------

def units(grades: dict) -> pd.DataFrame:
    """grades: (path, draw) -> grades of tickers A-D on one night."""
    return pd.DataFrame([{"night": NIGHT, "path": p, "draw": d, "ticker": t, "grade": g}
                         for (p, d), gs in grades.items() for t, g in zip("ABCD", gs)])


MAIN3 = {("main", 1): [1, 2, 3, 4], ("main", 2): [1, 2, 3, 4], ("main", 3): [2, 1, 4, 3]}


def test_main_3_backup_2_by_hand():
    """Four tickers, distinct grades in every draw, so each draw's z is (rank − 2.5)/√1.25.
    Main's three pairs per ticker (u = rank − 2.5): A (−1.5·−1.5, −1.5·−0.5, −1.5·−0.5) →
    mean 1.25, B and C 0.5833, D 1.25, ÷ 1.25 → ρ_RR = (1 + 0.4667 + 0.4667 + 1)/4 = 11/15.
    The six cross pairs average to z̄_T·z̄_R: z̄_R·√1.25 = (−7/6, −5/6, 5/6, 7/6), the
    backup's two draws (1,2,3,4) and (2,1,3,4) give (−1, −1, 0.5, 1.5): products ÷ 1.25 =
    (14/15, 2/3, 1/3, 7/5) → ρ_TR = 5/6. The backup's one pair: (0.6, 0.6, 0.2, 1.8) →
    ρ_TT = 0.8. Each ticker-night weighs once, whatever its number of pairs."""
    u = units({**MAIN3, ("backup", 1): [1, 2, 3, 4], ("backup", 2): [2, 1, 3, 4]})
    x = interchange(u, "main", "backup", min_tickers=3)
    assert x.rho_rr == pytest.approx(11 / 15)
    assert x.rho_tr == pytest.approx(5 / 6)
    assert x.rho_tt == pytest.approx(0.8)
    assert x.ratio == pytest.approx((1 - 5 / 6) / (1 - 11 / 15))          # 0.625
    assert x.share == pytest.approx((5 / 6) / (11 / 15))
    assert x.g == pytest.approx(5 / 6 - 0.5 * 11 / 15)
    assert x.interaction == pytest.approx(0.8 + 11 / 15 - 2 * 5 / 6)
    assert x.ticker_nights == 4 and x.tickers == 4


def test_one_backup_draw_gives_cross_pairs_only():
    """Backup draw (1,2,3,4) alone: ρ_TR = mean of z̄_R·z_B = (1.4, 1/3, 1/3, 1.4)/4 =
    13/15; main–main is main's own (11/15); there is no backup–backup pair."""
    x = interchange(units({**MAIN3, ("backup", 1): [1, 2, 3, 4]}), "main", "backup",
                    min_tickers=3)
    assert x.rho_rr == pytest.approx(11 / 15) and x.rho_tr == pytest.approx(13 / 15)
    assert math.isnan(x.rho_tt) and math.isnan(x.interaction)
    assert x.ratio == pytest.approx((2 / 15) / (4 / 15))


def test_one_main_draw_is_refused_with_why():
    x = interchange(units({("main", 1): [1, 2, 3, 4], ("backup", 1): [1, 2, 3, 4],
                           ("backup", 2): [2, 1, 3, 4]}), "main", "backup", min_tickers=3)
    assert x.verdict == "inconclusive" and math.isnan(x.ratio) and math.isnan(x.g)
    assert x.note == ("main needs >= 2 graded draws of a ticker on a night (its own "
                      "draw-to-draw disagreement is the yardstick; backup may have 1)")


def test_noise_rate_terms_are_the_shuffles_exact_moments_at_3_and_2_draws():
    """The noise backup's ρ_TR (its ticker labels shuffled) over all 120 shuffles of five
    tickers, by brute force, against `noise_terms`' Hoeffding mean and sd."""
    rng = np.random.default_rng(3)
    grades = {("main", d): list(rng.permutation(5) + 1) for d in (1, 2, 3)}
    grades |= {("backup", d): list(rng.permutation(5) + 1) for d in (1, 2)}
    u = pd.DataFrame([{"night": NIGHT, "path": p, "draw": d, "ticker": t, "grade": g}
                      for (p, d), gs in grades.items() for t, g in zip("ABCDE", gs)])
    x = interchange(u, "main", "backup", min_tickers=3)
    seen = []
    for perm in itertools.permutations("ABCDE"):
        rename = dict(zip("ABCDE", perm))
        v = u.assign(ticker=[rename[t] if p == "backup" else t
                             for p, t in zip(u["path"], u["ticker"])])
        seen.append(interchange(v, "main", "backup", min_tickers=3).rho_tr)
    z = standardized_ranks(u)
    g0, _, sd0 = noise_terms(z, "main", "backup", 0.5, np.zeros(5), 5, x.rho_rr)
    assert g0 + 0.5 * x.rho_rr == pytest.approx(float(np.mean(seen)))
    assert sd0 == pytest.approx(float(np.std(seen)))


def test_self_agreement_counts_each_paths_own_draws():
    u = units({**MAIN3, ("backup", 1): [1, 2, 3, 4], ("backup", 2): [2, 1, 3, 4]})
    assert self_agreement(u[u["path"] == "main"])["draws"] == 3
    assert self_agreement(u[u["path"] == "backup"])["draws"] == 2


# --- the plan ------------------------------------------------------------------------------

def test_the_plan_freezes_each_paths_draws_and_a_change_of_either_is_a_deviation(tmp_path):
    cfg = config(tmp_path, main=3, tickers=20)
    plan = draft_plan(cfg, NIGHT, 20)
    assert (plan.draws, plan.draws_for("main"), plan.draws_for("backup")) == (2, 3, 2)
    text = plan_toml(plan)
    assert "[paths.main]" in text and "draws = 3" in text
    (tmp_path / "p.toml").write_text(text)
    assert load_plan(tmp_path / "p.toml").sha256() == plan.sha256()
    assert deviations(plan, cfg) == []
    assert deviations(plan, config(tmp_path, main=2, tickers=20)) == [
        "path main draws 2 (plan: 3)"]
    # the experiment's count moves the backup (it has none of its own), not main
    assert deviations(plan, config(tmp_path, main=3, draws=3, tickers=20)) == [
        "path backup draws 3 (plan: 2)"]
    # a plan with one count for both paths keeps its words and its hash form
    same = draft_plan(config(tmp_path, tickers=20), NIGHT, 20)
    assert all(fp.draws is None for fp in same.paths.values())
    assert deviations(same, config(tmp_path, draws=3, tickers=20)) == ["draws 3 (plan: 2)"]


def test_draft_proposes_a_third_main_draw_where_it_decides_in_time(tmp_path):
    """On the user's shape (100 tickers, no pilot: the heavy-tailed DGP's variances, ρ_RR
    0.116) 2 x 2 needs 15 nights for power 0.8 in both decisions (the noise decision's
    limit: g = −0.5 × 0.116 = −0.058, se √(0.81 / 1500) = 0.0232, power Φ(2.50 − 1.645) =
    0.80; at 14 nights 0.78); main 3 / backup 2 needs 10 (√(0.51 / 1000) = 0.0226: 0.82),
    within 10."""
    assert nights_to_decide(100, 0.8, None, draws=(2, 2)) == 15
    assert nights_to_decide(100, 0.8, None, draws=(3, 2)) == 10
    assert nights_to_decide(100, 0.8, None, draws=(1, 2)) is None
    plan = draft_plan(config(tmp_path, tickers=100), NIGHT, 20)
    assert plan.interchange.nights_for_power == 15
    assert plan.interchange.nights_basis.startswith("15 nights for power 0.8 in both "
                                                    "decisions (assumed, no pilot: heavy")
    assert draws_proposal(plan, None) == [
        "draws: at 2 on main and 2 on backup interchangeability needs 15 nights for power "
        "0.8; at 3 on main and 2 on backup, 10 nights (within 10): set paths.main.draws = 3 "
        "in the config and draft again (main is the path the extra draw is cheap on)"]
    three = draft_plan(config(tmp_path, main=3, tickers=100), NIGHT, 20)
    assert three.interchange.nights_for_power == 10 and draws_proposal(three, None) == []


# --- a simulated night, scored and analysed -----------------------------------------------

def test_a_night_at_main_3_backup_2_is_scored_recorded_and_analysed(tmp_path):
    from dualpath.flows.demo import synthetic_project
    from dualpath.flows.glance import metrics_and_headline
    from tests.helpers import SimFleet, ingest, score_night_plain
    from dualpath.warehouse.db import reader
    from dualpath.evals.speed import with_speed
    from dualpath.warehouse.queries import run_summaries

    data = demo_config_data(tmp_path, 8, 2, 0.01)
    data["paths"]["main"]["draws"] = 3
    _, cfg, market, _ = synthetic_project(tmp_path, data, 2)
    with SimFleet(cfg) as fleet:
        for night in market.nights(2):
            ingest(cfg, score_night_plain(cfg, night, fleet.urls))
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        runs = with_speed(run_summaries(con))     # each run's draws: `evals.draws`
        drawn = con.execute("SELECT path, max(draw), count(*) FROM units GROUP BY 1 "
                            "ORDER BY 1").fetchall()
    assert drawn == [("backup", 2, 2 * 8 * 2), ("main", 3, 2 * 8 * 3)]
    assert set(runs["status"]) == {"complete"}
    assert runs.groupby("path")["draws"].unique().to_dict() == {"backup": [2], "main": [3]}
    metrics, head = metrics_and_headline(cfg)
    x = metrics.interchange
    assert x.ticker_nights == 2 * 8 and math.isfinite(x.rho_rr) and math.isfinite(x.rho_tt)
    agree = metrics.self_agreement.set_index("path")["draws"].to_dict()
    assert agree == {"backup": 2, "main": 3}
    assert head.interchange is x


def test_night_lines_name_each_paths_draws():
    from dualpath.evals.format import draws_words
    from dualpath.evals.headline import Slowdown, night_lines

    assert draws_words(2) == "2 draws" and draws_words({"main": 2, "backup": 2}) == "2 draws"
    assert draws_words({"main": 3, "backup": 2}, ("backup", "main")) == \
        "2 draws on backup, 3 on main"
    s = Slowdown("main", "backup", "throughput", "", 5.0, 4.0, 6.0, 0.95, 9, 60.0, 300.0,
                 {"main": 3, "backup": 2}, {"backup": 8.3, "main": 1.7}, 100, 8,
                 {"backup": 0.67, "main": 0.13})
    assert night_lines(s) == [
        "  a night of 8 tickers × 2 draws on backup, 3 on main (this experiment's): "
        "backup 40 min, main 8 min",
        "  projected to 100 tickers × 2 draws on backup, 3 on main: backup 8.3 h, main 1.7 h"]


# --- the command line, whole output --------------------------------------------------------

def _project_3_2(tmp_path, tickers=20):
    from dualpath.flows.demo import synthetic_project

    data = demo_config_data(tmp_path, tickers, 2, 0.01)
    data["paths"]["main"]["draws"] = 3
    data["sampling"]["presence_penalty"] = 0.0        # no declared difference to print
    cfg_path, cfg, market, _ = synthetic_project(tmp_path, data, 1)
    return cfg_path, market.nights(1)[0]


def test_check_and_prereg_status_show_each_paths_draws(tmp_path):
    from tests.cli_run import run_cli

    cfg_path, first = _project_3_2(tmp_path)
    r = run_cli("check", "-c", cfg_path, columns=300)      # tmp paths are long
    assert r.returncode == 0 and r.stdout == (
        "offline check: the config alone (no server, warehouse or Prefect is contacted; "
        "`--connect` or `dualpath doctor` does that)\n"
        f"ok {cfg_path}: experiment 'demo', 20 tickers x 3 draws on main, 2 on backup, "
        "horizons [1, 5, 20]\n"
        "  path main: sim  model=qwen-27b-dense slots=8 draws=3 (simulated)\n"
        "    expect: nothing pinned (any server on the endpoint is accepted)\n"
        "  path backup: sim  model=qwen3.6-35b-a3b slots=4 (simulated)\n"
        "    expect: nothing pinned (any server on the endpoint is accepted)\n"
        "  thinking: off (the same on every path)\n")
    plan = tmp_path / "p.toml"
    assert run_cli("prereg", "draft", plan, "-c", cfg_path, "--first-night", first,
                   "--nights", 20).returncode == 0
    assert run_cli("prereg", "freeze", plan, "-c", cfg_path, "--force", "--reason",
                   "a small universe").returncode == 0
    p = load_plan(plan)
    r = run_cli("prereg", "status", "-c", cfg_path, columns=300)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[2:] == [
        f"primary: backup vs main, non-inferiority at h=1, δ={p.primary.margin}, α=0.05",
        "draws per night (frozen): main 3, backup 2",
        f"window: 0 of 20 nights from {p.window.first_night}",
        "label today: interim — no decision: no nights yet"]


def test_check_warns_when_main_has_one_draw(tmp_path):
    from dualpath.flows.demo import synthetic_project
    from tests.cli_run import run_cli

    data = demo_config_data(tmp_path, 20, 2, 0.01)
    data["paths"]["main"]["draws"] = 1
    data["sampling"]["presence_penalty"] = 0.0
    cfg_path = synthetic_project(tmp_path, data, 1)[0]
    r = run_cli("check", "-c", cfg_path, columns=300)
    assert r.returncode == 0
    assert r.stdout.splitlines()[-2:] == [
        "  warning: paths.main scores 1 draw a night: interchangeability compares the other "
        "path's disagreement with main against main's own draw-to-draw disagreement, which "
        "needs >= 2 draws on main (set paths.main.draws = 2 or more; the other path may keep 1)",
        "  thinking: off (the same on every path)"]


def test_draft_prints_both_options_at_the_users_shape(tmp_path):
    from tests.cli_run import run_cli
    from tests.helpers import make_project

    cfg_path, _, nights = make_project(tmp_path, tickers=100, draws=2, nights=1)
    r = run_cli("prereg", "draft", tmp_path / "p.toml", "-c", cfg_path, "--first-night",
                nights[0], "--nights", 20, columns=400)
    lines = r.stdout.splitlines()
    assert r.returncode == 0
    assert lines[-3] == (
        "draws: at 2 on main and 2 on backup interchangeability needs 15 nights for power "
        "0.8; at 3 on main and 2 on backup, 10 nights (within 10): set paths.main.draws = 3 "
        "in the config and draft again (main is the path the extra draw is cheap on)")
    assert lines[-4].startswith("false reassurance ") and lines[-2].startswith("wrote ")
    assert lines[-1].startswith("  dualpath prereg freeze ")


def test_the_slowdown_compares_units_where_the_paths_draws_differ():
    """main at 3 draws takes 3 units a ticker, backup at 2 takes 2: per ticker backup reads
    4× slower, per unit (the same work) 6×."""
    from dualpath.evals.headline import slowdown, speed_lines

    runs = pd.DataFrame([{"path": p, "night": n, "is_result": True, "tickers": 8,
                          "throughput_s_per_ticker": s * d, "throughput_s_per_unit": s}
                         for n in range(3) for p, s, d in (("main", 10.0 + n, 3),
                                                           ("backup", 60.0 + 6 * n, 2))])
    speed = runs.groupby("path", as_index=False)[["throughput_s_per_ticker"]].median()
    same = slowdown(runs, speed, "main", "backup", 2)
    own = slowdown(runs, speed, "main", "backup", {"main": 3, "backup": 2})
    assert same.ratio == pytest.approx(4.0) and own.ratio == pytest.approx(6.0)
    lines = speed_lines(own, None)
    assert lines[:2] == [
        "Speed — how much slower is backup?  6.0× slower than main (95% CI 6.0×–6.0×, 3 paired "
        "nights)",
        "  per unit (run wall clock ÷ ticker-draws): backup scores 2 draws a ticker, main 3"]


def test_what_each_draw_buys_is_measured_at_each_paths_own_draws():
    """main at 3 draws, backup at 2: the backup's measured k stops at 2 (its mean of all
    draws), main's at 3; a backup "k = 3" built from main's third draw would be its k = 2."""
    from dualpath.evals.returns import forward_returns
    from dualpath.evals.signal import draws_analysis
    from tests.test_stats import draw_units

    prices, nights, main = draw_units(nights=8, draws=3)
    backup = main[main["draw"] <= 2].assign(path="backup")
    out = draws_analysis(pd.concat([main, backup], ignore_index=True),
                         forward_returns(prices, nights, [1]), project_to=4)
    measured = out[out["basis"] == "measured"].groupby("path")["k"].max().to_dict()
    assert measured == {"backup": 2, "main": 3}
    at = out.set_index(["path", "k"])["mean_ic"]
    alone = draws_analysis(backup, forward_returns(prices, nights, [1]), project_to=4)
    assert at["backup", 2] == pytest.approx(alone.set_index("k").loc[2, "mean_ic"])


def test_plan_sizes_each_path_at_its_own_draws(tmp_path):
    from tests.cli_run import run_cli

    cfg_path, _ = _project_3_2(tmp_path)
    r = run_cli("plan", "-c", cfg_path, columns=300)
    lines = [x.rstrip() for x in r.stdout.splitlines()]
    assert r.returncode == 0
    # the title is wrapped to the table's width
    assert lines[0].strip().startswith("20 tickers × 3 draws on main, 2 on backup per night "
                                       "(throughput basis")
    head = next(x for x in lines if "path" in x and "┃" in x)
    assert [c.strip() for c in head.strip().strip("┃").split("┃")] == [
        "path", "slots", "draws", "source", "s_per_unit (range)", "hours (range)"]
    # main: 20 x 3 units at 25.3 s, backup: 20 x 2 at 172.3 s (the time models)
    assert lines[-1] == ("a night of 20 tickers × 3 draws on main, 2 on backup takes main "
                         "0.4 h, backup 1.9 h; no window configured ([schedule] deadline "
                         "unset; or pass --window-hours)")


def test_the_energy_ratio_compares_units_where_the_paths_draws_differ():
    """per ticker backup 2 draws × 30 kJ, main 3 × 10 kJ: 2× per ticker, 3× per unit; the
    kJ per ticker stay what a ticker costs on each path."""
    from dualpath.evals import energy

    runs = pd.DataFrame([{"path": p, "night": n, "is_result": True, "j_per_ticker": j,
                          "j_above_idle_per_ticker": j / 2, "idle_w": 30.0,
                          "energy_unknown": None}
                         for n in range(3) for p, j in (("main", 30e3), ("backup", 60e3))])
    same = energy.compare(runs, "main", "backup", 2, 8)
    own = energy.compare(runs, "main", "backup", {"main": 3, "backup": 2}, 8)
    assert same.ratio == pytest.approx(2.0) and own.ratio == pytest.approx(3.0)
    assert own.per_ticker == {"backup": 60e3, "main": 30e3}
    assert energy.energy_lines(own, "backup")[0] == (
        "Energy — how much energy per ticker?  backup 3.00× main (95% CI 3.00×–3.00×, 3 paired "
        "nights) per unit")
