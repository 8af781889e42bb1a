"""A path's share of a night on its own host, run by a Prefect worker of the path's work pool.

A path with `work_pool` is scored by the `dualpath-path-share` flow, deployed once per pool
(deployment `dualpath-path-share/<pool>`, entrypoint the installed module, so it runs on any
host with dualpath installed) and triggered by the nightly flow with `run_deployment`:

    parent (nightly flow)                    worker's host (`prefect worker start --pool P`)
    prepare_pools: store, pool, deployment  ->
    fetch the shipped journal, plan          path_share: journal seeded from the store when
    run_deployment(kit), wait        ---->     this host has an older one (or none); connect,
                                               lock, identify and score as a local path
    fetch + ingest as it grows      <----    ship the journal every `ship_every_s` and at
    fetch + ingest at the end                  the end, to `[warehouse] journal_store`

The kit carries what the worker's host does not have: the parent's config, the universe,
each ticker's closes for the night, the documents and missing inputs. Files on the worker's
host live under `$DUALPATH_HOST_DIR` (default `~/.dualpath/host`): runs/ holds its journals
and server logs. A worker that dies stops the flow run's heartbeats; the automation this
module keeps (`ensure_zombie_automation`) marks the run Crashed, the parent's wait ends, and
what was shipped is ingested: a partial run that a rerun resumes from the host's journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from dataclasses import asdict, replace
from datetime import date, timedelta
from pathlib import Path

import pandas as pd
from prefect import flow, get_run_logger
from prefect.runtime import flow_run as current_run
from prefect.states import Completed, Failed
from pydantic import Field, PrivateAttr

from dualpath.config import Config
from dualpath.errors import ConfigError
from dualpath.night import PriceHistory
from dualpath.pipeline import read_documents
from dualpath.strict import StrictModel
from dualpath.flows import runner
from dualpath.flows.store import JournalStore, write_atomic

log = logging.getLogger(__name__)

SHARE_FLOW = "dualpath-path-share"
HOST_DIR_ENV = "DUALPATH_HOST_DIR"
AUTOMATION = "dualpath: path shares whose heartbeats stopped are crashed"
SHIP_EVERY_S = 30.0
START_TIMEOUT_S = 900.0      # a share no worker picks up in this time is recorded as failed
POLL_S = 2.0
_SYNC = threading.Lock()
# a finished path share says what became of its segment in its state message
_STATUSES = ("complete", "partial", "failed", "nothing_to_do")


class ShareKit(StrictModel):
    """What a worker on another host needs to score one path's share of a night."""

    config: dict = Field(description="The parent's config, as JSON.")
    config_hash: str = Field(description="Its fingerprint on the parent's host.")
    night: date
    path: str
    tickers: list[str] = Field(description="The universe (the worker may lack its file).")
    closes: dict[str, list[tuple[date, float]]] = Field(
        description="Per ticker, the adjusted closes the prompts may see tonight.")
    missing: dict[str, str] = Field(default_factory=dict, description="Tickers without "
                                    "inputs tonight, with why.")
    documents: dict[str, str] = Field(default_factory=dict, description="TICKER -> document.")
    store: str = Field(description="The journal store.")
    deadline_s: float | None = Field(None, description="Seconds left before the deadline.")
    max_draw: int | None = None


class ShippedConfig(Config):
    """The parent's config as a worker's host holds it: the universe inline, its files under
    the host's folder. What the night measures is unchanged, so its fingerprint is the
    parent's (a rerun on either host must find the same run)."""

    _fingerprint: str = PrivateAttr("")

    def fingerprint(self) -> str:
        return self._fingerprint


# ---------------------------------------------------------------------------- worker side

def host_dir() -> Path:
    """This host's folder for dualpath's files (journals, server logs, documents)."""
    return Path(os.environ.get(HOST_DIR_ENV) or Path.home() / ".dualpath" / "host").resolve()


