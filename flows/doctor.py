"""`dualpath doctor`: every check a night depends on, one line each, with the fix.

Unlike `dualpath check` (offline: the config alone), the doctor contacts the servers, the
warehouse and the Prefect API.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import httpx

from dualpath.config import Config
from dualpath.engines import engine
from dualpath.engines.proof import engine_mismatch
from dualpath.errors import DualpathError
from dualpath.identity import auth_headers, differences, read_identity
from dualpath.records import ServerIdentity


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    note: bool = False      # worth saying, neither a pass nor a failure (shown with –)


async def _path_checks(cfg: Config, name: str, largest_prompt: int | None) -> list[Check]:
    sp = cfg.paths[name]
    out = []
    if sp.launch:
        prog = sp.launch[0]
        found = prog.startswith("{") or shutil.which(prog) or os.path.exists(prog)
        out.append(Check(f"{name}: launch program", bool(found), prog,
                         "install it or fix paths.%s.launch[0]" % name))
        # what the launch will make the server report, before it runs
        from dualpath.launch_args import pin_disagreements
        clash = pin_disagreements(sp)
        out.append(Check(f"{name}: expect vs launch argv", not clash, "; ".join(clash) or
                         "every pin agrees with what the argv gives (`dualpath doctor "
                         "--launch` checks the running server)", "write the values named"))
        out += _pinned_advice(cfg, name, None)
    out += gpu_checks(cfg, name)
    if sp.engine == "sim" and not sp.base_url:
        out.append(Check(f"{name}: server", True, "simulated, started by each night"))
        return out
    try:
        from dualpath.night import api_key
        headers = auth_headers(api_key(cfg, name))
    except DualpathError as e:
        return out + [Check(f"{name}: API key", False, str(e), "export the variable")]
    async with httpx.AsyncClient(headers=headers, timeout=5.0) as http:
        try:
            seen = await read_identity(http, sp.base_url, sp.dialect)
        except DualpathError as e:
            if sp.launch:     # not running now is expected: the night launches it
                return out + [Check(f"{name}: reachable", True, f"not running now; the night "
                                    f"launches it ({sp.base_url})")]
            return out + [Check(f"{name}: reachable", False, f"{sp.base_url}: {e}",
                                "start the server, or fix base_url")]
        wrong = await engine_mismatch(http, sp.base_url, sp.dialect)
    runs_on = f", {seen.backend} on {seen.device}" if seen.backend else ""   # read on this host
    out.append(Check(f"{name}: reachable", True,
                     f"{sp.base_url} ({seen.model}, {seen.build}{runs_on})"))
    if wrong is not None:       # its pins were read in the wrong engine's dialect
        return out + [Check(f"{name}: engine", False, wrong,
                            f"fix paths.{name}.engine or its base_url")]
    diffs = differences(seen, sp.expect)
    out.append(Check(f"{name}: identity", not diffs, "; ".join(diffs) or "matches expect",
                     f"fix the server or [paths.{name}.expect]"))
    if not sp.launch:
        out += _pinned_advice(cfg, name, seen)
    if seen.n_ctx_per_slot and largest_prompt:
        need = largest_prompt + cfg.sampling.max_tokens
        out.append(Check(f"{name}: context per slot", seen.n_ctx_per_slot >= need,
                         f"{seen.n_ctx_per_slot} tokens; the largest prompt so far "
                         f"({largest_prompt}) + max_tokens needs {need}",
                         engine(sp.dialect).facts.context_fix))
    return out


def gpu_checks(cfg: Config, name: str, drm_root=None) -> list[Check]:
    """The path's GPUs read through the telemetry readers: what each is (a note), a link
    narrower than its maximum (a warning note), and `[paths.X.expect.gpu]` (✗ when it
    differs, or when it is pinned and the GPUs cannot be read)."""
    from dualpath.telemetry import NoCounters
    from dualpath.telemetry.gpu_identity import (gpu_differences, gpu_line, narrow_links,
                                                 pinned_text, read_gpus, unknown_gpu)

    sp = cfg.paths[name]
    pin = sp.expect.gpu
    try:
        readings = read_gpus(sp, sp.base_url, drm_root=drm_root or cfg.telemetry.drm_root())
    except NoCounters as e:
        if pinned_text(pin) is None:
            return [Check(f"{name}: GPU", True, unknown_gpu(str(e)), note=True)]
        return [Check(f"{name}: GPU", False, f"{unknown_gpu(str(e))}; pinned: "
                      f"{pinned_text(pin)}", "run doctor on the GPU's host, or remove "
                      f"[paths.{name}.expect.gpu]")]
    out = [Check(f"{name}: GPU {r.info.index}", True, gpu_line(r), note=True) for r in readings]
    out += [Check(f"{name}: PCIe link", True, f"warning: {w}", note=True)
            for w in narrow_links(readings)]
    if pinned_text(pin) is not None:
        diffs = gpu_differences(readings, pin, name)
        out.append(Check(f"{name}: GPU identity", not diffs, "; ".join(diffs) or
                         f"matches expect.gpu ({pinned_text(pin)})",
                         f"fix the GPU or [paths.{name}.expect.gpu] as each line says"))
    return out


def _pinned_advice(cfg: Config, name: str, seen: ServerIdentity | None) -> list[Check]:
    """What the path's server does that costs a night whose units are pinned to its slots
    (llama-server's RAM prompt cache), from its launch argv or its running process."""
    sp = cfg.paths[name]
    lines = engine(sp.dialect).pinned_advice(sp.launch, dict(sp.launch_env),
                                             sp.pins_slots(cfg.experiment.prefix_affinity), seen)
    return [Check(f"{name}: slots pinned", True, line, note=True) for line in lines]


def _warehouse_checks(cfg: Config) -> tuple[list[Check], dict[str, int]]:
    from dualpath.errors import DiskFull, WarehouseDamaged
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.experiment import largest_prompts, last_night_statuses
    from dualpath.warehouse.migrations import MIGRATIONS, applied as applied_migrations

    path = cfg.resolve(cfg.warehouse.path)
    folder = path.parent if path.parent.exists() else cfg.base_dir
    free_gb = shutil.disk_usage(folder).free / 1e9
    out = [Check("disk: free space", free_gb >= 2, f"{free_gb:.1f} GB free at {folder}",
                 "free space: a night of 100 tickers writes ~40 MB of journal")]
    if not path.exists():
        return out + [Check("warehouse", True, f"{path} does not exist yet (made by the first "
                            "night)")], {}
    try:
        with reader(path) as con:
            applied = applied_migrations(con)
            last = last_night_statuses(con, cfg.experiment.name)
            largest = largest_prompts(con)
    except (WarehouseDamaged, DiskFull) as e:    # diagnosed, not crashed on
        fix = ("free space on that disk" if isinstance(e, DiskFull) else
               "dualpath rebuild -c CONFIG (from the journals; the damaged file is kept)")
        return out + [Check("warehouse", False, str(e).split("; ")[0], fix)], {}
    pending = [n for n, _ in MIGRATIONS if n not in applied]
    out += _price_and_parity_checks(cfg, path)
    out.append(Check("warehouse: migrations", not pending,
                     "current" if not pending else f"pending: {pending}",
                     "run any command that writes (e.g. `dualpath nightly`) to migrate"))
    if last:
        out.append(Check("last night", "partial" not in last[1] and "failed" not in last[1],
                         f"{last[0]}: {last[1]}", "see `dualpath runs`; rerun that night"))
    return out, largest


def _price_and_parity_checks(cfg: Config, path) -> list[Check]:
    """Prices fresh for the next night to score; the paths sampling alike last time."""
    from datetime import datetime, timezone

    from dualpath.calendar import MarketCalendar
    from dualpath.flows.report import run_warnings
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.freshness import freshness

    cal = MarketCalendar.from_settings(cfg.market)
    night = cal.default_night(datetime.now(timezone.utc))
    with reader(path) as con:
        if cfg.market.synthetic_seed is not None:
            # the demo's market: its prices are generated before its first night, on its own
            # dates, so today's date says nothing about them (it read ✗ after `make demo`)
            fresh = Check("prices", True, "synthetic market: prices generated with the nights")
        else:
            try:
                f = freshness(con, cfg.tickers(), night, cal)
                fresh = Check(f"prices for {night}", f.ok, "; ".join(f.messages),
                              "dualpath prices update (or import the missing days)")
            except DualpathError as e:
                fresh = Check(f"prices for {night}", False, str(e), "dualpath prices update")
        drift = [w for w in run_warnings(con) if "sampled differently" in w]
    return [fresh, Check("sampling parity", not drift, drift[-1] if drift else
                         "the paths applied the same sampling on their last nights",
                         "send the same [sampling] to both; see `dualpath runs`")]


def _deployments_check(cfg: Config, config_path, listed: list[tuple[str, dict]]) -> Check:
    """This experiment's deployments exist and each runs this config (none crossed)."""
    from dualpath.flows.deploy import crossings

    where = str(Path(config_path).resolve()) if config_path else None
    good, problems = crossings(listed, cfg.experiment.name, where or "")
    if where is None:       # no config file to compare with: names only
        good, problems = [n for n, _ in listed if n.endswith(f"-{cfg.experiment.name}")], []
    ok = any(n.startswith("dualpath-nightly/") for n in good) and not problems
    fix = (f"redeploy from the config each names, or `dualpath deploy -c {config_path} "
           "--replace`" if problems else
           f"dualpath deploy -c {config_path or 'dualpath.toml'} (or dualpath serve)")
    return Check("prefect: deployments", ok, "; ".join(problems) or ", ".join(good) or
                 f"none for experiment {cfg.experiment.name!r}", fix)


async def _prefect_checks(cfg: Config, config_path=None) -> list[Check]:
    api = os.environ.get("PREFECT_API_URL")
    pools = sorted({p.work_pool for p in cfg.paths.values() if p.work_pool})
    if not api and not pools:
        # `dualpath nightly` runs each night on a temporary server without it (exit 1 here
        # said otherwise); only a schedule needs one
        return [Check("prefect: API", True, "PREFECT_API_URL is not set: each night runs on "
                      "a temporary Prefect server, as the demo's do; a schedule (dualpath "
                      "deploy or serve) needs a server: prefect server start; export "
                      "PREFECT_API_URL=http://127.0.0.1:4200/api", note=True)]
    if not api:
        return [Check("prefect: API", False, f"PREFECT_API_URL is not set, and work pool(s) "
                      f"{pools} are reached only through a Prefect server",
                      "prefect server start; export PREFECT_API_URL=http://127.0.0.1:4200/api")]
    from prefect.client.orchestration import get_client

    try:
        async with get_client() as c:
            await c.api_healthcheck()
            deps = await c.read_deployments()
            flows = {f.id: f.name for f in await c.read_flows()}
            listed = [(f"{flows.get(d.flow_id, '?')}/{d.name}", d.parameters) for d in deps]
            pools = {d.work_pool_name for d in deps if d.work_pool_name}
            workers = [w for p in pools for w in await c.read_workers_for_work_pool(p)]
    except Exception as e:
        return [Check("prefect: API", False, f"{api}: {type(e).__name__}: {e}",
                      "start the server or fix PREFECT_API_URL")]
    return [Check("prefect: API", True, api),
            _deployments_check(cfg, config_path, listed),
            Check("prefect: worker", bool(workers) or not pools,
                  f"{len(workers)} worker(s) on {sorted(pools)}",
                  "prefect worker start --pool dualpath (or dualpath serve)")]


def doctor(cfg: Config, night: date | None = None, config_path=None) -> list[Check]:
    """Every check, in order: paths, warehouse, Prefect."""
    wh, largest = _warehouse_checks(cfg)

    async def run() -> tuple[list[Check], list[Check]]:
        checks = []
        for name in cfg.paths:
            checks += await _path_checks(cfg, name, largest.get(name))
        return checks, await _prefect_checks(cfg, config_path)
    paths, prefect = asyncio.run(run())
    return paths + wh + prefect
