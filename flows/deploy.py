"""Register and serve the scheduled deployments from this checkout, as a user would.

`deploy` registers the nightly and weekly deployments with a work pool (created if missing;
a worker started with `prefect worker start --pool NAME` runs them): the flow code comes from
this checkout (absolute path) and the config path is absolute, so nothing depends on the
worker's working directory or environment variables. Paths scored on other hosts
(`paths.X.work_pool`) also get their pool's `dualpath-path-share` deployment, which runs the
installed dualpath on that host (`flows.remote`). `serve` runs both in one long-lived
process for users without a work pool.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from prefect.schedules import Cron

from dualpath.config import Config
from flows.remote import ensure_share_deployment, pooled, prepare

CHECKOUT = Path(__file__).resolve().parents[1]
NIGHTLY_CRON = "30 18 * * 1-5"     # after the close, on weekdays; holidays: see the calendar
WEEKLY_CRON = "0 9 * * 6"          # Saturday morning, after the week's last night


def _specs(cfg: Config, config_path: Path, nightly_cron: str, weekly_cron: str) -> list[dict]:
    tz = cfg.market.timezone
    cfg_abs = str(config_path.resolve())
    return [
        {"name": "nightly", "entrypoint": "flows/nightly.py:nightly",
         "parameters": {"config_path": cfg_abs}, "schedules": [Cron(nightly_cron, timezone=tz)],
         "description": "Score tonight's universe on every path, ingest, summarise."},
        {"name": "weekly-report", "entrypoint": "flows/weekly.py:weekly_report",
         "parameters": {"config_path": cfg_abs,
                        "out": str(cfg.resolve(Path("reports")))},
         "schedules": [Cron(weekly_cron, timezone=tz)],
         "description": "The weekly comparison report, published as an artifact."},
    ]


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
                 nightly_cron: str = NIGHTLY_CRON, weekly_cron: str = WEEKLY_CRON) -> list[str]:
    """Register both deployments with `pool`; returns their names (flow/deployment)."""
    from prefect import Flow

    await _ensure_pool(pool)
    names = []
    for spec in _specs(cfg, config_path, nightly_cron, weekly_cron):
        flow = await Flow.from_source(source=str(CHECKOUT), entrypoint=spec.pop("entrypoint"))
        await flow.deploy(work_pool_name=pool, concurrency_limit=1, print_next_steps=False,
                          build=False, push=False, **spec)
        names.append(f"{flow.name}/{spec['name']}")
    shipped = pooled(cfg)
    if shipped:     # each pool's worker scores its paths' shares of the night
        await prepare(cfg, shipped)
        for pool in sorted({cfg.paths[n].work_pool for n in shipped}):
            names.append(await ensure_share_deployment(pool, replace_existing=True))
    return names


def serve(cfg: Config, config_path: Path, nightly_cron: str = NIGHTLY_CRON,
          weekly_cron: str = WEEKLY_CRON) -> None:
    """Serve both deployments from this process until it is stopped (no work pool needed)."""
    from prefect import serve as prefect_serve

    from flows.nightly import nightly
    from flows.weekly import weekly_report

    flows = {"flows/nightly.py:nightly": nightly, "flows/weekly.py:weekly_report": weekly_report}
    deployments = []
    for spec in _specs(cfg, config_path, nightly_cron, weekly_cron):
        flow = flows[spec.pop("entrypoint")]
        deployments.append(flow.to_deployment(concurrency_limit=1, **spec))
    prefect_serve(*deployments, pause_on_shutdown=False)


def run_deploy(*args, **kw) -> list[str]:
    return asyncio.run(deploy(*args, **kw))