def kit_config(kit: ShareKit, home: Path) -> ShippedConfig:
    """The config to score with on this host; refuses a dualpath that measures differently."""
    # the universe as the parent read it (this host may lack its file); the fingerprint
    # counts tickers, not the file that lists them, so it is the parent's unchanged
    original = Config.model_validate({**kit.config, "base_dir": str(home), "experiment": {
        **kit.config["experiment"], "universe": kit.tickers, "universe_file": None}})
    if original.fingerprint() != kit.config_hash:
        raise ConfigError(f"this host's dualpath reads the config as {original.fingerprint()}, "
                          f"the parent's as {kit.config_hash}: install the same dualpath "
                          "version on every host")
    data = {**kit.config, "base_dir": str(home)}
    data["experiment"] = {**data["experiment"], "universe": kit.tickers, "universe_file": None}
    data["warehouse"] = {**data["warehouse"], "runs_dir": str(home / "runs")}
    docs = None
    if kit.documents:
        docs = home / "documents" / original.experiment.name / kit.night.isoformat() / kit.path
        for ticker, text in kit.documents.items():
            write_atomic(docs / f"{ticker}.md", text.encode())
    data["pipeline"] = {**data["pipeline"], "documents_dir": str(docs) if docs else None}
    cfg = ShippedConfig.model_validate(data)
    cfg._fingerprint = kit.config_hash
    return cfg


def seed_journal(store: JournalStore, key: str, journal: Path) -> bool:
    """Take the stored journal when this host has none or an older one (another host of the
    pool scored an earlier segment): the rerun resumes from the latest record of the run."""
    data = store.read(key)
    if data is None or (journal.exists() and journal.stat().st_size >= len(data)):
        return False
    write_atomic(journal, data)
    return True


async def _ship_while_running(store: JournalStore, key: str, journal: Path,
                              every_s: float) -> None:
    """Ship the journal whenever it grew, at most every `every_s`: what a dying host has
    scored is in the store up to the last shipment."""
    shipped = -1
    while True:
        await asyncio.sleep(every_s)
        size = journal.stat().st_size if journal.exists() else -1
        if size == shipped:
            continue
        try:
            await asyncio.to_thread(store.put, journal, key)
            shipped = size
        except Exception as e:     # a store briefly unreachable: the next shipment retries
            get_run_logger().warning("journal not shipped yet: %s: %s", type(e).__name__, e)


def _share_name() -> str:
    kit = current_run.parameters.get("kit")
    kit = kit.model_dump(mode="json") if isinstance(kit, ShareKit) else kit or {}
    return f"{kit.get('path', 'path')}@{kit.get('night', 'night')}"


@flow(name=SHARE_FLOW, flow_run_name=_share_name, log_prints=False)
async def path_share(kit: ShareKit, ship_every_s: float = SHIP_EVERY_S):
    """Score one path's share of a night on this host and ship its journal; the state's
    message says what became of the segment (`partial: ...`)."""
    logger = get_run_logger()
    home = host_dir()
    cfg = kit_config(kit, home)
    store = JournalStore(kit.store, home)
    key = JournalStore.key(cfg.experiment.name, kit.night.isoformat(), kit.path)
    journal = runner.journal_path(cfg, kit.night, kit.path)
    if await asyncio.to_thread(seed_journal, store, key, journal):
        logger.info("resuming from the stored journal of %s (newer than this host's)", kit.path)
    worker = os.environ.get("PREFECT__WORKER_NAME") or f"a worker of {cfg.paths[kit.path].work_pool}"
    work = replace(runner.plan_path(cfg, kit.night, kit.path), worker=worker)
    logger.info("scoring %s on this host (%s): %d of %d unit(s) left, journal %s", kit.path,
                worker, len(work.units), work.units_planned, journal)
    history = PriceHistory(pd.DataFrame(
        [(t, d, c) for t, rows in kit.closes.items() for d, c in rows],
        columns=["ticker", "date", "adj_close"]))
    deadline = None if kit.deadline_s is None else time.monotonic() + kit.deadline_s
    shipper = asyncio.create_task(_ship_while_running(store, key, journal, ship_every_s))
    try:
        outcome = await runner.run_path(cfg, kit.night, work, history, kit.missing,
                                        deadline_mono=deadline, max_draw=kit.max_draw)
    finally:
        shipper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await shipper
        if journal.exists():
            await asyncio.to_thread(store.put, journal, key)
    message = outcome.status + (f": {outcome.reason}" if outcome.reason else "")
    if outcome.status in ("complete", "nothing_to_do"):
        return Completed(message=message, data=asdict(outcome))
    return Failed(message=message, data=asdict(outcome))


# ---------------------------------------------------------------------------- parent side

def pooled(cfg: Config, names: list[str] | None = None) -> list[str]:
    """The paths (of `names`, default all) scored by a worker of their work pool."""
    return [n for n in names or list(cfg.paths) if n in cfg.paths and cfg.paths[n].work_pool]


