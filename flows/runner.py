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
from dualpath.errors import UserError
from dualpath.identity import (ServerUnreachable, busy_slots, differences,
                               effective_sampling, read_identity, read_metrics)
from dualpath.night import NightPlan, PriceHistory, run_id_for, score_night, units_for
from dualpath.scheduler import PathRun, Progress, Unit
from warehouse.db import reader, writer
from warehouse.ingest import IngestStats, ingest_journals
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
    launch: dict = field(default_factory=dict)   # command, env, log path, start/stop times
    gpu_state: str | None = None


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
            try:
                seen = await read_identity(http, plan.base_url, sp.engine)
            except ServerUnreachable as e:
                out[plan.path] = [f"server unreachable: {e}; is it running on {plan.base_url}?"]
                continue
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
        _write_begin(w, cfg, night, p, began)
        ident = p.identity
        w.write_event("session", session_id=f"{p.run_id}#{p.segment}", run_id=p.run_id,
                      segment=p.segment, path=p.path, engine=sp.engine, base_url=p.base_url,
                      how=p.how, model=ident.get("model"), model_path=ident.get("model_path"),
                      slots=ident.get("slots"), n_ctx_per_slot=ident.get("n_ctx_per_slot"),
                      build=ident.get("build"), speculative=ident.get("speculative"),
                      sampling_json=_dumps(ident.get("sampling")),
                      raw_json=_dumps(ident.get("raw")), started_wall=began,
                      command=" ".join(p.launch.get("argv", [])) or None,
                      env_json=_dumps(p.launch.get("env")), log_path=p.launch.get("log_path"),
                      gpu_state=p.gpu_state)
    clients: dict[str, object] = {}
    night_plans = [NightPlan(p.path, p.base_url, p.units, writers[p.path].write, p.attempts,
                             on_client=_pin(p, clients)) for p in plans]
    runs: dict[str, PathRun] = {}
    detail: str | None = "interrupted"
    async with httpx.AsyncClient() as http:
        before = {p.path: await read_metrics(http, p.base_url) for p in plans}
        stop = asyncio.Event()
        watchers = {p.path: asyncio.create_task(
            _watch_load(http, p.base_url, clients, p.path, stop, cfg.paths[p.path].load_poll_s))
            for p in plans}
        try:
            runs = await score_night(cfg, night, history, night_plans, progress=_progress)
            detail = None
        except (Exception, asyncio.CancelledError) as e:
            detail = f"{type(e).__name__}: {e}"
            raise
        finally:
            stop.set()
            for p in plans:
                load = await watchers[p.path]
                writers[p.path].write_event(
                    "session", session_id=f"{p.run_id}#{p.segment}",
                    metrics_before_json=_dumps(before[p.path]),
                    metrics_after_json=_dumps(await read_metrics(http, p.base_url)),
                    effective_sampling_json=_dumps(await effective_sampling(http, p.base_url)),
                    stopped_wall=time.time(), **load)
            _write_ends(plans, writers, runs, began, detail)
    return runs


async def _watch_load(http: httpx.AsyncClient, base_url: str, clients: dict, path: str,
                      stop: asyncio.Event, every: float) -> dict:
    """Poll /slots: more busy slots than dualpath has in flight means someone else is here."""
    polls = excess_polls = max_excess = previous = 0
    while not stop.is_set():
        busy = await busy_slots(http, base_url)
        client = clients.get(path)
        if busy is not None and client is not None:
            polls += 1
            excess = max(busy - client.in_flight, 0)
            # A slot is released a moment after its response reaches us: only excess seen
            # on two polls in a row counts as someone else's load.
            if excess and previous:
                excess_polls += 1
                max_excess = max(max_excess, min(excess, previous))
            previous = excess
        try:
            await asyncio.wait_for(stop.wait(), every)
        except asyncio.TimeoutError:
            pass
    return {"load_polls": polls, "external_load_polls": excess_polls,
            "external_load_max": max_excess}


def _write_ends(plans: list[PathRunPlan], writers: dict, runs: dict, began: float,
                detail: str | None) -> None:
    """Close each journal with its path's own scoring window (paths finish at different times)."""
    for p in plans:
        run = runs.get(p.path)
        finished_all = run is not None and run.complete and not run.stopped_early
        writers[p.path].write_event(
            "end", run_id=p.run_id, segment=p.segment,
            started_wall=run.start_wall if run else began,
            ended_wall=run.end_wall if run else time.time(),
            status="complete" if finished_all else "partial",
            detail=None if finished_all else detail, units_done=run.units_done if run else 0,
            calls=run.calls if run else None)
        writers[p.path].close()


def _pin(plan: PathRunPlan, clients: dict) -> Callable:
    """Tell the client which server answered the identity check: any other is contamination."""
    def pin(client) -> None:
        clients[plan.path] = client
        if plan.identity.get("build"):
            client.expected_fingerprint = plan.identity["build"]
        if plan.identity.get("model"):
            client.expected_model = plan.identity["model"]
    return pin


def _dumps(obj) -> str | None:
    import orjson
    return None if obj is None else orjson.dumps(obj, default=str).decode()


def ingest_plans(cfg: Config, plans: list[PathRunPlan]) -> list[IngestStats]:
    """Ingest each plan's journal in one short write transaction per run."""
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        return ingest_journals(con, [p.journal for p in plans if p.journal.exists()])


def _write_begin(w: JournalWriter, cfg: Config, night: date, plan: PathRunPlan,
                 started_wall: float) -> None:
    """The run's identity and plan: what the warehouse keys the run by."""
    sp = cfg.paths[plan.path]
    w.write_event("begin", run_id=plan.run_id, experiment=cfg.experiment.name,
                  night=night.isoformat(), path=plan.path, engine=sp.engine,
                  config_hash=cfg.fingerprint(), units_planned=plan.units_planned,
                  units_remaining=len(plan.units), slots=sp.slots,
                  time_scale=sp.sim.time_scale if sp.engine == "sim" else 1.0,
                  segment=plan.segment, started_wall=started_wall)


def record_failure(cfg: Config, night: date, plan: PathRunPlan, detail: str) -> None:
    """A path that could not run at all gets a failed run, with the reason."""
    w = JournalWriter(plan.journal)
    now = time.time()
    _write_begin(w, cfg, night, plan, now)
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


def ensure_prices(cfg: Config) -> None:
    """Profiles on the synthetic market import its prices once, before the first night."""
    from dualpath.market import SyntheticMarket
    from warehouse.prices import import_prices, validate_prices

    if cfg.market.synthetic_seed is None:
        return
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        if con.execute("SELECT count(*) FROM prices").fetchall()[0][0]:
            return
        raw = SyntheticMarket(cfg.market.synthetic_seed, start=cfg.market.synthetic_start,
                              n_days=400).prices()
        raw = raw[raw["ticker"].isin(cfg.tickers())]
        import_prices(con, validate_prices(raw, cfg.tickers(), "synthetic market")[0])
