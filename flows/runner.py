"""One path's share of a night as plain functions (no Prefect here): plan, connect, check,
score into the path's journal, and say what happened.

State is passed as values: `plan_path` returns a `PathWork` (what is left to score),
`flows.connect.connect` yields an `Endpoint` (where), `check_identity` returns the
`ServerIdentity` that answered, and `run_path` returns a `PathOutcome` (what happened).
`flows.nightly` wraps these in Prefect tasks; tests call them directly.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import ssl
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

import certifi
import httpx
import orjson

from dualpath.config import Config
from dualpath.engines.proof import engine_mismatch
from dualpath.errors import EngineMismatch, HarnessError, IdentityError, PathUnavailable, UserError
from dualpath.identity import auth_headers, differences, read_identity
from dualpath.locks import night_holder, night_lock
from dualpath.night import PriceHistory, api_key, run_id_for, units_for
from dualpath.records import INPUT_FAILED, RunBegin, RunEnd, ServerIdentity, ServerSession
from dualpath.records import UnitResult, UnitStart
from dualpath.scheduler import Progress, Unit
from dualpath.warehouse.journal import JournalWriter, read_journal

if TYPE_CHECKING:
    from dualpath.transport import AiohttpTransport
    from dualpath.flows.connect import Endpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PathWork:
    """What one path has left to score tonight (a rerun leaves out measured units)."""

    path: str
    run_id: str
    journal: Path
    units: tuple[Unit, ...]
    attempts: Mapping[Unit, int]
    segment: int
    units_planned: int
    tickers_planned: int
    worker: str | None = None    # the Prefect worker scoring it on another host (None: here)


@dataclass(frozen=True)
class PathOutcome:
    """What became of one path's segment tonight (the warehouse's run status is the whole
    run's, over every segment)."""

    path: str
    run_id: str
    status: str                  # complete | partial | failed | nothing_to_do
    reason: str | None = None
    units_done: int = 0
    units_measured: int = 0
    calls: int = 0


def journal_path(cfg: Config, night: date, path: str) -> Path:
    runs_dir = cfg.resolve(cfg.warehouse.runs_dir)
    return runs_dir / cfg.experiment.name / night.isoformat() / path / "journal.jsonl"


def night_lock_path(cfg: Config, night: date) -> Path:
    """The night's lock, beside the warehouse: every host that shares the warehouse sees it."""
    wh = cfg.resolve(cfg.warehouse.path)
    return wh.with_name(wh.name + ".locks") / f"{cfg.experiment.name}@{night.isoformat()}.lock"


def hold_night(cfg: Config, night: date):
    """One process scores a night (`dualpath.locks.night_lock`); raises `NightBusy` naming
    the holder (host, pid, since) before any journal or the warehouse is touched."""
    what = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200] or "dualpath"
    return night_lock(night_lock_path(cfg, night), what,
                      f"night {night} of experiment '{cfg.experiment.name}'")


def night_live(cfg: Config, night: date) -> bool:
    """Whether a live process holds the night (a run shown `running` without one was
    interrupted: killed, or its host crashed)."""
    return night_holder(night_lock_path(cfg, night)) is not None


def live_nights(cfg: Config) -> set[tuple[str, str]]:
    """(experiment, night) of every night a live process holds, on any host."""
    folder = night_lock_path(cfg, date(2000, 1, 1)).parent
    return {tuple(f.stem.split("@", 1)) for f in folder.glob("*@*.lock")
            if night_holder(f) is not None}


INTERRUPTED_DETAIL = ("interrupted: no process is scoring it any more (stopped, killed, or "
                      "its host crashed); rerun the night to resume")


def label_interrupted(cfg: Config, runs: Any) -> Any:
    """A run stored as `running` that no live process holds reads `interrupted` (a frame
    with run_id, status and status_detail): kill -9 and a crashed host leave no ingest."""
    if not len(runs) or not (runs["status"] == "running").any():
        return runs
    live = live_nights(cfg)
    key = runs["run_id"].str.rsplit("/", n=1).str[0].str.split("/", n=1)
    dead = (runs["status"] == "running") & ~key.map(lambda k: tuple(k) in live)
    runs = runs.copy()
    runs.loc[dead, "status"] = "interrupted"
    runs.loc[dead, "status_detail"] = INTERRUPTED_DETAIL
    return runs


