"""The preregistered plan at the edges of a night: freeze it, report its status, and hold
each night to it (a differing config is a logged deviation, or a refused night)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.prereg import deviations, load_plan
from warehouse import plans
from warehouse.db import reader, transaction, writer


def freeze_plan(cfg: Config, plan_path: Path, force: bool = False) -> plans.FrozenPlan:
    """Validate the plan against the config and record its hash."""
    plan = load_plan(plan_path)
    if plan.experiment != cfg.experiment.name:
        raise UserError(f"the plan governs experiment {plan.experiment!r} but the config "
                        f"runs {cfg.experiment.name!r}; freeze it with the matching config")
    differ = deviations(plan, cfg)
    if differ:
        raise UserError("the plan does not describe this config: " + "; ".join(differ)
                        + ". Draft it from the config (`dualpath prereg draft`) or fix it")
    # one transaction: a crash between a forced plan and its deviation must lose neither
    with writer(cfg.resolve(cfg.warehouse.path)) as con, transaction(con):
        return plans.freeze(con, plan, str(Path(plan_path).resolve()), force)


@dataclass(frozen=True)
class PlanStatus:
    frozen: plans.FrozenPlan | None
    nights: list[date]
    deviations: list[dict]

    @property
    def window_complete(self) -> bool:
        return self.frozen is not None and len(self.nights) >= self.frozen.plan.window.nights


def plan_status(cfg: Config) -> PlanStatus:
    """The frozen plan (if any), the nights collected in its window, the deviation log."""
    path = cfg.resolve(cfg.warehouse.path)
    if not path.exists():
        return PlanStatus(None, [], [])
    with reader(path) as con:
        frozen = plans.current(con, cfg.experiment.name)
        if frozen is None:
            return PlanStatus(None, [], [])
        nights = plans.nights_in_window(con, frozen.plan)
        log = plans.deviation_log(con, cfg.experiment.name).to_dict("records")
    return PlanStatus(frozen, nights[:frozen.plan.window.nights], log)


def hold_night_to_plan(cfg: Config, night: date) -> list[str]:
    """Before scoring: the ways tonight's config differs from the frozen plan, logged as a
    deviation; raises when the plan says such nights are refused."""
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        frozen = plans.current(con, cfg.experiment.name)
        if frozen is None:
            return []
        differ = deviations(frozen.plan, cfg)
        if not differ:
            return []
        refuse = frozen.plan.on_deviation == "refuse"
        plans.record_deviation(con, cfg.experiment.name, night,
                               "night refused" if refuse else "config differs from plan",
                               "; ".join(differ), frozen.plan_hash)
    if refuse:
        raise UserError(f"night {night} refused: the config differs from the frozen plan "
                        f"({'; '.join(differ)}); the plan says such nights are refused. "
                        "Restore the planned config, or freeze a new plan with --force "
                        "(recorded as a deviation)")
    return differ
