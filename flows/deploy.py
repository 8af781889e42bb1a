"""Register and serve the scheduled deployments from this checkout, as a user would.

`deploy` registers the nightly and weekly deployments with a work pool (created if missing;
a worker started with `prefect worker start --pool NAME` runs them): the flow code comes from
this checkout (absolute path) and the config path is absolute, so nothing depends on the
worker's working directory or environment variables. Paths scored on other hosts
(`paths.X.work_pool`) also get their pool's `dualpath-path-share` deployment, which runs the
installed dualpath on that host (`flows.remote`). `serve` runs both in one long-lived
process for users without a work pool.

Deployments cannot cross. Their names carry the experiment (`nightly-<experiment>`), so two
experiments on one Prefect server keep their own; an experiment's deployments are bound to
the config that registered them (another config of the same name is refused unless it asks
to `replace` them); and the served ones are named apart (`nightly-<experiment>-served`),
because `serve` upserting a worker deployment of the same name kept its work pool and lost
its source, so the worker's next run crashed in `…/None`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from prefect.schedules import Cron

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.flows.remote import ensure_share_deployment, pooled, prepare_pools

CHECKOUT = Path(__file__).resolve().parents[1]
NIGHTLY_CRON = "30 18 * * 1-5"     # after the close, on weekdays; holidays: see the calendar
WEEKLY_CRON = "0 9 * * 6"          # Saturday morning, after the week's last night
FLOWS = {"nightly": "dualpath-nightly", "weekly-report": "dualpath-weekly-report"}
SERVED = "-served"


def deployment_names(experiment: str, served: bool = False) -> dict[str, str]:
    """{'nightly': 'dualpath-nightly/nightly-<exp>', 'weekly-report': …} (flow/deployment)."""
    tail = f"-{experiment}" + (SERVED if served else "")
    return {kind: f"{flow}/{kind}{tail}" for kind, flow in FLOWS.items()}


def _specs(cfg: Config, config_path: Path, nightly_cron: str, weekly_cron: str,
           served: bool = False) -> list[dict]:
    tz = cfg.market.timezone
    cfg_abs = str(config_path.resolve())
    names = {k: v.split("/", 1)[1] for k, v in deployment_names(cfg.experiment.name,
                                                                 served).items()}
    return [
        {"name": names["nightly"], "entrypoint": "flows/nightly.py:nightly",
         "parameters": {"config_path": cfg_abs}, "schedules": [Cron(nightly_cron, timezone=tz)],
         "description": f"Score tonight's universe of experiment {cfg.experiment.name} on "
                        "every path, ingest, summarise."},
        {"name": names["weekly-report"], "entrypoint": "flows/weekly.py:weekly_report",
         "parameters": {"config_path": cfg_abs,
                        "out": str(cfg.resolve(Path("reports")))},
         "schedules": [Cron(weekly_cron, timezone=tz)],
         "description": f"The weekly comparison report of experiment {cfg.experiment.name}, "
                        "published as an artifact."},
    ]


def crossings(deployments: list[tuple[str, dict]], experiment: str,
              config_abs: str) -> tuple[list[str], list[str]]:
    """(this experiment's deployments that run this config, problems) among `deployments`
    given as (flow/deployment name, parameters): a deployment named for this experiment that
    runs another config, and one named for another experiment (or none) that runs this one."""
    ours = set(deployment_names(experiment).values()) | set(
        deployment_names(experiment, served=True).values())
    good, problems = [], []
    for name, params in sorted(deployments):
        if name.split("/", 1)[0] not in FLOWS.values() or "config_path" not in (params or {}):
            continue
        runs = str(params["config_path"])
        if name in ours and runs != config_abs:
            problems.append(f"{name} runs {runs}, not this config ({config_abs})")
        elif name in ours:
            good.append(name)
        elif runs == config_abs:
            problems.append(f"{name} also runs this config but is not named for experiment "
                            f"{experiment!r} (an older or crossed deployment): delete it "
                            f"(prefect deployment delete {name})")
    return good, problems


async def _check_binding(cfg: Config, config_path: Path, served: bool, replace: bool) -> None:
    """Refuse to take over an experiment's deployments that another config registered."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    config_abs = str(config_path.resolve())
    async with get_client() as client:
        for name in deployment_names(cfg.experiment.name, served).values():
            try:
                dep = await client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            other = (dep.parameters or {}).get("config_path")
            if other is not None and str(other) != config_abs and not replace:
                raise UserError(
                    f"deployment {name} runs {other}: experiment {cfg.experiment.name!r} is "
                    f"bound to that config. Deploy from it, give {config_path} its own "
                    "[experiment] name, or pass --replace to point the deployments here")


async def _worker_deployments_active(cfg: Config) -> list[str]:
    """This experiment's worker deployments whose schedules are on (nights would run twice
    beside a served one: the night's lock lets one score, the other fails)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    active = []
    async with get_client() as client:
        for name in deployment_names(cfg.experiment.name).values():
            try:
                dep = await client.read_deployment_by_name(name)
            except ObjectNotFound:
                continue
            if not dep.paused:
                active.append(name)
    return active


async def _ensure_pool(pool: str) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            await client.read_work_pool(pool)
        except ObjectNotFound:
            await client.create_work_pool(WorkPoolCreate(name=pool, type="process"))


async def deploy(cfg: Config, config_path: Path, pool: str,
                 nightly_cron: str = NIGHTLY_CRON, weekly_cron: str = WEEKLY_CRON,
                 replace: bool = False) -> list[str]:
    """Register both deployments with `pool`; returns their names (flow/deployment)."""
    from prefect import Flow

    await _check_binding(cfg, config_path, served=False, replace=replace)
    await _ensure_pool(pool)
    names = []
    for spec in _specs(cfg, config_path, nightly_cron, weekly_cron):
        flow = await Flow.from_source(source=str(CHECKOUT), entrypoint=spec.pop("entrypoint"))
        await flow.deploy(work_pool_name=pool, concurrency_limit=1, print_next_steps=False,
                          build=False, push=False, **spec)
        names.append(f"{flow.name}/{spec['name']}")
    shipped = pooled(cfg)
    if shipped:     # each pool's worker scores its paths' shares of the night
        await prepare_pools(cfg, shipped)
        for pool in sorted({cfg.paths[n].work_pool for n in shipped}):
            names.append(await ensure_share_deployment(pool, replace_existing=True))
    return names


def prepare_serve(cfg: Config, config_path: Path, replace: bool = False) -> list[str]:
    """Checks before serving: the binding (refused as for `deploy`); returns this
    experiment's worker deployments whose schedules are also on, for a warning."""
    async def go() -> list[str]:
        await _check_binding(cfg, config_path, served=True, replace=replace)
        return await _worker_deployments_active(cfg)
    return asyncio.run(go())


def serve(cfg: Config, config_path: Path, nightly_cron: str = NIGHTLY_CRON,
          weekly_cron: str = WEEKLY_CRON) -> None:
    """Serve both deployments from this process until it is stopped (no work pool needed)."""
    from prefect import serve as prefect_serve

    from dualpath.flows.nightly import nightly
    from dualpath.flows.weekly import weekly_report

    flows = {"flows/nightly.py:nightly": nightly, "flows/weekly.py:weekly_report": weekly_report}
    deployments = []
    for spec in _specs(cfg, config_path, nightly_cron, weekly_cron, served=True):
        flow = flows[spec.pop("entrypoint")]
        deployments.append(flow.to_deployment(concurrency_limit=1, **spec))
    prefect_serve(*deployments, pause_on_shutdown=False)


def run_deploy(*args, **kw) -> list[str]:
    return asyncio.run(deploy(*args, **kw))