def claim_night(cfg: Config, night: date, config_path: Path | str | None) -> None:
    """Under the night's lock, the first write: the experiment bound to this runs folder,
    and the night to this config (`warehouse.experiments`)."""
    from dualpath.warehouse.db import writer
    from dualpath.warehouse.experiments import bind, check_night_config

    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        bind(con, cfg.experiment.name, str(cfg.resolve(cfg.warehouse.runs_dir)),
             str(Path(config_path).resolve()) if config_path else "(a config in memory)",
             socket.gethostname())
        check_night_config(con, cfg.experiment.name, night, cfg.fingerprint())


def plan_path(cfg: Config, night: date, name: str,
              tickers: list[str] | None = None) -> PathWork:
    """The units of `name` not yet measured tonight (over `tickers`, the config's unless
    given); refuses to mix two configs in a run."""
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
    done = jc.measured_units()
    tickers = cfg.tickers() if tickers is None else tickers
    all_units = units_for(cfg, name, tickers)
    attempts = {Unit(t, d): n for (t, d), n in jc.attempts().items()}
    return PathWork(
        path=name, run_id=run_id_for(cfg.experiment.name, night, name), journal=jp,
        units=tuple(u for u in all_units if (u.ticker, u.draw) not in done),
        attempts=MappingProxyType(attempts), segment=len(jc.begins) + 1,
        units_planned=len(all_units), tickers_planned=len(tickers))


def plan_night(cfg: Config, night: date, paths: list[str] | None = None,
               tickers: list[str] | None = None) -> list[PathWork]:
    """Every path's work tonight (or only `paths`), over `tickers` read once."""
    tickers = cfg.tickers() if tickers is None else tickers
    return [plan_path(cfg, night, name, tickers) for name in paths or list(cfg.paths)]


async def check_identity(cfg: Config, path: str, http: httpx.AsyncClient,
                         base_url: str) -> ServerIdentity:
    """The server behind the endpoint, if it is the one the path expects; else raises."""
    sp = cfg.paths[path]
    try:
        seen = await read_identity(http, base_url, sp.dialect)
    except PathUnavailable as e:
        raise type(e)(f"server unreachable: {e}; is it running on {base_url}?") from None
    # the engine first: another engine's server reads its pins in the wrong dialect
    if (wrong := await engine_mismatch(http, base_url, sp.dialect)) is not None:
        raise EngineMismatch(path, f"path {path}: {wrong}")
    diffs = differences(seen, sp.expect)
    if diffs:
        raise IdentityError(path, diffs)
    return seen


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for the process: building one per client costs ~10-30 ms of CPU."""
    return ssl.create_default_context(cafile=certifi.where())


def path_http(cfg: Config, path: str, headers: dict[str, str]) -> httpx.AsyncClient:
    """The path's control-plane client: identity, /metrics, the load and identity watchers."""
    return httpx.AsyncClient(headers=headers, timeout=10.0, verify=_tls(),
                             limits=httpx.Limits(max_connections=4, max_keepalive_connections=4))


def chat_transport(cfg: Config, path: str, headers: dict[str, str]) -> AiohttpTransport:
    """The path's chat calls: one aiohttp pool sized to what the path keeps in flight, so
    every call finds a kept-alive connection (`dualpath.transport` says why aiohttp)."""
    from dualpath.transport import AiohttpTransport

    sp = cfg.paths[path]
    pinned = sp.pins_slots(cfg.experiment.prefix_affinity)
    # at most this many calls are in flight (dualpath.slots): pinned, each slot takes its
    # own call and `queue_depth` more of its unit's
    in_flight = sp.slots * (1 + sp.server_queue_depth) if pinned else \
        sp.slots + sp.server_queue_depth
    return AiohttpTransport(in_flight + 1, _tls(), headers)


