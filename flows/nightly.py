"""The nightly Prefect flow: every path scored concurrently, journaled, ingested, summarised.

Thin on purpose: the work is in `flows.runner` (plain functions) and the core. Each path
connects, checks and scores on its own, so one path that cannot run is recorded as failed
and the others still run. The flow ends `Failed` (after ingest and the artifact) when any
run is not complete, and its runs are named after the experiment and night.
Rerunning a night resumes it: measured units are skipped, failed ones scored again.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run
from prefect.states import Completed, Failed

from dualpath.config import Config, load_config
from dualpath.launcher import prepare_launches
from dualpath.preflight import preflight
from dualpath.scheduler import Progress
from dualpath.flows import inputs, remote, runner
from dualpath.flows.complete import complete_night
from dualpath.flows.connect import refuse_busy_servers
from dualpath.flows.frozen import freeze_night
from dualpath.flows.progress import LoggedProgress
from dualpath.flows.prereg import hold_night_to_plan
from dualpath.flows.report import night_summary, summary_markdown
from dualpath.warehouse.db import writer
from dualpath.warehouse.ingest import IngestStats, ingest_journals


@task(cache_policy=NO_CACHE, timeout_seconds=24 * 3600, task_run_name="score-{work.path}")
async def score_path(cfg: Config, night: date, work: runner.PathWork, history,
                     missing: dict[str, str], override_url: str | None,
                     progress: Progress | None, deadline_mono: float | None = None,
                     max_draw: int | None = None) -> runner.PathOutcome:
    return await runner.run_path(cfg, night, work, history, missing,
                                 override_url=override_url, progress=progress,
                                 deadline_mono=deadline_mono, max_draw=max_draw)


@task(cache_policy=NO_CACHE, timeout_seconds=24 * 3600, task_run_name="score-{work.path}@pool")
async def score_share(cfg: Config, night: date, work: runner.PathWork, history,
                      missing: dict[str, str], deadline_mono: float | None = None,
                      max_draw: int | None = None) -> runner.PathOutcome:
    """The path's share scored by a worker of its work pool, on the path's host."""
    return await remote.run_share_on_pool(cfg, night, work, history, missing, deadline_mono,
                                    max_draw)


def night_window(cfg: Config, works: list, log) -> dict[str, tuple[float, int | None]]:
    """Per path: (monotonic deadline, highest draw to start) when the config sets a deadline.
    Says at the start when a path's measured speed cannot fit its units before it."""
    import time
    from datetime import datetime, timezone

    from dualpath.flows.planning import estimates, seconds_until

    if not cfg.schedule.deadline:
        return {}
    available = seconds_until(cfg.schedule.deadline, cfg.market.timezone,
                              datetime.now(timezone.utc))
    est = {e.path: e for e in estimates(cfg)}
    out = {}
    for w in works:
        e, max_draw = est.get(w.path), None
        need = e.s_per_unit * len(w.units) if e else float("nan")
        if need == need and need > available:
            log.warning("path %s: %d unit(s) need ~%.1f h (%s) but the deadline %s is %.1f h "
                        "away: tonight will be partial", w.path, len(w.units), need / 3600,
                        e.source, cfg.schedule.deadline, available / 3600)
            if cfg.schedule.over_deadline == "fewer-draws":
                draws = sorted({u.draw for u in w.units})
                fit = e.draws_that_fit(available, w.tickers_planned)
                max_draw = draws[fit - 1] if fit else 0
        out[w.path] = (time.monotonic() + available, max_draw)
    return out


@task(cache_policy=NO_CACHE, retries=3, retry_delay_seconds=2)
def ingest(cfg: Config, journals: list[Path]) -> list[IngestStats]:
    """Ingest the night's journals in one short write transaction."""
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        return ingest_journals(con, [j for j in journals if j.exists()])


