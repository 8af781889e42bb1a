"""Retuning a path: every point of a sweep launched, checked, replayed and stopped, in turn.

Per point (`measure_point`, a plain function): a fresh port under the machine-wide endpoint
lock (a client can never reach another sweep's server), launch and wait for /health, check
the server's identity (its slots must be the point's), read /metrics, replay the frozen set
with the point's slots in flight, read /metrics again, run the verify probe, stop. What it
measured is recorded at once (`warehouse.sweeps`), so a rerun of the same spec over the same
set resumes: points that are `ready` or `failed to start` are kept, unfinished ones measured
again. `sweep_flow` is the Prefect flow around it; `write_proposal` writes the chosen point
back as a `[paths.X]` proposal with its `[paths.X.measured]` block.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import httpx
import orjson
import pandas as pd
from prefect import flow, task
from prefect.cache_policies import NO_CACHE

from dualpath.config import Config, ExpectedIdentity, dump_toml, load_config
from dualpath.engines import engine
from dualpath.engines.proof import engine_mismatch
from dualpath.errors import ServerStartError, UserError
from dualpath.identity import differences, read_identity, read_metrics
from dualpath.launcher import LaunchedServer, expand_argv, gpu_state, log_tail, redact_env
from dualpath.locks import endpoint_lock
from dualpath.replay import PROBE_MAX_TOKENS, probe, replay, replay_client
from dualpath.sweep_spec import Point, SweepSpec, load_spec, points, spec_hash
from dualpath.evals.sweep import FAILED, INCOMPLETE, READY, ablation, chosen, point_metrics, verdicts
from dualpath.warehouse import sweeps as store
from dualpath.warehouse.db import writer

log = logging.getLogger(__name__)

OOM = re.compile(r"out of memory|insufficient memory|failed to allocate|cudaMalloc|hipMalloc|"
                 r"ErrorOutOfDeviceMemory|\bOOM\b|unable to allocate", re.IGNORECASE)
@dataclass(frozen=True)
class SweepContext:
    """What every point of one sweep shares."""

    cfg: Config
    spec: SweepSpec
    sweep_id: str
    frame: pd.DataFrame
    replay_hash: str
    log_dir: Path


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def counter_deltas(before: dict | None, after: dict | None,
                   dialect: str) -> dict[str, float]:
    """The server's own counters over the replay (empty when it has no /metrics): its
    prefill (`prompt_tokens`), decode, and the busy seconds of its slots where its counters
    give them (`dualpath.engines.catalog.EngineFacts.slot_seconds`)."""
    return engine(dialect).counter_deltas(before, after, slot_seconds_only=True)


def _argv(ctx: SweepContext, point: Point, port: int) -> list[str]:
    argv = [a.replace("{port}", str(port)).replace("{host}", ctx.spec.host)
            .replace("{python}", sys.executable) for a in point.argv]
    return expand_argv(argv, ctx.cfg.resolve(Path(".dualpath/models")))


def _failed(row: dict, kind: str, detail: str, tail: str | None = None) -> dict:
    return {**row, "status": FAILED, "failure_kind": kind, "detail": detail[:4000],
            "log_tail": tail, "ended_wall": time.time()}


def _start_failure(row: dict, e: ServerStartError, log_path: Path) -> dict:
    tail = log_tail(log_path, 40)
    if OOM.search(tail):
        kind = "out of memory"
    elif "not ready after" in str(e):
        kind = "not ready in time"
    else:
        kind = "exited"
    return _failed(row, kind, str(e).split("\n", 1)[0], tail)


async def measure_point(ctx: SweepContext, point: Point, repeat: int,
                        attempt: int) -> tuple[dict, pd.DataFrame]:
    """Launch, check, replay and stop one point; returns its row and its replayed calls."""
    port = free_port(ctx.spec.host)
    url = f"http://{ctx.spec.host}:{port}"
    row = {"sweep_id": ctx.sweep_id, "point_key": point.key, "repeat": repeat,
           "attempt": attempt, "label": point.label, "argv_json": orjson.dumps(point.argv).decode(),
           "slots": point.slots, "settings_json": orjson.dumps(point.settings).decode(),
           "base_url": url, "calls_planned": len(ctx.frame), "time_scale": ctx.spec.time_scale,
           "started_wall": time.time()}
    log_path = ctx.log_dir / f"{point.key}-r{repeat}-a{attempt}.log"
    try:
        argv = await asyncio.to_thread(_argv, ctx, point, port)
    except UserError as e:
        return _failed(row, "not found", str(e)), pd.DataFrame()
    with endpoint_lock(url, f"sweep {ctx.spec.name} point {point.label}"):
        server = LaunchedServer(argv, url, log_path, dict(ctx.spec.env), ctx.spec.ready_timeout_s)
        try:
            await asyncio.to_thread(server.__enter__)
        except ServerStartError as e:
            return _start_failure(row, e, log_path), pd.DataFrame()
        try:
            return await _on_server(ctx, point, row, url)
        finally:
            await asyncio.to_thread(server.stop)


async def _on_server(ctx: SweepContext, point: Point, row: dict,
                     url: str) -> tuple[dict, pd.DataFrame]:
    sp = ctx.cfg.paths[ctx.spec.path]
    dialect = sp.dialect
    async with httpx.AsyncClient(timeout=10.0) as http:
        ident = await read_identity(http, url, dialect)
        row.update(model=ident.model, build=ident.build,
                   identity_json=orjson.dumps({k: getattr(ident, k) for k in (
                       "model", "model_path", "slots", "n_ctx_per_slot", "build",
                       "speculative")}).decode())
        expect = ctx.spec.expect.model_copy(update={"slots": point.slots})
        if "slots" not in engine(dialect).facts.reports:     # vLLM: no slot count to check
            expect = ExpectedIdentity(**{**expect.model_dump(), "slots": None})
        if (wrong := await engine_mismatch(http, url, dialect)) is not None:
            return _failed(row, "engine mismatch", wrong), pd.DataFrame()
        diffs = differences(ident, expect)
        if diffs:
            return _failed(row, "identity mismatch", "; ".join(diffs)), pd.DataFrame()
        before = await read_metrics(http, url)
        client = replay_client(ctx.frame, sp, url, http, f"sweep/{ctx.sweep_id}/{point.key}")
        client.pin(ident.model, ident.build, dialect)
        try:
            result = await replay(client, ctx.frame, point.slots, ctx.spec.point_timeout_s)
        except asyncio.CancelledError:
            raise
        after = await read_metrics(http, url)
        row["gpu_state"] = await asyncio.to_thread(gpu_state) or "not available"
        pr = None
        if result.complete:
            pr = await probe(http, url, dialect, sp.model, ctx.spec.probe_long_tokens,
                             PROBE_MAX_TOKENS, ctx.spec.time_scale)
    return _replayed(ctx, row, result, before, after, pr)


def _replayed(ctx: SweepContext, row: dict, result, before, after, pr) -> tuple[dict, pd.DataFrame]:
    calls = _calls_frame(row, result.records, ctx.frame)
    counters = counter_deltas(before, after, ctx.cfg.paths[ctx.spec.path].dialect)
    judged = calls.assign(ok=calls["error_kind"].isna() & calls["contaminated"].isna()) \
        if len(calls) else calls.assign(ok=pd.Series(dtype=bool))
    row.update(point_metrics(judged, wall_s=result.wall_s, counters=counters,
                             time_scale=ctx.spec.time_scale))
    row.update(wall_s=result.wall_s / ctx.spec.time_scale, ended_wall=time.time(),
               metrics_before_json=orjson.dumps(before).decode() if before else None,
               metrics_after_json=orjson.dumps(after).decode() if after else None)
    if pr is not None:
        row.update(probe_prefill_tps=pr.prefill_tps, probe_decode_tps=pr.decode_tps)
    problems = []
    if not result.complete:
        problems.append(result.stopped or f"{result.ok_calls} of {result.planned} frozen calls "
                        "answered by the checked server")
    if not counters:
        fix = engine(ctx.cfg.paths[ctx.spec.path].dialect).facts.metrics_fix
        problems.append("the server has no /metrics counters" + (f": {fix}" if fix else ""))
    if pr is not None and pr.error:
        problems.append(f"verify probe failed: {pr.error}")
    row["status"] = READY if result.complete and counters else INCOMPLETE
    row["detail"] = "; ".join(problems) or None
    return row, calls


def _calls_frame(row: dict, records, frame: pd.DataFrame) -> pd.DataFrame:
    cols = ["ticker", "draw", "call_seq", "agent", "start_mono", "first_token_mono", "end_mono",
            "latency_s", "http_status", "attempts", "error_kind", "finish_reason",
            "prompt_tokens", "completion_tokens", "cached_tokens", "prompt_n", "prompt_ms",
            "predicted_n", "predicted_ms", "contaminated"]
    out = pd.DataFrame([{c: getattr(r, c) for c in cols} for r in records], columns=cols)
    for k in ("sweep_id", "point_key", "repeat", "attempt"):
        out[k] = row[k]
    return out


@task(cache_policy=NO_CACHE, task_run_name="point-{point.key}-r{repeat}")
async def point_task(ctx: SweepContext, point: Point, repeat: int, attempt: int) -> dict:
    row, calls = await measure_point(ctx, point, repeat, attempt)
    with writer(ctx.cfg.resolve(ctx.cfg.warehouse.path)) as con:
        store.record_point(con, row, calls)
    log.info("sweep %s point %s (repeat %d): %s%s", ctx.spec.name, point.label, repeat,
             row["status"], f" — {row.get('detail')}" if row.get("detail") else "")
    return row


@dataclass(frozen=True)
class SweepOutcome:
    """What a sweep found: its verdict table, the chosen point, and the proposal file."""

    sweep_id: str
    table: pd.DataFrame
    chosen: str | None
    proposal: Path | None
    measured_now: int
    kept: int


def sweep_context(config: Path | str, spec_path: Path | str) -> SweepContext:
    """Load the config, the spec and the frozen set; checks the path and the set agree."""
    cfg = load_config(config)
    spec, replay_path = load_spec(spec_path)
    if spec.path not in cfg.paths:
        raise UserError(f"sweep spec names path '{spec.path}', which the config does not "
                        f"have; paths: {list(cfg.paths)}")
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        # migrated before reading, so the set can be noted; `replay_set` may be the hash
        # `dualpath freeze` printed rather than the file
        if not replay_path.exists():
            replay_path = store.replay_file(con, spec.replay_set.name) or replay_path
    frame, h = store.read_replay_set(replay_path)
    sweep_id = spec_hash(spec, h)
    log_dir = cfg.resolve(cfg.warehouse.runs_dir) / "sweeps" / f"{spec.name}-{sweep_id}"
    return SweepContext(cfg, spec, sweep_id, frame, h, log_dir)


async def run_sweep(ctx: SweepContext, measure=None) -> SweepOutcome:
    """Measure every point not yet measured, then judge them all and write the proposal."""
    measure = measure or _measure_plain
    spec = ctx.spec
    db = ctx.cfg.resolve(ctx.cfg.warehouse.path)
    with writer(db) as con:
        store.start_sweep(con, ctx.sweep_id, spec.name, ctx.cfg.experiment.name, spec.path,
                          ctx.replay_hash, spec.mode, spec.knee_share,
                          spec.model_dump_json(exclude={"env"}))
        done = store.attempts(con, ctx.sweep_id)
    new = kept = 0
    for point in points(spec):
        for repeat in range(1, spec.repeats + 1):
            attempt, status = done.get((point.key, repeat), (0, None))
            if status in store.FINAL_STATUSES:
                kept += 1
                continue
            await measure(ctx, point, repeat, attempt + 1)
            new += 1
    return _conclude(ctx, new, kept)


async def _measure_plain(ctx, point, repeat, attempt) -> dict:
    return await point_task.fn(ctx, point, repeat, attempt)


def _conclude(ctx: SweepContext, new: int, kept: int) -> SweepOutcome:
    db = ctx.cfg.resolve(ctx.cfg.warehouse.path)
    with writer(db) as con:
        reps = store.point_repeats(con, ctx.sweep_id)
    table = verdicts(reps, ctx.spec.knee_share, ctx.spec.noise_sigmas)
    knee = chosen(table)
    proposal = None
    if knee is not None:
        proposal = write_proposal(ctx, reps[reps["point_key"] == knee["point_key"]])
    with writer(db) as con:
        store.finish_sweep(con, ctx.sweep_id, None if knee is None else knee["point_key"],
                           None if proposal is None else str(proposal))
    return SweepOutcome(ctx.sweep_id, table, None if knee is None else knee["point_key"],
                        proposal, new, kept)


def _mean(rows: pd.DataFrame, col: str) -> float | None:
    v = rows[col].dropna()
    return float(v.mean()) if len(v) else None


def write_proposal(ctx: SweepContext, rows: pd.DataFrame) -> Path:
    """The chosen point as `[paths.X]` with launch, slots and a `[paths.X.measured]` block."""
    sp = ctx.cfg.paths[ctx.spec.path]
    first = rows.iloc[0]
    argv = orjson.loads(first["argv_json"])
    if sp.base_url:
        port = sp.base_url.rsplit(":", 1)[-1]
        argv = [a.replace("{port}", port).replace("{host}", ctx.spec.host) for a in argv]
    measured = {"prefill_tps": _mean(rows, "prefill_tps"), "decode_tps": _mean(rows, "decode_tps"),
                "ticker_s_throughput": _mean(rows, "ticker_s_throughput"),
                "ticker_s_latency": _mean(rows, "ticker_s_latency"),
                "replay_set": ctx.replay_hash, "measured_on": date.today(),
                "build": first["build"], "slots": int(first["slots"]),
                "probe_prefill_tps": _mean(rows, "probe_prefill_tps"),
                "probe_decode_tps": _mean(rows, "probe_decode_tps"),
                "probe_long_tokens": ctx.spec.probe_long_tokens, "sweep": ctx.sweep_id}
    path = {"launch": argv, "slots": int(first["slots"]),
            "expect": {"slots": int(first["slots"])},
            "measured": {k: v for k, v in measured.items() if v is not None}}
    if ctx.spec.env:
        path["launch_env"] = redact_env(dict(ctx.spec.env))
    head = (f"# Proposed by `dualpath sweep` {ctx.spec.name} ({ctx.sweep_id}): the knee point "
            f"{first['label']} over replay set {ctx.replay_hash}.\n# Merge into the config "
            "by hand; `dualpath plan` uses the measured block, `dualpath verify` checks it.\n")
    out = ctx.log_dir / "proposal.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(head + dump_toml({"paths": {ctx.spec.path: path}}) + "\n")
    return out


@flow(name="dualpath-sweep", flow_run_name="sweep/{spec_path}")
async def sweep_flow(config: str, spec_path: str) -> SweepOutcome:
    """The sweep as a Prefect flow: one task per point measured."""
    ctx = sweep_context(config, spec_path)

    async def measure(c, point, repeat, attempt):
        return await point_task(c, point, repeat, attempt)

    return await run_sweep(ctx, measure)


def ablation_table(ctx_spec: SweepSpec, reps: pd.DataFrame) -> pd.DataFrame:
    """Ablation mode: each `ablate` flag's Δ against the base, with its noise band."""
    pts = points(ctx_spec)
    base = pts[0].key
    removed = {p.label.removeprefix("no "): p.key for p in pts[1:]}
    return ablation(reps, base, removed, ctx_spec.noise_sigmas)


