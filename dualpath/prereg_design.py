"""What a plan's decision is designed by: the RankIC plan's false-reassurance rate, the
interchangeability test's nights for power, and what a pilot of nights already in the
warehouse says (`flows.prereg.pilot`). `dualpath.prereg.draft_plan` records them; a plan
whose rate is above `FALSE_REASSURANCE_LIMIT` is frozen only with --force --reason."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dualpath.prereg import InterchangeTest, Plan
from evals import power as pw

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
                       limit: float = 0.5, alpha: float = 0.05) -> InterchangeTest:
    """The interchangeability test and the nights it needs for `power` in both decisions:
    from the pilot's ρ_RR and variance where it has them, else the user's QWK 0.12 with the
    variances calibrated by simulation (`evals.interchange.ASSUMED_VAR`, 2 draws)."""
    from evals import interchange as ic

    var, rho = dict(ic.ASSUMED_VAR), ic.ASSUMED_RHO_RR
    if pilot is not None and math.isfinite(pilot.var_g) and pilot.rho_rr > 0:
        scale = ic.ASSUMED_VAR["noise"] / ic.ASSUMED_VAR["equal"]
        var, rho = {"equal": pilot.var_g, "noise": pilot.var_g * scale}, pilot.rho_rr
    from evals.sequential import planned_looks

    return InterchangeTest(limit=limit, alpha=alpha,
                           nights_for_power=ic.nights_needed(rho, var, tickers, limit, alpha,
                                                             power),
                           looks=planned_looks(nights))