async def _ingest_while_running(cfg: Config, works: list, stop: asyncio.Event,
                                first_s: float = 3.0, every_s: float = 60.0, *,
                                refresh: Callable[[], None] | None = None) -> None:
    """Ingest the journals as they grow, so `dualpath runs` shows tonight as `running` and
    `dualpath sql` sees calls mid-night; `refresh` first fetches the journals shipped from
    other hosts. A failed look is logged; the final ingest decides."""
    log = get_run_logger()
    wait = first_s
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), wait)
            return
        except asyncio.TimeoutError:
            pass
        wait = every_s
        try:
            if refresh is not None:
                await asyncio.to_thread(refresh)
            journals = [w.journal for w in works if w.journal.exists()]
            if not journals:
                continue
            await asyncio.to_thread(_ingest_running, cfg, journals)
        except Exception as e:   # the warehouse busy, a torn write: the next look retries
            log.warning("mid-night ingest skipped: %s: %s", type(e).__name__, e)


def ingest_night(cfg: Config, night: date) -> list[IngestStats]:
    """Ingest the night's journals as they are (after an interrupt: their segments ended)."""
    journals = [runner.journal_path(cfg, night, p) for p in cfg.paths]
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        return ingest_journals(con, [j for j in journals if j.exists()])


def _ingest_running(cfg: Config, journals: list[Path]) -> None:
    with writer(cfg.resolve(cfg.warehouse.path), wait_s=10.0) as con:
        ingest_journals(con, journals, running=True)


async def _fetch_shipped(cfg: Config, night: date, paths: list[str] | None) -> list[str]:
    """The paths scored on their own hosts (work_pool), ready to send: the store, pools and
    deployments checked, and what they shipped so far fetched here to plan the night."""
    shipped = remote.pooled(cfg, paths)
    if shipped:
        await remote.prepare_pools(cfg, shipped)
        for name in shipped:
            await asyncio.to_thread(remote.sync_journal, cfg, night, name)
    return shipped


def night_of(night: date | str | None) -> date | None:
    if night is None or isinstance(night, date):
        return night
    return date.fromisoformat(str(night))


# The config a caller in this process already loaded (the CLI), handed to the flow it runs:
# not a flow parameter, which Prefect stores with the run (a launch's env may hold a secret).
_LOADED: ContextVar[tuple[str, Config] | None] = ContextVar("dualpath_config", default=None)


def config_of(config_path: str | Path) -> Config:
    """The night's config: the one handed over for this path, else read from the file."""
    loaded = _LOADED.get()
    if loaded is not None and loaded[0] == str(config_path):
        return loaded[1]
    return load_config(config_path)


def _run_name() -> str:
    params = flow_run.parameters
    try:
        experiment = config_of(params["config_path"]).experiment.name
    except Exception:   # a broken config fails the run itself, with its own message
        experiment = "dualpath"
    night = night_of(params.get("night"))
    return f"{experiment}/{night.isoformat() if night else 'scheduled'}"


@flow(name="dualpath-nightly", flow_run_name=_run_name, log_prints=False)
async def nightly(config_path: str = "dualpath.toml", night: date | None = None):
    """Score one night on every path, ingest, publish a summary artifact (the deployment's
    entry point: what a user sets is the config and, optionally, the night). Without a
    night, a run on a day that is no session (a holiday) ends cleanly with 'no session'."""
    if night is None:
        night, why = inputs.scheduled_night(config_of(config_path), datetime.now(timezone.utc))
        if night is None:
            get_run_logger().info(why)
            return Completed(message=why, data={"night": None, "runs": [], "no_session": why})
    return await score_night(config_path, night)


@flow(name="dualpath-nightly", flow_run_name=_run_name, log_prints=False)
async def nightly_local(config_path: str, night: date | None = None,
                        endpoints: dict[str, str] | None = None,
                        paths: list[str] | None = None, progress: Progress | None = None):
    """The same night run from this process (CLI, demo, tests), with what only a caller
    here can give: `endpoints` overriding base URLs (e.g. simulated servers it started),
    a subset of `paths`, and `progress(path, units done, units total, calls)`."""
    return await score_night(config_path, night, endpoints, paths, progress)


