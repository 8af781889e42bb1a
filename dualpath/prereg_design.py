"""What a plan's decision is designed by: the RankIC plan's false-reassurance rate, the
interchangeability test's nights for power, and what a pilot of nights already in the
warehouse says (`flows.prereg.pilot`). `dualpath.prereg.draft_plan` records them; a plan
whose rate is above `FALSE_REASSURANCE_LIMIT` is frozen only with --force --reason."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dualpath.prereg import InterchangeTest, Plan
from dualpath.evals import power as pw

FALSE_REASSURANCE_LIMIT = 0.10    # above it a plan is frozen only with --force --reason
ASSUMED_MAIN_IC = (0.02, 0.03, 0.04, 0.05)    # a daily stock-scoring model's IC, no pilot


@dataclass(frozen=True)
class Pilot:
    """What nights already in the warehouse say before the window (`flows.prereg.pilot`)."""

    sd: dict                  # horizon -> sd of nightly ΔIC (horizons with enough nights)
    source: str
    main_ic: dict             # horizon -> (mean, sd, nights) of the baseline's nightly IC
    rho_rr: float = math.nan  # the baseline's draw-to-draw rank agreement
    var_g: float = math.nan   # one ticker-night's variance of the interchangeability term
    units: object = None      # the pilot nights' usable units (`evals.icr_plan` resamples them)
    baseline: str = "main"


def false_reassurance(test: str, horizon: int, nights: int, margin: float, alpha: float,
                      tickers: int, main_ic: tuple | None) -> tuple[float, str]:
    """(rate, where main's IC came from): the pilot's IC and sd at the horizon, else the
    worst over `ASSUMED_MAIN_IC` with the sd of pure market noise 1/√(N−1)."""
    m = pw.independent_count(nights, horizon)
    if main_ic is not None and math.isfinite(main_ic[1]):
        mean, sd, n = main_ic
        return (pw.false_reassurance(test, mean, sd, tickers, m, margin, alpha),
                f"pilot: {n} nights, main's IC {mean:+.3f} (sd {sd:.3f}) at h={horizon}")
    noise = 1 / math.sqrt(max(tickers - 1, 1))
    rates = [pw.false_reassurance(test, ic, noise, tickers, m, margin, alpha)
             for ic in ASSUMED_MAIN_IC]
    finite = [r for r in rates if math.isfinite(r)]
    return (max(finite) if finite else math.nan,
            f"assumed, no pilot: the worst over main's IC {ASSUMED_MAIN_IC[0]:g}–"
            f"{ASSUMED_MAIN_IC[-1]:g}")


def reassurance_problems(plan: Plan) -> list[str]:
    """Why a pass of the plan's RankIC primary would not reassure (freezing needs --force)."""
    rate = plan.design.false_reassurance if plan.design else None
    if rate is None or rate <= FALSE_REASSURANCE_LIMIT:
        return []
    return [f"its false-reassurance rate is {rate:.2f} (> {FALSE_REASSURANCE_LIMIT:.2f}): a "
            f"{plan.candidate} with no signal would pass the RankIC primary that often "
            f"({plan.design.main_ic_source})"]


def interchange_design(tickers: int, nights: int, power: float, pilot: Pilot | None,
                       limit: float = 0.5, alpha: float = 0.05,
                       draws: tuple[int, int] = (2, 2)) -> InterchangeTest:
    """The interchangeability test and the nights it needs for `power` in both decisions
    at `draws` (the baseline's, the candidate's): `plan_nights`, with how sure it is."""
    from dualpath.evals.interchange import MIN_TICKERS
    from dualpath.evals.sequential import planned_looks

    if tickers < MIN_TICKERS:
        return InterchangeTest(limit=limit, alpha=alpha, looks=planned_looks(nights),
                               nights_basis=f"no verdict at {tickers} tickers (its interval "
                               f"needs {MIN_TICKERS})")
    p = plan_nights(tickers, power, pilot, limit, alpha, draws)
    return InterchangeTest(limit=limit, alpha=alpha,
                           nights_for_power=p.nights if p else None,
                           nights_basis=p.text() if p else None,
                           looks=planned_looks(nights))


def plan_nights(tickers: int, power: float, pilot: Pilot | None, limit: float = 0.5,
                alpha: float = 0.05, draws: tuple[int, int] = (2, 2)):
    """`evals.icr_plan.NightsPlan` for `power` in both decisions at `draws` (the
    baseline's, the candidate's): by resampling the pilot's own grades where it has them
    (`evals.icr_plan.pilot_nights`, seeded), else assumed (`assumed_nights`: the heavy-tailed
    DGP's variances, labelled so). None: the baseline has one draw."""
    from dualpath.evals import icr_plan

    if draws[0] < 2 or draws[1] < 1:
        return None
    units = getattr(pilot, "units", None)
    if units is not None and len(units):
        got = icr_plan.pilot_nights(units, pilot.baseline, tickers, draws, power, limit, alpha)
        if got is not None:
            return got
    return icr_plan.assumed_nights(tickers, draws, power, limit, alpha)


def nights_to_decide(tickers: int, power: float, pilot: Pilot | None, limit: float = 0.5,
                     alpha: float = 0.05, draws: tuple[int, int] = (2, 2)) -> int | None:
    """`plan_nights`' nights (None: one draw on the baseline, or beyond its cap)."""
    p = plan_nights(tickers, power, pilot, limit, alpha, draws)
    return p.nights if p else None


DECIDE_BY = 10        # nights: the interchangeability question should be decided within them


def draws_proposal(plan: Plan, pilot: Pilot | None) -> list[str]:
    """Lines proposing one more draw on the baseline (the fast path) where the plan's draws
    cannot decide interchangeability within its window or `DECIDE_BY` nights but that can;
    empty otherwise. The plan's draws stay the config's: the user sets paths.<name>.draws."""
    from dualpath.evals.interchange import MIN_TICKERS

    x = plan.interchange
    if x is None or plan.tickers < MIN_TICKERS:
        return []
    b, c = plan.baseline, plan.candidate
    now = (plan.draws_for(b), plan.draws_for(c))
    goal = min(plan.window.nights, DECIDE_BY)
    have = x.nights_for_power
    if have is not None and have <= goal:
        return []
    more = (max(now[0] + 1, 2), now[1])
    need = nights_to_decide(plan.tickers, plan.design.power if plan.design else 0.8, pilot,
                            x.limit, x.alpha, more)
    if need is None or need > goal:
        return []
    said = lambda n: f"{n} nights" if n is not None else "more nights than it simulates"
    return [f"draws: at {now[0]} on {b} and {now[1]} on {c} interchangeability needs "
            f"{said(have)} for power {plan.design.power if plan.design else 0.8:g}; at "
            f"{more[0]} on {b} and {more[1]} on {c}, {said(need)} (within {goal}): set "
            f"paths.{b}.draws = {more[0]} in the config and draft again ({b} is the path "
            "the extra draw is cheap on)"]


@dataclass(frozen=True)
class PreservedMargin:
    """A RankIC margin stated as a share of the baseline's IC the candidate must keep."""

    preserve: float
    margin: float             # δ = (1 − preserve) × low
    low: float                # the baseline IC's one-sided 97.5% (two-sided 95%) lower bound
    mean: float
    nights: int
    independent: int


def preserved_margin(preserve: float, horizon: int, main_ic: tuple | None,
                     level: float = 0.95) -> PreservedMargin:
    """The fixed-margin "95–95" method of non-inferiority trials (FDA 2016 guidance, §IV.B):
    the baseline's effect M1 is the lower bound of its IC's 95% interval over the pilot
    nights (t on the non-overlapping ones), and δ = (1 − preserve) × M1, fixed at freeze.
    Chosen over the synthesis method, which folds the pilot's standard error into the test
    statistic: the synthesis test assumes the pilot's estimate independent of the window's
    and constant across them, its margin is not a number a plan can freeze, and the
    weekly looks, power and false-reassurance rate all need a fixed δ. The lower bound
    carries the pilot's uncertainty, conservatively: a short pilot gives a small δ.
    Raises UserError where the pilot cannot show the baseline has a signal to preserve."""
    from scipy import stats

    from dualpath.errors import UserError

    if main_ic is None or not math.isfinite(main_ic[1]):
        raise UserError(f"--preserve {preserve:g}: no pilot nights with the baseline's IC at "
                        f"h={horizon}; score pilot nights first, or give --margin")
    mean, sd, nights = main_ic
    m = pw.independent_count(nights, horizon)
    if m < pw.MIN_INDEPENDENT:
        raise UserError(f"--preserve {preserve:g}: the pilot has {m} non-overlapping night(s) "
                        f"at h={horizon}, its interval needs {pw.MIN_INDEPENDENT}")
    low = mean - stats.t.ppf(0.5 + level / 2, m - 1) * sd / math.sqrt(m)
    if not low > 0:
        raise UserError(f"--preserve {preserve:g}: the baseline's IC at h={horizon} is not "
                        f"shown above 0 on the pilot ({mean:+.3f}, 95% lower bound "
                        f"{low:+.3f}, {m} non-overlapping nights): there is no signal to "
                        "preserve a share of; score more pilot nights, or give --margin")
    return PreservedMargin(preserve, round((1 - preserve) * low, 6), low, mean, nights, m)


def preserved_text(p: PreservedMargin, baseline: str, candidate: str, horizon: int) -> str:
    """The margin in words, as draft prints it."""
    return (f"margin: {candidate} keeps ≥ {p.preserve:.0%} of {baseline}'s IC at h={horizon}: "
            f"δ = (1 − {p.preserve:g}) × {p.low:.4f}, the 95% lower bound of {baseline}'s IC "
            f"{p.mean:+.4f} over {p.independent} non-overlapping pilot nights (fixed-margin "
            "95–95 method)")
