"""The preregistered plan at the edges of a night and of every analysis: freeze it, hold each
night to it (a differing config is a logged deviation, or a refused night), and decide which
nights an analysis under it uses and what label its result carries (`study`): `dualpath
metrics`, the weekly report, its Prefect artifact and `prereg status` all call `study`, so
they analyse the same nights and print the same label."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo
from pathlib import Path

import pandas as pd

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.config_checks import unanalysable
from dualpath.prereg import (Plan, deviations, executable_problems, load_plan,
                             min_complete_nights, testability)
from dualpath.prereg_design import Pilot, reassurance_problems
from dualpath.evals.compare import DeltaTest
from dualpath.evals.verdict import (PrimaryVerdict, WindowFacts, late_nights, missing_nights,
                           primary_verdict)
from dualpath.warehouse import plans
from dualpath.warehouse.db import reader, transaction, writer

OFF_PLAN = ("config differs from plan", "night refused")


def freeze_plan(cfg: Config, plan_path: Path, force: bool = False,
                reason: str | None = None) -> plans.FrozenPlan:
    """Validate the plan against the config and record its hash (and where it lies relative
    to the config's folder). Fields the analysis could not honour are refused even when
    forced; a window that cannot test the primary, or nights already seen, need --force with
    a reason."""
    plan = load_plan(plan_path)
    if plan.experiment != cfg.experiment.name:
        raise UserError(f"the plan governs experiment {plan.experiment!r} but the config "
                        f"runs {cfg.experiment.name!r}; freeze it with the matching config")
    differ = deviations(plan, cfg) + executable_problems(plan, cfg.experiment.horizons)
    differ += list(filter(None, [unanalysable(cfg)]))
    if differ:
        raise UserError("the plan cannot be frozen with this config: " + "; ".join(differ)
                        + ". Draft it from the config (`dualpath prereg draft`) or fix it")
    absolute = Path(plan_path).resolve()
    relpath = os.path.relpath(absolute, cfg.base_dir.resolve())
    # one transaction: a crash between a forced plan and its deviation must lose neither
    where = cfg.resolve(cfg.warehouse.path)
    with writer(where) as con:
        with transaction(con):
            frozen = plans.freeze(con, plan, str(absolute), force, reason, relpath,
                                  testability(plan), reassurance_problems(plan))
        if not frozen.already_frozen:         # committed: kept where a rebuild finds it
            plans.log_freeze(con, where, frozen.plan_hash)
    return frozen


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


def window_nights(cfg: Config, plan: Plan) -> list[date]:
    """The planned window: `window.nights` sessions from its first night on the calendar."""
    from dualpath.calendar import MarketCalendar

    cal = MarketCalendar.from_settings(cfg.market)
    first = plan.window.first_night
    first = first if cal.is_session(first) else cal.next_session(first)
    return [first, *cal.sessions_after(first, plan.window.nights - 1)]


def plan_file_state(cfg: Config, frozen: plans.FrozenPlan) -> tuple[str, str]:
    """('matches' | 'edited' | 'missing' | 'unreadable', the path checked): the plan file
    beside this config (its path relative to the config's folder, as frozen), so a copied or
    moved study folder is checked against its own copy."""
    rel = frozen.plan_relpath
    path = cfg.resolve(Path(rel)) if rel else Path(frozen.plan_path or "")
    if not path.is_file():
        return "missing", str(path)
    try:
        return ("matches" if load_plan(path).sha256() == frozen.plan_hash else "edited",
                str(path))
    except UserError:
        return "unreadable", str(path)


def _night_states(runs: pd.DataFrame, devs: pd.DataFrame, plan: Plan) -> dict:
    """night -> why it does not count ('' when it is complete and conforming)."""
    out: dict = {}
    for night, g in runs.groupby(pd.to_datetime(runs["night"]).dt.date):
        status = dict(zip(g["path"], g["status"]))
        bad = [f"{p} {status.get(p, 'not run')}" for p in plan.paths
               if status.get(p) != "complete"]
        out[night] = ", ".join(bad)
    off = devs[devs["kind"].isin(OFF_PLAN) & devs["night"].notna()]
    for night, kind in zip(pd.to_datetime(off["night"]).dt.date, off["kind"]):
        out[night] = ", ".join(x for x in (out.get(night, ""), kind) if x)
    return out


def window_facts(cfg: Config, frozen: plans.FrozenPlan, runs: pd.DataFrame,
                 devs: pd.DataFrame, since: date | None, until: date | None,
                 scored: pd.DataFrame | None = None) -> WindowFacts:
    """Which window nights count, which fail and why, which are pending or missing, which lie
    outside; which counted nights were scored late or resumed (`scored`: when each run began,
    and its segments, as `warehouse.plans.scoring_times` gives them). A range from the
    window's start that ends before its last night scored is a look as of its end (a weekly
    report read later): the nights after it are pending, as they were then."""
    plan = frozen.plan
    window = window_nights(cfg, plan)
    states = _night_states(runs, devs, plan)
    last_run = max(states) if states else None
    look = until if since is None and until is not None and last_run and until < last_run \
        else None
    if look is not None:
        states = {n: v for n, v in states.items() if n <= look}
        last_run = max(states) if states else None
    lo, hi = since or window[0], until or max(window[-1], last_run or window[-1])
    state, path = plan_file_state(cfg, frozen)
    failed, pending, missing, analysed = {}, [], [], []
    for n in window:
        if n not in states and (last_run is None or n > last_run):
            pending.append(n)
        elif n not in states:
            missing.append(n)             # it can still be scored: late, and named so
        elif states[n]:
            failed[n] = states[n]
        elif lo <= n <= hi:
            analysed.append(n)
    sub = ""
    covered = [n for n in window if n not in pending]
    if covered and (lo > covered[0] or hi < covered[-1]):
        sub = (f"the analysis covers {lo} – {hi}, not every window night so far "
               f"({covered[0]} – {covered[-1]}): a sub-window is exploratory")
    late, resumed = scoring_history(cfg, scored, analysed)
    minimum, basis = min_complete_nights(plan)
    return WindowFacts(
        plan_hash=frozen.plan_hash, file_state=state, file_path=path,
        stored_intact=frozen.intact, forced=frozen.forced, force_reason=frozen.force_reason,
        nights_before_freeze=frozen.nights_before_freeze,
        frozen_on=frozen_on(frozen.frozen_at, cfg.market.timezone),
        window=window, analysed=analysed, failed=failed, pending=pending,
        extra=sorted(n for n in states if n not in window), sub_window=sub,
        untestable=testability(plan), primary_horizon=plan.primary.horizon,
        missing=missing, late=late, resumed=resumed,
        look=look if pending and look is not None else None, minimum=minimum,
        minimum_basis=basis)


def scoring_history(cfg: Config, scored: pd.DataFrame | None,
                    nights: list[date]) -> tuple[dict, list[date]]:
    """({night scored late: why}, [resumed]) among `nights`: a night is due before the next
    session closes (then the next night is the one to score), and late after a later night's
    scoring began (`evals.verdict.late_nights`); resumed when any of its runs has more than
    one segment."""
    from dualpath.calendar import MarketCalendar

    if scored is None or not len(scored) or not nights:
        return {}, []
    cal, counted = MarketCalendar.from_settings(cfg.market), set(nights)
    every = scored.assign(night=pd.to_datetime(scored["night"]).dt.date)
    # every night's starts, counted or not: a night begun after a failed later one is late too
    started = {n: (g["started_at"].min(), g["started_at"].max())
               for n, g in every.groupby("night")}
    due = {n: pd.Timestamp(cal.close_of(cal.next_session(n))) for n in nights}
    late = {n: f"its scoring began {started[n][1].tz_convert(cal.tz):%Y-%m-%d %H:%M} "
               f"{cal.tz.key}, {why}" for n, why in late_nights(started, due).items()
            if n in counted}
    resumed = sorted(n for n, g in every.groupby("night")
                     if n in counted and g["segments"].fillna(1).gt(1).any())
    return late, resumed


def frozen_on(frozen_at: datetime, zone: str) -> date:
    """The freeze's date in the study's time zone (a night is a session there): compared in
    UTC, a freeze at 20:30 in New York before night 1 was scored read as the next day, after
    the window's first night, and the study as exploratory, while Seoul's read interim."""
    at = frozen_at if frozen_at.tzinfo else frozen_at.replace(tzinfo=timezone.utc)
    return at.astimezone(ZoneInfo(zone)).date()


def planned_tests(plan: Plan) -> dict[int, DeltaTest]:
    """The plan's hypotheses as evals' tests, each with the plan's assumed sd."""
    sd = plan.design.sd if plan.design else (lambda h: None)
    df = plan.design.sd_df if plan.design else {}
    return {h.horizon: DeltaTest(h.horizon, h.test, h.margin, h.alpha, sd(h.horizon),
                                 h.preserve, h.baseline_ic_low, df.get(str(h.horizon)))
            for h in plan.hypotheses()}


@dataclass
class Study:
    """One analysis: its metrics, over exactly the nights it names, and its label."""

    metrics: object                                   # evals.report.Metrics
    verdict: PrimaryVerdict
    facts: WindowFacts | None
    frozen: plans.FrozenPlan | None
    nights: list[date] = field(default_factory=list)  # the nights analysed


def _matured(nightly_ic: pd.DataFrame, nights: list[date]) -> dict[int, int]:
    """horizon -> nights whose forward return has matured (a RankIC was due, on any path)."""
    if not len(nightly_ic):
        return {}
    d = nightly_ic[nightly_ic["status"] != "pending"]
    d = d[pd.to_datetime(d["night"]).dt.date.isin(set(nights))]
    return {int(h): int(g["night"].nunique()) for h, g in d.groupby("horizon")}


def study(cfg: Config, since: date | None = None, until: date | None = None,
          paths: list[str] | None = None, frames: dict | None = None) -> Study:
    """Metrics and the primary verdict. Under a frozen plan only the window's complete,
    conforming nights within [since, until] are analysed (anything else is named in the
    notes and the label); without one, every night in the range, labelled exploratory."""
    from dataclasses import replace

    from dualpath.flows import metrics as fm

    f = frames or fm.load_frames(cfg, paths)
    frozen = f["frozen"]
    facts = None
    if frozen is not None:
        # a night counts by every path's run, whichever paths this analysis shows
        facts = window_facts(cfg, frozen, f.get("all_runs", f["runs"]), f["deviations"], since,
                             until, f.get("scored"))
        keep = set(facts.analysed)
    else:
        keep = {n for n in pd.to_datetime(f["runs"]["night"]).dt.date
                if (since is None or n >= since) and (until is None or n <= until)}
    sel = {k: f[k][pd.to_datetime(f[k]["night"]).dt.date.isin(keep)]
           for k in ("units", "calls", "runs")}
    plan = frozen.plan if frozen else None
    q = fm.question(cfg, plan, paths)
    m = fm.compute(cfg, q, sel["units"], sel["calls"], sel["runs"], f["prices"],
                   fm.sessions_for(cfg, f["prices"]), tests=planned_tests(plan) if plan else None)
    if facts is not None:
        facts = replace(facts, matured=_matured(m.nightly_ic, facts.analysed))
        m.notes.extend(left_out_notes(facts))
    primary = (planned_tests(plan)[plan.primary.horizon] if plan else
               DeltaTest(q.primary_horizon, margin=q.margin, alpha=q.alpha))
    if plan is not None and plan.interchange is not None and q.candidate:
        # the plan's limit, not the default: the interchangeability verdict is preregistered
        from dualpath.evals.interchange import interchange
        from dualpath.evals.scores import usable_units
        usable = usable_units(sel["units"])
        m.interchange = interchange(usable, q.baseline, q.candidate, plan.interchange.limit,
                                    plan.interchange.alpha)
        m.interchange_planned = True
        from dualpath.evals.icr_plan import study_nights
        m.interchange_nights = study_nights(usable, m.interchange,
                                            plan.design.power if plan.design else 0.8)
        closed = facts is not None and not facts.pending
        m.interchange_sequential = sequential_interchange(usable, q, plan, closed)
    v = primary_verdict(m.comparison, primary, facts, q.baseline, q.candidate)
    m.notes.insert(0, f"primary: {v.summary()}")
    m.verdict = v
    return Study(m, v, facts, frozen, sorted(keep))


def sequential_interchange(usable: pd.DataFrame, q, plan: Plan, closed: bool = False
                          ) -> dict | None:
    """The plan's group-sequential interchangeability verdict: the test at each planned look
    the analysed nights have reached (on its first nights), against its boundary. A window
    that has `closed` with fewer nights than its last planned look (a night missing, left
    out) has its final look at the nights collected (`evals.sequential.closing_looks`)."""
    from dualpath.evals.interchange import interchange
    from dualpath.evals.sequential import bounds, closing_looks, per_look, sequential_verdict

    t = plan.interchange
    if not t.looks or not len(usable):
        return None
    nights = sorted(pd.to_datetime(usable["night"]).dt.date.unique())
    short = closed and len(nights) < t.looks[-1]
    looks = closing_looks(list(t.looks), len(nights)) if short else list(t.looks)
    zs, dfs = [], []
    for look in [n for n in looks if n <= len(nights)]:
        part = usable[pd.to_datetime(usable["night"]).dt.date.isin(nights[:look])]
        x = interchange(part, q.baseline, q.candidate, t.limit, t.alpha)
        # no z where the test gives no interval (too few tickers, one draw on main)
        zs.append(x.z_null if math.isfinite(x.g_low) else math.nan)
        dfs.append(max(x.tickers - 1, 1))       # g / se is t on K - 1 df at each look
    verdict, k = sequential_verdict(zs, looks, plan.window.nights, t.alpha, dfs or None)
    b = bounds(looks, plan.window.nights, t.alpha, per_look(dfs or None, len(looks)))
    at = k if k is not None else len(zs) - 1
    return {"verdict": verdict, "look": k, "looks": looks, "reached": len(zs),
            "night": looks[k] if k is not None else None,
            "z": zs[at] if zs else math.nan, "bound": b[at] if zs else math.nan,
            "total": plan.window.nights, "planned": list(t.looks) if short else None}


def left_out_notes(f: WindowFacts) -> list[str]:
    """What the plan's analysis left out, in words (never pooled), and the history of the
    nights it counts (scored late, resumed)."""
    out = [f"night {n} was scored late: {why}" for n, why in f.late.items()]
    if f.resumed:
        out.append(f"{len(f.resumed)} night(s) counted with a run resumed after an "
                   f"interruption: {', '.join(map(str, f.resumed))}")
    if f.extra:
        out.append(f"{len(f.extra)} night(s) outside the plan's window ({f.extra[0]} …) were "
                   "left out of every metric")
    gaps = missing_nights(f)
    if gaps:
        out.append(f"{len(gaps)} window night(s) not complete and conforming were left out "
                   "of every metric: " + ", ".join(f"{n} ({w})" for n, w in gaps.items()))
    return out


def pilot(cfg: Config, min_nights: int = 5) -> Pilot | None:
    """What the nights already in the warehouse say (complete runs; each horizon used once
    it has `min_nights` matured nights): the sd of nightly ΔIC, main's IC and its sd, and
    main's draw-to-draw agreement with the interchangeability term's variance; or None."""
    from dualpath.flows import metrics as fm

    path = cfg.resolve(cfg.warehouse.path)
    if not path.exists():
        return None
    try:
        frames = fm.load_frames(cfg)
    except UserError:
        return None
    q = fm.question(cfg)
    if q.candidate is None:
        return None
    m = fm.compute(cfg, q, frames["units"], frames["calls"], frames["runs"], frames["prices"],
                   fm.sessions_for(cfg, frames["prices"]))
    d = m.nightly_delta.dropna(subset=["delta"]) if len(m.nightly_delta) else m.nightly_delta
    sd, counts, main_ic = {}, [], {}
    for h, g in (d.groupby("horizon") if len(d) else []):
        if len(g) >= min_nights and g["delta"].std(ddof=1) > 0:
            sd[int(h)] = float(g["delta"].std(ddof=1))
            counts.append(f"h={int(h)}: {len(g)}")
            main_ic[int(h)] = (float(g["ic_baseline"].mean()),
                               float(g["ic_baseline"].std(ddof=1)), len(g))
    x = m.interchange
    rho, var = math.nan, math.nan
    if x is not None and math.isfinite(x.se_g) and x.ticker_nights:
        rho, var = x.rho_rr, x.se_g ** 2 * x.ticker_nights
    if not sd and not math.isfinite(var):
        return None
    from dualpath.evals.scores import usable_units

    units = usable_units(frames["units"])
    units = units[units["path"].isin([q.baseline, q.candidate])]
    nights = pd.to_datetime(d["night"]) if len(d) else pd.Series(dtype="datetime64[ns]")
    source = (f"pilot: sd of nightly ΔIC over the warehouse's nights "
              f"{nights.min():%Y-%m-%d} – {nights.max():%Y-%m-%d} ({', '.join(counts)} "
              "matured nights)") if sd else ""
    return Pilot(sd, source, main_ic, rho, var, units if len(units) else None, q.baseline)


def pilot_sd(cfg: Config, min_nights: int = 5) -> tuple[dict[int, float], str] | None:
    """The sd of one night's ΔIC per horizon from the nights already in the warehouse (a
    pilot: complete runs, matured horizons, at least `min_nights` each), or None."""
    p = pilot(cfg, min_nights)
    return (p.sd, p.source) if p is not None and p.sd else None


@dataclass(frozen=True)
class PlanStatus:
    """What `prereg status` shows: the frozen plan, the deviation log, and the study as a
    report would analyse it today (None before the first night)."""

    frozen: plans.FrozenPlan | None
    deviations: list[dict]
    study: Study | None = None


def plan_status(cfg: Config) -> PlanStatus:
    """The frozen plan (if any), its deviation log, and today's study of its window."""
    frozen, log = frozen_plan(cfg)
    st = None
    if frozen is not None:
        try:
            st = study(cfg)
        except UserError:           # no nights yet
            st = None
    return PlanStatus(frozen, log.to_dict("records"), st)


def frozen_plan(cfg: Config) -> tuple[plans.FrozenPlan | None, pd.DataFrame]:
    """The frozen plan and the deviation log, without any nights."""
    path = cfg.resolve(cfg.warehouse.path)
    if not path.exists():
        return None, pd.DataFrame(columns=["night", "kind", "detail", "recorded_at"])
    with reader(path) as con:
        return (plans.current(con, cfg.experiment.name),
                plans.deviation_log(con, cfg.experiment.name))