async def run_path(cfg: Config, night: date, work: PathWork, history: PriceHistory,
                   missing: Mapping[str, str], *, override_url: str | None = None,
                   progress: Progress | None = None, deadline_mono: float | None = None,
                   max_draw: int | None = None) -> PathOutcome:
    """Connect, check and score one path; a path that cannot run is recorded as failed."""
    if not work.units:
        return PathOutcome(work.path, work.run_id, "nothing_to_do")
    # the servers' side (simulators, aiohttp, telemetry) imported by what scores: `dualpath
    # runs` and a night's planning import this module and need none of it
    from dualpath.telemetry.gpu_identity import require_gpu_pins
    from dualpath.flows.connect import connect

    try:
        headers = auth_headers(api_key(cfg, work.path))
        async with connect(cfg, work.path, work.run_id, work.journal.parent,
                           override_url) as ep:
            async with path_http(cfg, work.path, headers) as http:
                ident = await check_identity(cfg, work.path, http, ep.base_url)
                # the GPU is part of the identity: a pin it reads otherwise refuses the path
                await asyncio.to_thread(require_gpu_pins, cfg.paths[work.path], work.path,
                                        ep.base_url, cfg.telemetry.drm_root())
                async with chat_transport(cfg, work.path, headers) as chat:
                    return await score_into_journal(cfg, night, work, ep, ident, history, missing,
                                            http, progress, deadline_mono, max_draw, chat=chat)
    except (PathUnavailable, UserError) as e:
        reason = f"{type(e).__name__}: {e}"
        log.error("path %s was not scored: %s", work.path, reason)
        record_failure(cfg, night, work, reason)
        return PathOutcome(work.path, work.run_id, "failed", reason)
    except HarnessError as e:      # already in the journal's end record, when it could be
        log.error("path %s stopped: dualpath failed while scoring: %s", work.path, e)
        return PathOutcome(work.path, work.run_id, "failed", f"HarnessError: {e}")


def _begin(cfg: Config, night: date, work: PathWork, started_wall: float) -> RunBegin:
    sp = cfg.paths[work.path]
    return RunBegin(run_id=work.run_id, experiment=cfg.experiment.name, night=night.isoformat(),
                    path=work.path, engine=sp.engine, config_hash=cfg.fingerprint(),
                    units_planned=work.units_planned, units_remaining=len(work.units),
                    tickers_planned=work.tickers_planned, slots=sp.slots,
                    time_scale=sp.sim.time_scale if sp.engine == "sim" else 1.0,
                    segment=work.segment, started_wall=started_wall)


def _session(cfg: Config, work: PathWork, ep: Endpoint, ident: ServerIdentity,
             began: float) -> ServerSession:
    sp = cfg.paths[work.path]
    return ServerSession(
        session_id=f"{work.run_id}#{work.segment}", run_id=work.run_id, segment=work.segment,
        path=work.path, engine=sp.engine, dialect=sp.dialect, base_url=ep.base_url, how=ep.how,
        model=ident.model, model_path=ident.model_path, slots=ident.slots,
        n_ctx_per_slot=ident.n_ctx_per_slot, build=ident.build, speculative=ident.speculative,
        sampling_json=_dumps(ident.sampling), raw_json=_dumps(ident.raw), command=ep.command,
        env_json=_dumps(ep.env), log_path=ep.log_path, gpu_state=ep.gpu_state,
        started_wall=began, host=socket.gethostname(), worker=work.worker,
        binary_sha256=ident.binary_sha256, model_sha256=ident.model_sha256)


def _record_input_failures(w: JournalWriter, work: PathWork, units: list[Unit],
                           missing: Mapping[str, str]) -> None:
    """Units whose ticker has no inputs tonight: recorded at once, no call is made."""
    for u in units:
        attempt = work.attempts.get(u, 0) + 1
        now, mono = time.time(), time.monotonic()
        w.write(UnitStart(run_id=work.run_id, path=work.path, ticker=u.ticker, draw=u.draw,
                          unit_attempt=attempt, start_wall=now))
        w.write(UnitResult(run_id=work.run_id, path=work.path, ticker=u.ticker, draw=u.draw,
                           unit_attempt=attempt, start_wall=now, start_mono=mono, end_wall=now,
                           end_mono=mono, n_calls=0, outcome=INPUT_FAILED,
                           failure_detail=missing[u.ticker]))