def run_sweep_flow(config: Path | str, spec_path: Path | str) -> SweepOutcome:
    """Run the flow from synchronous code (the CLI); a user mistake is raised here, before
    Prefect starts (a bad spec or set is one clean error, not a failed flow run)."""
    sweep_context(config, spec_path)

    async def go():
        state = await sweep_flow(str(config), str(spec_path), return_state=True)
        data = await state.result(raise_on_failure=False)
        if isinstance(data, BaseException):
            raise data
        return data
    return asyncio.run(go())


def sweep_report(cfg: Config, which: str | None) -> tuple[dict, pd.DataFrame, pd.DataFrame | None]:
    """A recorded sweep: its row, its verdict table and (ablation mode) the flag deltas."""
    from dualpath.warehouse.db import reader

    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        sweep = store.find_sweep(con, which)
        reps = store.point_repeats(con, sweep["sweep_id"])
    table = verdicts(reps, float(sweep["knee_share"]))
    spec = SweepSpec.model_validate_json(sweep["spec_json"])
    abl = ablation_table(spec, reps) if spec.mode == "ablation" else None
    extra = reps.groupby("point_key").agg(
        prefill_tps=("prefill_tps", "mean"), decode_tps_per_slot=("decode_tps_per_slot", "mean"),
        runaway_share=("runaway_share", "mean"), cached_share=("cached_share", "mean"),
        calls_ok=("calls_ok", "min"), calls_planned=("calls_planned", "first"),
        failure_kind=("failure_kind", "first"), detail=("detail", "first"),
        gpu_state=("gpu_state", "first"))
    return sweep, table.join(extra, on="point_key"), abl
