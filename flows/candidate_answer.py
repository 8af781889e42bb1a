"""What a candidate costs to decide (before scoring) and what it answers (after), from the
warehouse: the reference's own draws size the nights, the candidate's speed sizes the hours,
and its answer uses the study's statistics over the reference's stored runs of the same
nights (`evals.candidate`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date

import pandas as pd

from dualpath.config import Config
from dualpath.warehouse.db import reader

POWER = 0.8


@dataclass(frozen=True)
class Cost:
    """What deciding interchangeability costs on the candidate."""

    nights_needed: int | None      # for POWER in both decisions (None: beyond 250 / no ρ_RR)
    rho_rr: float                  # the reference's own draw-to-draw rank agreement
    rho_source: str
    ref_draws: int
    draws: int
    tickers: int
    s_per_unit: float              # real-scale seconds per unit on the candidate
    speed_source: str
    watts: float                   # NaN: no power model
    limit: float
    alpha: float

    @property
    def hours_per_night(self) -> float:
        return self.s_per_unit * self.tickers * self.draws / 3600

    def hours(self, nights: int) -> float:
        return self.hours_per_night * nights

    def kwh(self, nights: int) -> float:
        return self.watts * self.hours(nights) / 1000

    def nights_in(self, budget_h: float) -> int:
        """The most whole nights that fit `budget_h` hours (0: not one)."""
        per = self.hours_per_night
        return int(budget_h // per) if per > 0 and math.isfinite(per) else 0

    def lines(self, available: int) -> list[str]:
        need = (f"{self.nights_needed} past night(s)" if self.nights_needed is not None
                else "more than 250 past nights")
        n = self.nights_needed or available
        energy = (f"~{self.kwh(n):.2f} kWh (modelled {self.watts:.0f} W)"
                  if math.isfinite(self.watts) else "energy unknown until measured")
        return [f"to decide interchangeability with power {POWER:g}: {need} x {self.tickers} "
                f"tickers x {self.draws} draw(s) (reference at {self.ref_draws}; ρ_RR "
                f"{self.rho_rr:.2f} from {self.rho_source}; limit {self.limit:.0%}, α "
                f"{self.alpha:g}); {available} past night(s) have frozen inputs",
                f"that costs ~{self.hours(n):.2f} h on the candidate ({self.speed_source}, "
                f"{self.s_per_unit:.1f} s/unit real-scale) and {energy}"]


def nights_for_power(tickers: int, rho_rr: float, limit: float, alpha: float,
                     draws: tuple[int, int], units: pd.DataFrame | None = None,
                     reference: str = "main") -> int | None:
    """The one call that sizes the sitting: by resampling the reference's own stored draws
    (`evals.icr_plan.pilot_nights`, the study's pilot planner) where they can say; else the
    normal approximation at the reference's measured ρ_RR with the variances of the
    heavy-tailed DGP (`evals.interchange.ASSUMED_VARS`). None: one reference draw."""
    from dualpath.evals import icr_plan
    from dualpath.evals import interchange as ic

    if draws[0] < 2 or draws[1] < 1:
        return None
    if units is not None and len(units):
        got = icr_plan.pilot_nights(units, reference, tickers, draws, POWER, limit, alpha)
        if got is not None:
            return got.nights
    var = ic.assumed_var(*draws)
    if var is None or not (math.isfinite(rho_rr) and rho_rr > 0):
        plan = icr_plan.assumed_nights(tickers, draws, POWER, limit, alpha)
        return plan.nights if plan else None
    return ic.nights_needed(rho_rr, var, tickers, limit, alpha, POWER)


def reference_rho(cfg: Config, reference: str, nights: list[date]) -> tuple[float, str]:
    """The reference's draw-to-draw rank agreement over its stored draws of `nights`."""
    rho, source, _ = reference_draws(cfg, reference, nights)
    return rho, source


def reference_draws(cfg: Config, reference: str,
                    nights: list[date]) -> tuple[float, str, pd.DataFrame]:
    """(ρ_RR, where from, the usable units) of the reference's stored draws of `nights`."""
    from dualpath.evals.interchange import cluster_terms
    from dualpath.evals.scores import usable_units
    from dualpath.warehouse.frames import units_frame

    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        u = units_frame(con, cfg.experiment.name, paths=[reference])
    u = usable_units(u[pd.to_datetime(u["night"]).dt.date.isin(set(nights))])
    if not len(u):
        return math.nan, "no stored draws", u
    t = cluster_terms(u, reference, "\0none")
    n = float(t["rr_n"].sum())
    return (float(t["rr_s"].sum()) / n if n else math.nan,
            f"{reference}'s draws on {u['night'].nunique()} night(s)", u)


def settings(cfg: Config) -> tuple[float, float, object]:
    """(interchangeability limit, α, the frozen plan or None): the plan's when frozen."""
    from dualpath.evals.interchange import LIMIT_SHARE
    from dualpath.flows.prereg import frozen_plan

    frozen, _ = frozen_plan(cfg)
    plan = frozen.plan if frozen else None
    if plan is not None and plan.interchange is not None:
        return plan.interchange.limit, plan.interchange.alpha, plan
    return LIMIT_SHARE, cfg.comparison.alpha, plan


def decide_cost(cfg: Config, cfg_c: Config, name: str, reference: str,
                nights: list[date]) -> Cost:
    """Before scoring: nights for power from the reference's draws, hours at the
    candidate's measured speed (else the time model), energy from its power model."""
    from dualpath.flows.planning import estimates

    limit, alpha, _ = settings(cfg)
    rho, source, units = reference_draws(cfg, reference, nights)
    draws = (cfg.draws_for(reference), cfg_c.experiment.draws)
    need = nights_for_power(len(cfg.tickers()), rho, limit, alpha, draws, units, reference)
    e = next(x for x in estimates(cfg_c) if x.path == name)
    sp = cfg_c.paths[name]
    watts = (min(sp.power.idle_w + sp.power.w_per_busy_slot * sp.slots, sp.power.power_limit_w)
             if sp.engine == "sim" else math.nan)
    return Cost(need, rho, source, draws[0], draws[1], len(cfg.tickers()), e.s_per_unit,
                e.source, watts, limit, alpha)


def choose_nights(available: list[date], cost: Cost, nights: int | None = None,
                  budget_h: float | None = None) -> list[date]:
    """The latest past nights to score: `nights` of them, else the most that fit
    `budget_h`, else as many as power needs (all there are when that is more)."""
    n = nights if nights is not None else (cost.nights_in(budget_h) if budget_h is not None
                                           else cost.nights_needed or len(available))
    return available[-n:] if n > 0 else []


def _frames(con, experiment: str, path: str, nights: set, label: str | None = None) -> dict:
    from dualpath.warehouse.frames import calls_frame, runs_frame, units_frame

    out = {}
    for key, fn in (("units", units_frame), ("calls", calls_frame), ("runs", runs_frame)):
        f = fn(con, experiment, paths=[path])
        f = f[pd.to_datetime(f["night"]).dt.date.isin(nights)]
        out[key] = f.assign(path=label) if label else f
    return out


def answer(cfg: Config, candidate_experiment: str, name: str, reference: str,
           does: dict | None = None):
    """The candidate's answer over the nights it was scored on, against the reference's
    stored runs of the same nights (`evals.candidate.candidate_answer`); None before any.
    `does`: the candidate's settings (`flows.candidate.settings_of`), whose differences
    from the reference's are named."""
    from dualpath.flows.candidate import differences, settings_of

    from dualpath.evals.candidate import candidate_answer
    from dualpath.evals.compare import DeltaTest
    from dualpath.evals.report import compute_metrics
    from dualpath.evals.verdict import primary_verdict
    from dualpath.flows import metrics as fm
    from dualpath.flows.prereg import planned_tests
    from dualpath.warehouse.candidates import candidate_nights
    from dualpath.warehouse.frames import prices_frame

    limit, alpha, plan = settings(cfg)
    q = fm.question(cfg, plan)
    # a candidate that shares the reference's name is named apart in the frames
    label = name if name != reference else f"{name}-candidate"
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        nights = set(candidate_nights(con, candidate_experiment))
        if not nights:
            return None
        ref = _frames(con, cfg.experiment.name, reference, nights)
        cand = _frames(con, candidate_experiment, name, nights, label)
        prices = prices_frame(con)
    both = {k: pd.concat([ref[k], cand[k]], ignore_index=True) for k in ref}
    tests = planned_tests(plan) if plan else None
    m = compute_metrics(both["units"], both["calls"], both["runs"], prices,
                        cfg.experiment.horizons, (reference, label), margin=q.margin,
                        alpha=alpha, primary_horizon=q.primary_horizon,
                        sessions=fm.sessions_for(cfg, prices), tests=tests,
                        interchange_limit=limit)
    m.interchange_planned = plan is not None and plan.interchange is not None
    primary = (tests[plan.primary.horizon] if plan else
               DeltaTest(q.primary_horizon, margin=q.margin, alpha=q.alpha))
    v = primary_verdict(m.comparison, primary, None, reference, label)
    draws = {reference: cfg.draws_for(reference),
             label: int(cand["units"]["draw"].max()) if len(cand["units"]) else 0}
    diff = differences(settings_of(cfg, reference), does) if does is not None else ()
    return candidate_answer(m, v, draws, len(cfg.tickers()), cfg.cost.price_per_kwh,
                            cfg.cost.currency, diff)


def stored_answers(cfg: Config) -> list:
    """Every candidate of the study the warehouse holds, answered (the report's section)."""
    import orjson

    from dualpath.warehouse.candidates import candidates_of
    from dualpath.warehouse.db import has_table

    path = cfg.resolve(cfg.warehouse.path)
    if not path.exists():
        return []
    with reader(path) as con:
        rows = candidates_of(con, cfg.experiment.name) if has_table(con, "candidate_runs") \
            else pd.DataFrame()
    out = []
    for r in rows.itertuples(index=False):
        a = answer(cfg, r.candidate_experiment, r.candidate, r.reference,
                   orjson.loads(r.path_json))
        if a is not None:
            out.append(a)
    return out