def store_of(cfg: Config) -> JournalStore:
    """The configured journal store; a pooled path without one is a config mistake."""
    if not cfg.warehouse.journal_store:
        names = ", ".join(pooled(cfg))
        raise ConfigError(f"paths {names} are scored on other hosts (work_pool) but "
                          "[warehouse] journal_store is not set: set it to a folder every "
                          "host mounts (journal_store = \"/mnt/shared/dualpath-journals\") or "
                          "an fsspec URL (journal_store = \"s3://bucket/dualpath\")")
    return JournalStore(cfg.warehouse.journal_store, cfg.base_dir)


async def prepare_pools(cfg: Config, names: list[str], ship_every_s: float = SHIP_EVERY_S) -> None:
    """Before a night with pooled paths: the store works, every pool exists, each pool has
    the share deployment and the server crashes shares whose heartbeats stop."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    await asyncio.to_thread(store_of(cfg).check)
    pools = sorted({cfg.paths[n].work_pool for n in names})
    async with get_client() as client:
        for pool in pools:
            try:
                await client.read_work_pool(pool)
            except ObjectNotFound:
                users = [n for n in names if cfg.paths[n].work_pool == pool]
                raise ConfigError(
                    f"paths.{users[0]}.work_pool = {pool!r}: the Prefect server at "
                    f"{client.api_url} has no such work pool; create it (prefect work-pool "
                    f"create {pool} --type process) and start a worker on the path's host "
                    f"(prefect worker start --pool {pool}), or fix the name") from None
    for pool in pools:
        await ensure_share_deployment(pool, ship_every_s)
    await ensure_zombie_automation()


async def ensure_share_deployment(pool: str, ship_every_s: float = SHIP_EVERY_S,
                                  replace_existing: bool = False) -> str:
    """Register `dualpath-path-share/<pool>` (kept as it is when it exists, so a user's
    ship_every_s stays); returns its name."""
    from prefect.client.orchestration import get_client
    from prefect.deployments.runner import EntrypointType
    from prefect.exceptions import ObjectNotFound

    name = f"{SHARE_FLOW}/{pool}"
    if not replace_existing:
        async with get_client() as client:
            try:
                await client.read_deployment_by_name(name)
                return name
            except ObjectNotFound:
                pass
    deployment = await path_share.ato_deployment(
        name=pool, parameters={"ship_every_s": ship_every_s},
        entrypoint_type=EntrypointType.MODULE_PATH,
        description="One path's share of a dualpath night, scored on this pool's host.")
    await deployment.apply(work_pool_name=pool)
    return name


async def ensure_zombie_automation() -> None:
    """Prefect's own zombie detection, for path shares: a share whose flow-run heartbeats
    stop (its host or worker died) without a final state is marked Crashed after two
    missed heartbeats (PREFECT_FLOWS_HEARTBEAT_FREQUENCY, the same on every host)."""
    from prefect.automations import Automation
    from prefect.client.schemas.objects import StateType
    from prefect.events.actions import ChangeFlowRunState
    from prefect.events.schemas.automations import EventTrigger, Posture
    from prefect.settings import get_current_settings

    try:
        await Automation.aread(name=AUTOMATION)
        return
    except ValueError:        # none by that name yet
        pass
    beat = get_current_settings().flows.heartbeat_frequency or 180
    finals = {f"prefect.flow-run.{s}" for s in ("Completed", "Failed", "Cancelled",
                                                 "Crashed", "Cancelling")}
    trigger = EventTrigger(
        posture=Posture.Proactive, after={"prefect.flow-run.heartbeat"},
        expect={"prefect.flow-run.heartbeat", *finals},
        match={"prefect.resource.id": "prefect.flow-run.*"},
        match_related={"prefect.resource.role": "flow", "prefect.resource.name": SHARE_FLOW},
        for_each={"prefect.resource.id"}, threshold=1, within=timedelta(seconds=2 * beat))
    await Automation(
        name=AUTOMATION, description="A dualpath path share stopped sending heartbeats.",
        trigger=trigger,
        actions=[ChangeFlowRunState(state=StateType.CRASHED, force=True,
                                    message="the worker's host stopped sending heartbeats "
                                            "(it died or lost the network)")]).acreate()


def make_kit(cfg: Config, night: date, path: str, history: PriceHistory,
             missing: dict[str, str], deadline_s: float | None = None,
             max_draw: int | None = None) -> ShareKit:
    """What the worker's host needs tonight that only the parent has."""
    tickers = cfg.tickers()
    days = cfg.pipeline.history_days
    closes = {t: list(history.closes(t, night, days)) for t in tickers if t not in missing}
    docs_dir = cfg.resolve(cfg.pipeline.documents_dir) if cfg.pipeline.documents_dir else None
    documents = {t: d for t in tickers if (d := read_documents(docs_dir, t)) is not None}
    return ShareKit(config=cfg.model_dump(mode="json", exclude={"base_dir"}),
                    config_hash=cfg.fingerprint(), night=night, path=path, tickers=tickers,
                    closes=closes, missing=dict(missing), documents=documents,
                    store=cfg.warehouse.journal_store, deadline_s=deadline_s,
                    max_draw=max_draw)