async def score_into_journal(cfg: Config, night: date, work: PathWork, ep: Endpoint,
                     ident: ServerIdentity, history: PriceHistory, missing: Mapping[str, str],
                     http: httpx.AsyncClient, progress: Progress | None,
                     deadline_mono: float | None = None,
                     max_draw: int | None = None, *, chat: Any = None) -> PathOutcome:
    """Score the path's units into its journal; the journal is closed with an end record
    whatever happens (cancel, a harness error, a failing watcher). Chat calls go through
    `chat` (a `dualpath.transport` transport), else through `http`."""
    from dualpath.night import path_runner
    from dualpath.flows.telemetry import path_telemetry
    from dualpath.flows.watch import watch_server

    began = time.time()
    w = JournalWriter(work.journal)
    runner = None
    blocked: list[Unit] = []
    detail: str | None = "interrupted"
    try:
        w.write(_begin(cfg, night, work, began))
        w.write(_session(cfg, work, ep, ident, began))
        blocked = [u for u in work.units if u.ticker in missing]
        _record_input_failures(w, work, blocked, missing)
        runner = path_runner(cfg, night, work.path, ep.base_url, history, chat or http, w.write,
                             attempts=dict(work.attempts), progress=progress,
                             deadline_mono=deadline_mono)
        sp = cfg.paths[work.path]
        runner.client.pin(ident.model, ident.build, sp.dialect, sp.expect.build)
        todo = [u for u in work.units if u.ticker not in missing
                and (max_draw is None or u.draw <= max_draw)]
        # the GPU is read inside the watcher's window: its first and last reads are not the
        # run's (on a simulated path's compressed clock 0.1 s of them reads as minutes)
        async with watch_server(cfg, work, ep, ident, http, runner.client, w), \
                path_telemetry(cfg, work, ep.base_url, runner.client):
            await runner.run_units(todo)
        # a swap seen only at the end still puts the calls since the last good check in doubt
        detail = runner.client.identity_problem
        if runner.run.stopped_early and deadline_mono is not None:
            left = len(todo) - runner.run.units_done
            detail = "; ".join(x for x in (detail, f"the night's deadline passed with {left} "
                                           "unit(s) not started") if x)
        if max_draw is not None:
            detail = "; ".join(x for x in (detail, f"only draws <= {max_draw} fit before the "
                                           "deadline tonight") if x)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        detail = f"{type(e).__name__}: {e}"
        raise
    finally:
        outcome = _close(w, work, runner, began, detail, len(blocked))
    return outcome


def _close(w: JournalWriter, work: PathWork, runner, began: float, detail: str | None,
           blocked: int) -> PathOutcome:
    """Write the segment's end record from what was really done, and close the journal."""
    run = runner.run if runner is not None else None
    done = (run.units_done if run else 0) + blocked
    measured = run.units_measured if run else 0
    calls = run.calls if run else 0
    reason = None
    if measured == len(work.units) and detail is None:
        status = "complete"
    else:
        status = "failed" if measured == 0 else "partial"
        why = _outcome_counts(run.outcomes if run else {}, blocked)
        reason = "; ".join(x for x in (why, detail) if x) or None
    try:
        # the end record keeps the cause only: the warehouse counts outcomes itself
        w.write(RunEnd(run_id=work.run_id, segment=work.segment,
                       started_wall=run.start_wall if run and run.start_wall else began,
                       ended_wall=run.end_wall if run and run.end_wall else time.time(),
                       status=status, detail=detail, units_done=done, units_measured=measured,
                       calls=calls, wall_s=_mono_seconds(run)))
    except OSError:
        pass                       # the writer's own error, raised by close below
    finally:
        _close_journal(w)
    return PathOutcome(work.path, work.run_id, status, reason, done, measured, calls)


def _mono_seconds(run) -> float | None:
    """How long the segment's scheduler ran, by the monotonic clock (None: it never did)."""
    if run is None or not run.start_mono:
        return None
    return (run.end_mono or time.monotonic()) - run.start_mono


def _close_journal(w: JournalWriter) -> None:
    """Close a journal; a write that failed (a full disk) is one line, not a traceback:
    what was synced is kept and the rerun resumes from it."""
    from dualpath.warehouse.db import diagnosis

    try:
        w.close()
    except OSError as e:
        found = diagnosis(w.path, e)
        raise HarnessError(str(found) if found else f"journal {w.path}: {e}") from None


def _outcome_counts(outcomes: Mapping[str, int], blocked: int) -> str:
    counts = dict(outcomes)
    if blocked:
        counts["input_failed"] = counts.get("input_failed", 0) + blocked
    bad = {k: v for k, v in counts.items() if k not in ("graded", "parse_failed")}
    return ", ".join(f"{v} {k}" for k, v in sorted(bad.items()))


def record_failure(cfg: Config, night: date, work: PathWork, detail: str) -> None:
    """A path that could not run at all gets a failed segment, with the reason."""
    now = time.time()
    w = JournalWriter(work.journal)
    try:
        w.write(_begin(cfg, night, work, now))
        w.write(RunEnd(run_id=work.run_id, segment=work.segment, started_wall=now,
                       ended_wall=now, status="failed", detail=detail, units_done=0,
                       units_measured=0, calls=0, wall_s=0.0))
    except OSError:
        pass
    try:
        _close_journal(w)
    except HarnessError as e:
        log.error("path %s: its failure could not be journaled: %s", work.path, e)


def _dumps(obj) -> str | None:
    return None if obj is None else orjson.dumps(obj, default=str).decode()
