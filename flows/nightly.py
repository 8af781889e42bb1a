"""The nightly Prefect flow: every path scored concurrently, journaled, ingested, summarised.

Thin on purpose: the work is in `flows.runner` (plain functions) and the core. Each path
connects, checks and scores on its own, so one path that cannot run is recorded as failed
and the others still run. The flow ends `Failed` (after ingest and the artifact) when any
run is not complete, and its runs are named after the experiment and night.
Rerunning a night resumes it: measured units are skipped, failed ones scored again.
"""

from __future__ import annotations

import asyncio
from datetime import date
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run
from prefect.states import Failed

from dualpath.config import Config, load_config
from dualpath.scheduler import Progress
from flows import inputs, runner
from flows.prereg import hold_night_to_plan
from flows.report import night_summary, summary_markdown
from warehouse.db import writer
from warehouse.ingest import IngestStats, ingest_journals


@task(cache_policy=NO_CACHE, timeout_seconds=24 * 3600, task_run_name="score-{work.path}")
async def score_path(cfg: Config, night: date, work: runner.PathWork, history,
                     missing: dict[str, str], override_url: str | None,
                     progress: Progress | None) -> runner.PathOutcome:
    return await runner.run_path(cfg, night, work, history, missing,
                                 override_url=override_url, progress=progress)


@task(cache_policy=NO_CACHE, retries=3, retry_delay_seconds=2)
def ingest(cfg: Config, journals: list[Path]) -> list[IngestStats]:
    """Ingest the night's journals in one short write transaction."""
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        return ingest_journals(con, [j for j in journals if j.exists()])


def night_of(night: date | str | None) -> date:
    if night is None:
        return date.today()
    return night if isinstance(night, date) else date.fromisoformat(str(night))


def _run_name() -> str:
    params = flow_run.parameters
    try:
        experiment = load_config(params["config_path"]).experiment.name
    except Exception:   # a broken config fails the run itself, with its own message
        experiment = "dualpath"
    return f"{experiment}/{night_of(params.get('night')).isoformat()}"


@flow(name="dualpath-nightly", flow_run_name=_run_name, log_prints=False)
async def nightly(config_path: str, night: date | None = None,
                  endpoints: dict[str, str] | None = None, paths: list[str] | None = None,
                  progress: Progress | None = None):
    """Score one night on every path (or `paths`), ingest, publish a summary artifact.

    `endpoints` overrides base URLs (e.g. simulated servers started by the caller);
    `progress(path, units done, units total, calls)` is called as units finish.
    """
    log = get_run_logger()
    cfg = load_config(config_path)
    night = night_of(night)
    inputs.ensure_prices(cfg)
    off_plan = hold_night_to_plan(cfg, night)
    if off_plan:
        log.warning("tonight deviates from the frozen plan (logged; left out of the "
                    "confirmatory result): %s", "; ".join(off_plan))
    history = inputs.price_history(cfg)
    missing = inputs.missing_inputs(cfg, history, night)
    if missing:
        log.warning(inputs.describe_missing(missing, night))
    works = runner.plan_night(cfg, night, paths)
    # one path's crash must not stop the other, nor the ingest of what both recorded
    done = await asyncio.gather(*(
        score_path(cfg, night, w, history, missing, (endpoints or {}).get(w.path), progress)
        for w in works), return_exceptions=True)
    outcomes = [d if isinstance(d, runner.PathOutcome) else
                runner.PathOutcome(w.path, w.run_id, "failed", f"{type(d).__name__}: {d}")
                for w, d in zip(works, done)]
    for o in outcomes:
        if o.status in ("failed", "partial"):
            log.error("path %s: %s: %s", o.path, o.status, o.reason)
    stats = ingest(cfg, [w.journal for w in works])
    summary = night_summary(cfg, [s.run_id for s in stats])
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


def run_nightly(config_path: Path, night: date | None = None,
                endpoints: dict[str, str] | None = None,
                progress: Progress | None = None) -> tuple[bool, dict]:
    """Run the flow from synchronous code (the CLI): (every run complete?, the result).

    An exception that ended the flow (a config or data mistake) is raised here."""
    async def go():
        state = await nightly(str(config_path), night, endpoints, progress=progress,
                              return_state=True)
        data = await state.result(raise_on_failure=False)
        if isinstance(data, BaseException):
            raise data
        return state.is_completed(), data
    return asyncio.run(go())