def sync_journal(cfg: Config, night: date, path: str) -> bool:
    """Bring the path's shipped journal to where the parent's ingest reads it (the run
    folder, as for a local path). A journal this host kept from nights the path was scored
    here, with none shipped yet, goes to the store first, so its worker resumes it.
    Returns whether there is a journal."""
    store = store_of(cfg)
    key = JournalStore.key(cfg.experiment.name, night.isoformat(), path)
    local = runner.journal_path(cfg, night, path)
    with _SYNC:     # the mid-night look and the share's end must not swap their copies
        data = store.read(key)
        if data is None:
            if local.exists():
                store.put(local, key)
            return local.exists()
        # journals only grow: a copy read before a later shipment never replaces it
        if not local.exists() or len(data) > local.stat().st_size:
            write_atomic(local, data)
        return True


async def run_share_on_pool(cfg: Config, night: date, work: runner.PathWork, history: PriceHistory,
                      missing: dict[str, str], deadline_mono: float | None = None,
                      max_draw: int | None = None,
                      start_timeout_s: float = START_TIMEOUT_S) -> runner.PathOutcome:
    """Run the path's share on a worker of its pool and wait for it; the shipped journal is
    then in the parent's run folder. A share that did not finish is a failed outcome with
    the reason; when nothing was shipped, the failure is recorded here."""
    from prefect.deployments import run_deployment

    if not work.units:      # every unit is measured in what was shipped
        return runner.PathOutcome(work.path, work.run_id, "nothing_to_do")
    pool = cfg.paths[work.path].work_pool
    left = None if deadline_mono is None else max(0.0, deadline_mono - time.monotonic())
    kit = make_kit(cfg, night, work.path, history, missing, left, max_draw)
    run = await run_deployment(f"{SHARE_FLOW}/{pool}", parameters={"kit": kit},
                               timeout=0, tags=["dualpath"])
    get_run_logger().info("path %s: share sent to work pool %s (flow run %s)", work.path,
                          pool, run.name)
    try:
        state = await _wait(run.id, pool, start_timeout_s)
    except asyncio.CancelledError:     # the night was interrupted: stop its share there too
        await asyncio.shield(_cancel(run.id, "the nightly flow that sent it was interrupted"))
        raise
    have = await asyncio.to_thread(sync_journal, cfg, night, work.path)
    status, _, reason = (state.message or "").partition(": ")
    if state.is_completed() and status in _STATUSES:
        return runner.PathOutcome(work.path, work.run_id, status, reason or None)
    if state.is_failed() and status in _STATUSES:
        return runner.PathOutcome(work.path, work.run_id, status, reason or None)
    why = (f"its share on work pool {pool} ended {state.type.value}: {state.message or '-'}; "
           "rerun the night to resume")
    if not have:
        await asyncio.to_thread(runner.record_failure, cfg, night, work, why)
    return runner.PathOutcome(work.path, work.run_id, "failed", why)


async def _cancel(run_id, why: str) -> None:
    """Ask the worker to stop the share (Prefect kills its process); best effort."""
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelling

    with contextlib.suppress(Exception):
        async with get_client() as client:
            await asyncio.wait_for(client.set_flow_run_state(run_id, Cancelling(message=why)),
                                   10)


async def _wait(run_id, pool: str, start_timeout_s: float):
    """The share's final state. One that no worker starts within `start_timeout_s` is
    cancelled, and its state says which pool needs a worker."""
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled

    began = time.monotonic()
    async with get_client() as client:
        while True:
            run = await client.read_flow_run(run_id)
            if run.state is not None and run.state.is_final():
                return run.state
            waiting = run.state is None or run.state.is_scheduled() or run.state.is_pending()
            if waiting and time.monotonic() - began > start_timeout_s:
                why = (f"no worker of pool {pool} started it within {start_timeout_s:.0f} s: "
                       f"start one on the path's host (prefect worker start --pool {pool})")
                await client.set_flow_run_state(run_id, Cancelled(message=why), force=True)
                return Cancelled(message=why)
            await asyncio.sleep(POLL_S)
