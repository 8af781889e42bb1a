"""The nightly Prefect flow: both paths scored concurrently, journaled, ingested, summarised.

Thin on purpose: the work is in `flows.runner` (plain functions) and the core. Rerunning a
night resumes it: finished units are skipped and nothing is duplicated.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import date
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from dualpath.config import Config, load_config
from dualpath.launcher import LaunchedServer, expand_argv, gpu_state
from dualpath.locks import endpoint_lock
from dualpath.sim.fleet import SimFleet
from flows import runner
from flows.report import night_summary, summary_markdown


def connect_paths(cfg: Config, night: date, plans: list[runner.PathRunPlan],
                  endpoints: dict[str, str] | None, stack: ExitStack) -> None:
    """Give each plan a live endpoint: given, simulated, launched or attached; lock each one."""
    need_sim = [p for p in plans if cfg.paths[p.path].engine == "sim"
                and not cfg.paths[p.path].base_url and p.path not in (endpoints or {})]
    fleet = stack.enter_context(SimFleet(cfg)) if need_sim else None
    for p in plans:
        sp = cfg.paths[p.path]
        if endpoints and p.path in endpoints:
            p.base_url, p.how = endpoints[p.path], "simulated" if sp.engine == "sim" else "attached"
        elif fleet and p.path in fleet.urls:
            p.base_url, p.how = fleet.urls[p.path], "simulated"
        else:
            p.base_url, p.how = sp.base_url, "attached"
        stack.enter_context(endpoint_lock(p.base_url, p.run_id))
        if sp.launch and not (endpoints and p.path in endpoints):
            argv = expand_argv(sp.launch, cfg.resolve(Path(".dualpath/models")))
            server = stack.enter_context(LaunchedServer(
                argv, p.base_url, p.journal.parent / "server.log", dict(sp.launch_env),
                sp.ready_timeout_s))
            p.how = "launched"
            p.launch = {"argv": argv, "env": dict(sp.launch_env), "log_path": str(server.log_path),
                        "started_wall": server.started_wall}
        p.gpu_state = gpu_state()


@task(cache_policy=NO_CACHE)
async def check_paths(cfg: Config, plans: list[runner.PathRunPlan]) -> dict[str, list[str]]:
    return await runner.check_identities(cfg, plans)


@task(cache_policy=NO_CACHE, timeout_seconds=24 * 3600)
async def score(cfg: Config, night: date, plans: list[runner.PathRunPlan]) -> dict:
    history = runner.price_history(cfg)
    runs = await runner.score_plans(cfg, night, history, plans)
    return {name: {"calls": r.calls, "units_done": r.units_done} for name, r in runs.items()}


@task(cache_policy=NO_CACHE, retries=3, retry_delay_seconds=2)
def ingest(cfg: Config, plans: list[runner.PathRunPlan]) -> list:
    return runner.ingest_plans(cfg, plans)


@flow(name="dualpath-nightly", log_prints=False)
async def nightly(config_path: str, night: date | None = None,
                  endpoints: dict[str, str] | None = None,
                  paths: list[str] | None = None) -> dict:
    """Score one night on every path (or `paths`), ingest, publish a summary artifact.

    `endpoints` overrides base URLs (e.g. simulated servers started by the caller).
    """
    log = get_run_logger()
    cfg = load_config(config_path)
    night = night or date.today()
    runner.ensure_prices(cfg)
    plans = runner.plan_night(cfg, night, paths)
    with ExitStack() as stack:
        todo = [p for p in plans if p.units]
        connect_paths(cfg, night, todo, endpoints, stack)
        problems = await check_paths(cfg, todo) if todo else {}
        for p in todo:
            if problems.get(p.path):
                msg = "; ".join(problems[p.path])
                log.error("path %s was not scored: %s", p.path, msg)
                runner.record_failure(cfg, night, p, msg)
        ok = [p for p in todo if not problems.get(p.path)]
        if ok:
            await score(cfg, night, ok)
    stats = ingest(cfg, plans)
    summary = night_summary(cfg, night, [s.run_id for s in stats])
    await create_markdown_artifact(key=f"night-{cfg.experiment.name}".lower().replace("_", "-"),
                                   markdown=summary_markdown(night, summary),
                                   description=f"dualpath night {night}")
    return {"night": night.isoformat(), "runs": summary,
            "identity_problems": {k: v for k, v in problems.items() if v}}


def run_nightly(config_path: Path, night: date | None = None,
                endpoints: dict[str, str] | None = None) -> dict:
    """Run the flow from synchronous code (the CLI)."""
    import asyncio
    return asyncio.run(nightly(str(config_path), night, endpoints))