async def score_night(config_path: str, night: date | None = None,
                      endpoints: dict[str, str] | None = None, paths: list[str] | None = None,
                      progress: Progress | None = None):
    """The body of both flows: plan, score every path concurrently, ingest, summarise; a
    `Failed` state (after ingest and the artifact) when any run is not complete."""
    cfg = config_of(config_path)
    preflight(cfg)
    calendar, tickers = inputs.calendar_of(cfg), cfg.tickers()   # built once, passed down
    night = night_of(night) or calendar.default_night(datetime.now(timezone.utc))
    calendar.require_session(night)
    # one writer per night: refused here, naming the holder, before anything is written
    with runner.hold_night(cfg, night):
        if (done := _nothing_to_score(cfg, night, paths)) is not None:
            return done
        refuse_busy_servers(cfg, endpoints, paths)
        runner.claim_night(cfg, night, config_path)
        return await _score_held_night(cfg, night, calendar, tickers, endpoints, paths,
                                       progress)


def _nothing_to_score(cfg: Config, night: date, paths: list[str] | None) -> dict | None:
    """The result of a night already complete on every path (`flows.complete`), as stored:
    no server started, nothing written; None when there is something to score."""
    done = complete_night(cfg, night, paths)
    if done is None:
        return None
    get_run_logger().info("night %s is already complete on every path (%s): nothing to score",
                          night, ", ".join(done))
    ids = [runner.run_id_for(cfg.experiment.name, night, p) for p in done]
    return {"night": night.isoformat(), "runs": night_summary(cfg, ids), "missing_inputs": {},
            "outcomes": {p: {"status": "nothing_to_do", "reason": None} for p in done}}


async def _score_held_night(cfg: Config, night: date, calendar, tickers: list[str],
                            endpoints: dict[str, str] | None, paths: list[str] | None,
                            progress: Progress | None):
    log = get_run_logger()
    off_plan = hold_night_to_plan(cfg, night)
    if off_plan:
        log.warning("tonight deviates from the frozen plan (logged; left out of the "
                    "confirmatory result): %s", "; ".join(off_plan))
    history, gated = inputs.prepare_night(cfg, night, calendar, tickers, log)
    missing = {**gated, **inputs.missing_inputs(cfg, history, night, tickers)}
    if missing:
        log.warning(inputs.describe_missing(missing, night))
    # kept content-addressed so a candidate path can later be handed exactly these inputs
    freeze_night(cfg, night, history, tickers, missing)
    shipped = await _fetch_shipped(cfg, night, paths)
    works = runner.plan_night(cfg, night, paths, tickers)
    # model files assembled once, before any path launches (two at once raced)
    await asyncio.to_thread(prepare_launches, cfg, [w.path for w in works])
    progress = LoggedProgress(log, every_s=30.0, forward=progress,
                              totals={w.path: w.units_planned for w in works if w.units})
    ticking = asyncio.create_task(progress.run())
    window = night_window(cfg, works, log)
    # one path's crash must not stop the other, nor the ingest of what both recorded
    stop = asyncio.Event()
    live = asyncio.create_task(_ingest_while_running(
        cfg, [w for w in works if w.units], stop,
        refresh=lambda: [remote.sync_journal(cfg, night, name) for name in shipped]))
    try:
        done = await asyncio.gather(*(
            score_share(cfg, night, w, history, missing, *window.get(w.path, (None, None)))
            if w.path in shipped else
            score_path(cfg, night, w, history, missing, (endpoints or {}).get(w.path), progress,
                       *window.get(w.path, (None, None)))
            for w in works), return_exceptions=True)
    finally:
        ticking.cancel()
        stop.set()
        await live
    outcomes = [d if isinstance(d, runner.PathOutcome) else
                runner.PathOutcome(w.path, w.run_id, "failed", f"{type(d).__name__}: {d}")
                for w, d in zip(works, done)]
    for o in outcomes:
        if o.status in ("failed", "partial"):
            log.error("path %s: %s: %s", o.path, o.status, o.reason)
    stats = ingest(cfg, [w.journal for w in works])
    summary = night_summary(cfg, [s.run_id for s in stats])
    summary += unrecorded_runs(works, outcomes, summary)
    await create_markdown_artifact(
        key=f"night-{cfg.experiment.name}".lower().replace("_", "-").replace(".", "-"),
        markdown=summary_markdown(night, summary), description=f"dualpath night {night}")
    result = {"night": night.isoformat(), "runs": summary,
              "missing_inputs": missing,
              "outcomes": {o.path: {"status": o.status, "reason": o.reason} for o in outcomes}}
    bad = [r for r in summary if r["status"] != "complete"]
    if bad:
        why = "; ".join(f"{r['path']} {r['status']}: {r['status_detail']}" for r in bad)
        return Failed(message=f"not complete: {why}", data=result)
    return result


