"""The nightly run as plain functions (no Prefect here): plan, score into journals, ingest.

`flows.nightly` wraps these in Prefect tasks; tests call them directly.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Callable

import httpx

from dualpath.config import Config
from dualpath.errors import IdentityError, UserError
from dualpath.identity import differences, read_identity
from dualpath.night import NightPlan, PriceHistory, run_id_for, score_night, units_for
from dualpath.scheduler import PathRun, Progress, Unit
from warehouse.db import reader, writer
from warehouse.ingest import IngestStats, ingest_journal
from warehouse.journal import JournalWriter, read_journal  # noqa: F401 (re-exported)
from warehouse.prices import load_prices

_progress: Progress | None = None


def set_progress(fn: Progress | None) -> None:
    """Where scoring progress goes (the CLI's progress bars); None = nowhere."""
    global _progress
    _progress = fn


@dataclass
class PathRunPlan:
    """One path's share of tonight: what is left to score and where its journal is."""

    path: str
    run_id: str
    journal: Path
    units: list[Unit]
    attempts: dict[Unit, int]
    segment: int
    units_planned: int
    base_url: str = ""
    how: str = "attached"
    identity: dict = field(default_factory=dict)


def journal_path(cfg: Config, night: date, path: str) -> Path:
    runs_dir = cfg.resolve(cfg.warehouse.runs_dir)
    return runs_dir / cfg.experiment.name / night.isoformat() / path / "journal.jsonl"


def plan_night(cfg: Config, night: date, paths: list[str] | None = None) -> list[PathRunPlan]:
    """Per path: the units not yet finished tonight (a rerun resumes; nothing is redone)."""
    plans = []
    all_units = units_for(cfg)
    for name in paths or list(cfg.paths):
        if name not in cfg.paths:
            raise UserError(f"no path named '{name}' in the config; paths: {list(cfg.paths)}")
        jp = journal_path(cfg, night, name)
        jc = read_journal(jp)
        if jc.begins and jc.begins[-1]["config_hash"] != cfg.fingerprint():
            raise UserError(
                f"night {night} on path '{name}' was started with a different config "
                f"(hash {jc.begins[-1]['config_hash']}, now {cfg.fingerprint()}); results of "
                f"two configs must not mix in one run. Score another night, use another "
                f"experiment name, or move {jp.parent} aside.")
        done = jc.finished_units()
        attempts = {Unit(t, d): n for (t, d), n in jc.attempts().items()}
        plans.append(PathRunPlan(
            path=name, run_id=run_id_for(cfg.experiment.name, night, name), journal=jp,
            units=[u for u in all_units if (u.ticker, u.draw) not in done], attempts=attempts,
            segment=len(jc.begins) + 1, units_planned=len(all_units)))
    return plans


async def check_identities(cfg: Config, plans: list[PathRunPlan]) -> dict[str, list[str]]:
    """Read each server's identity; returns the differences per path (empty list = ok)."""
    out = {}
    async with httpx.AsyncClient() as http:
        for plan in plans:
            sp = cfg.paths[plan.path]
            seen = await read_identity(http, plan.base_url, sp.engine)
            plan.identity = {"model": seen.model, "model_path": seen.model_path,
                             "slots": seen.slots, "n_ctx_per_slot": seen.n_ctx_per_slot,
                             "build": seen.build, "speculative": seen.speculative,
                             "sampling": seen.sampling, "raw": seen.raw}
            out[plan.path] = differences(seen, sp.expect)
    return out


async def score_plans(cfg: Config, night: date, history: PriceHistory,
                      plans: list[PathRunPlan]) -> dict[str, PathRun]:
    """Score every plan into its journal; a failure or cancel still closes each journal."""
    writers = {p.path: JournalWriter(p.journal) for p in plans}
    began = time.time()
    for p in plans:
        sp = cfg.paths[p.path]
        w = writers[p.path]
        w.write_event("begin", run_id=p.run_id, experiment=cfg.experiment.name,
                      night=night.isoformat(), path=p.path, engine=sp.engine,
                      config_hash=cfg.fingerprint(), units_planned=p.units_planned,
                      units_remaining=len(p.units), slots=sp.slots,
                      time_scale=sp.sim.time_scale if sp.engine == "sim" else 1.0,
                      segment=p.segment, started_wall=began)
        ident = p.identity
        w.write_event("session", session_id=f"{p.run_id}#{p.segment}", run_id=p.run_id,
                      segment=p.segment, path=p.path, engine=sp.engine, base_url=p.base_url,
                      how=p.how, model=ident.get("model"), model_path=ident.get("model_path"),
                      slots=ident.get("slots"), n_ctx_per_slot=ident.get("n_ctx_per_slot"),
                      build=ident.get("build"), speculative=ident.get("speculative"),
                      sampling_json=_dumps(ident.get("sampling")),
                      raw_json=_dumps(ident.get("raw")), started_wall=began)
    night_plans = [NightPlan(p.path, p.base_url, p.units, writers[p.path].write, p.attempts,
                             on_client=_pin(p)) for p in plans]
    runs: dict[str, PathRun] = {}
    status, detail = "partial", "interrupted"
    try:
        runs = await score_night(cfg, night, history, night_plans, progress=_progress)
        status, detail = "complete", None
    except (Exception, asyncio.CancelledError) as e:
        detail = f"{type(e).__name__}: {e}"
        raise
    finally:
        for p in plans:
            run = runs.get(p.path)
            done = run.units_done if run else 0
            finished_all = run is not None and run.complete and not run.stopped_early
            # Each path's own scoring window: paths finish at different times.
            writers[p.path].write_event(
                "end", run_id=p.run_id, segment=p.segment,
                started_wall=run.start_wall if run else began,
                ended_wall=run.end_wall if run else time.time(),
                status="complete" if finished_all else "partial",
                detail=None if finished_all else detail, units_done=done,
                calls=run.calls if run else None)
            writers[p.path].close()
    return runs


def _pin(plan: PathRunPlan) -> Callable:
    """Tell the client which build answered the identity check: another one is contamination."""
    def pin(client) -> None:
        if plan.identity.get("build"):
            client.expected_fingerprint = plan.identity["build"]
    return pin


def _dumps(obj) -> str | None:
    import orjson
    return None if obj is None else orjson.dumps(obj, default=str).decode()


def ingest_plans(cfg: Config, plans: list[PathRunPlan]) -> list[IngestStats]:
    """Ingest each plan's journal in one short write transaction per run."""
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        return [ingest_journal(con, p.journal) for p in plans if p.journal.exists()]


def record_failure(cfg: Config, night: date, plan: PathRunPlan, detail: str) -> None:
    """A path that could not run at all gets a failed run, with the reason."""
    w = JournalWriter(plan.journal)
    sp = cfg.paths[plan.path]
    now = time.time()
    w.write_event("begin", run_id=plan.run_id, experiment=cfg.experiment.name,
                  night=night.isoformat(), path=plan.path, engine=sp.engine,
                  config_hash=cfg.fingerprint(), units_planned=plan.units_planned,
                  units_remaining=len(plan.units), slots=sp.slots,
                  time_scale=sp.sim.time_scale if sp.engine == "sim" else 1.0,
                  segment=plan.segment, started_wall=now)
    w.write_event("end", run_id=plan.run_id, segment=plan.segment, ended_wall=now,
                  status="failed", detail=detail, units_done=0, calls=0)
    w.close()


def price_history(cfg: Config) -> PriceHistory:
    """Prices from the warehouse for the prompts (only days up to each night are used)."""
    path = cfg.resolve(cfg.warehouse.path)
    if not path.exists():
        raise UserError(f"no warehouse at {path}; import prices first with "
                        "`dualpath prices import FILE`")
    with reader(path) as con:
        prices = load_prices(con)
    if prices.empty:
        raise UserError("the warehouse has no prices; import them with `dualpath prices import FILE`")
    return PriceHistory(prices)