def unrecorded_runs(works, outcomes, summary: list[dict]) -> list[dict]:
    """A row for each path that recorded nothing the warehouse could hold (its journal could
    not be written: a full disk, a folder that takes no file), so that the night still reads
    not complete, names the path and why, and the flow ends Failed. With no rows a night
    where every path failed read Completed, and the CLI's table of no runs crashed."""
    seen = {r["run_id"] for r in summary}
    return [{"path": w.path, "run_id": w.run_id, "status": "failed",
             "status_detail": o.reason or "nothing was recorded",
             "units_planned": w.units_planned, "graded": 0, "parse_failed": 0,
             "failed": w.units_planned, "calls": 0, "runaway": 0, "retries": 0,
             "contaminated": 0, "throughput_s": None, "slot_latency_s": None}
            for w, o in zip(works, outcomes) if w.run_id not in seen and w.units]


def run_nightly(config_path: Path, night: date | None = None,
                endpoints: dict[str, str] | None = None,
                progress: Progress | None = None, cfg: Config | None = None) -> tuple[bool, dict]:
    """Run the flow from synchronous code (the CLI): (every run complete?, the result).
    ``cfg``: the config already loaded from ``config_path`` (else it is read here), the one
    the whole night uses. An exception that ended the flow (a config or data mistake) is
    raised here."""
    from dualpath.flows.connect import keep_prefect_off_paths
    cfg = cfg or load_config(config_path)
    keep_prefect_off_paths(cfg)
    handed = _LOADED.set((str(config_path), cfg))

    async def go():
        state = await nightly_local(str(config_path), night, endpoints, progress=progress,
                                    return_state=True)
        data = await state.result(raise_on_failure=False)
        if isinstance(data, BaseException):
            raise data
        return state.is_completed(), data
    try:
        return run_cancellable(go)
    finally:
        _LOADED.reset(handed)


def run_cancellable(main: Callable[[], Any]) -> Any:
    """asyncio.run(main()) where Ctrl-C and SIGTERM both cancel it, then raise
    KeyboardInterrupt once it has unwound (journals closed, the flow run's state sent).

    The loop runs in a thread, in this context (Prefect's settings live in context
    variables): Prefect's flow engine turns SIGTERM into a `TerminationSignal` raised
    wherever the main thread happens to be, which once landed inside a scheduler callback
    (a task's "exception never retrieved" traceback, and the night went on). In a thread it
    installs no handler, and the signals reach only this one, which cancels the main task
    as asyncio itself does for Ctrl-C. A second signal gives up waiting."""
    import contextvars
    import signal
    import threading

    box: dict[str, Any] = {}
    started = threading.Event()

    async def wrapped():
        box["task"] = asyncio.current_task()
        started.set()
        return await main()

    def target():
        try:
            with asyncio.Runner() as r:
                box["loop"] = r.get_loop()
                box["result"] = r.run(wrapped())
        except BaseException as e:       # re-raised in the caller's thread
            box["error"] = e
        finally:
            started.set()

    def cancel(signum, frame):
        if box.get("signal") is not None:
            raise KeyboardInterrupt
        box["signal"] = signum
        if "task" in box:
            box["loop"].call_soon_threadsafe(box["task"].cancel)

    thread = threading.Thread(target=contextvars.copy_context().run, args=(target,),
                              name="nightly-flow", daemon=True)
    main_thread = threading.current_thread() is threading.main_thread()
    before = {sig: signal.signal(sig, cancel) for sig in (signal.SIGINT, signal.SIGTERM)
              } if main_thread else {}
    try:
        thread.start()
        started.wait()
        if box.get("signal") is not None and "task" in box:
            box["loop"].call_soon_threadsafe(box["task"].cancel)
        while thread.is_alive():
            thread.join(0.2)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if box.get("signal") is not None:
        raise KeyboardInterrupt
    if "error" in box:
        raise box["error"]
    return box["result"]
