"""`dualpath demo`: a fresh demo folder, synthetic prices, N nights through the nightly flow."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from prefect.exceptions import TerminationSignal

from dualpath.config import dump_toml, load_config
from dualpath.demo import demo_config_data, demo_market
from dualpath.errors import UserError
from dualpath.sim.fleet import SimFleet
from dualpath.flows.nightly import ingest_night, nightly_local, run_cancellable
from dualpath.prereg import draft_plan, plan_toml, testability
from dualpath.prereg_design import reassurance_problems
from dualpath.flows.prereg import freeze_plan
from dualpath.flows.runner import plan_night
from dualpath.flows.weekly import write_report
from dualpath.warehouse.db import reader, writer
from dualpath.warehouse.prices import import_prices, validate_prices
from dualpath.evals.speed import path_totals, with_speed
from dualpath.warehouse.queries import run_summaries


@dataclass
class DemoResult:
    config: Path
    warehouse: Path
    totals: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    not_complete: list[str] = field(default_factory=list)
    report: Path | None = None
    verdict: object = None                 # evals.verdict.PrimaryVerdict of the report
    runs: int = 0
    starved: list[str] = field(default_factory=list)   # run ids the harness starved
    metrics: object = None                 # the report's metrics and headline: the demo
    headline: object = None                # prints them, not a second study of the same nights


MARKER = ".dualpath-demo"


def fresh_demo_folder(root: Path) -> None:
    """Empty `root` for a new demo; only a folder a previous demo made (it holds the marker
    file) is ever cleared, so a mistyped --root cannot delete someone's files."""
    root = root.resolve()
    if root.exists():
        if not root.is_dir():
            raise UserError(f"--root {root} is a file; give a folder for the demo")
        if any(root.iterdir()):
            if not (root / MARKER).exists():
                raise UserError(f"--root {root} is not empty and was not made by `dualpath "
                                "demo` (no .dualpath-demo marker); give a new or empty folder")
            shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("made by `dualpath demo`; the next demo here clears it\n")


def synthetic_project(root: Path, data: dict, nights: int, header: str = ""):
    """`data` written as `root`/dualpath.toml, with its synthetic market's prices for
    `nights` imported: (config path, config, market, price warnings). The demo, the tests'
    projects and the fault lab start from it."""
    cfg_path = root / "dualpath.toml"
    cfg_path.write_text(header + dump_toml(data) + "\n")
    cfg = load_config(cfg_path)
    market = demo_market(cfg, nights)
    raw = market.prices()
    raw = raw[raw["ticker"].isin(cfg.tickers())]
    prices, warnings = validate_prices(raw, cfg.tickers(), "synthetic market")
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        import_prices(con, prices)
    return cfg_path, cfg, market, warnings


def run_demo(root: Path, nights: int, tickers: int, draws: int, clock: float,
             bars=None, path_bars=None, api_ready=None) -> DemoResult:
    """Fresh demo folder, prices imported, then `nights` nights through the nightly flow.
    `api_ready()`: waits for a Prefect server started beforehand (`flows.prefect_api.EarlyAPI`)."""
    fresh_demo_folder(root)
    cfg_path, cfg, market, warnings = synthetic_project(
        root, demo_config_data(root, tickers, draws, clock), nights,
        header="# written by `dualpath demo`\n")
    # both simulated servers start now, side by side, while the plan is drafted and frozen
    fleet = SimFleet(cfg).spawn()
    try:
        return _plan_and_score(root, cfg_path, cfg, market, warnings, nights, fleet, bars,
                               path_bars, api_ready)
    finally:
        fleet.close()


def _plan_and_score(root, cfg_path, cfg, market, warnings, nights, fleet, bars, path_bars,
                    api_ready) -> DemoResult:
    nights_list = market.nights(nights, max(cfg.experiment.horizons))
    # preregistered before night 1, as the real study is
    # sized by its power: the primary the window can test best (h = 1 here) and a margin it
    # can show under the assumed noise; a demo too short for any test says so in its report
    plan = draft_plan(cfg, nights_list[0], len(nights_list))
    plan_path = root / "prereg.toml"
    plan_path.write_text(plan_toml(plan))
    # a demo's window is short: its RankIC primary cannot reassure, so it is frozen the way
    # a user's would have to be, with --force and the reason printed
    why = testability(plan) + reassurance_problems(plan)
    reason = f"a {len(nights_list)}-night demo: " + "; ".join(why) if why else None
    freeze_plan(cfg, plan_path, force=bool(why), reason=reason)
    freeze_notes = [f"plan frozen with --force --reason '{reason}'"] if why else []
    overall = bars.add_task("nights", total=nights, what="") if bars else None
    t0 = time.monotonic()
    current: dict = {}

    async def all_nights() -> list[str]:
        not_complete = []
        for night in nights_list:
            current["night"] = night
            if path_bars is not None:
                path_bars.reset(str(night), list(cfg.paths),
                                {p.path: p.units_planned for p in plan_night(cfg, night)})
            state = await nightly_local(str(cfg_path), night, endpoints=fleet.urls,
                                  progress=path_bars, return_state=True)
            if not state.is_completed():
                not_complete.append(f"{night}: {state.message}")
            if bars is not None:
                bars.update(overall, advance=1, what=f"nights · {time.monotonic() - t0:.0f} s")
        return not_complete

    # Ctrl-C and SIGTERM cancel the night in progress as they do `dualpath nightly`'s (its
    # journals closed, each segment's end record saying interrupted); it was a bare
    # asyncio.run: the warehouse kept the night's last mid-night snapshot, its runs read
    # `running` (then "stopped, killed, or its host crashed"), and SIGTERM ingested nothing
    try:
        with fleet, quiet_cancel_crashes():
            if api_ready is not None:
                api_ready()
            not_complete = run_cancellable(all_nights)
    except (KeyboardInterrupt, TerminationSignal):
        if "night" in current:       # its closed journals: its runs read partial, and why
            ingest_night(cfg, current["night"])
        raise KeyboardInterrupt from None
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        summary = run_summaries(con)
    summary = summary[summary["run_id"].str.startswith(f"{cfg.experiment.name}/")]
    totals = path_totals(with_speed(summary))
    html, _, data = write_report(cfg, root / "reports")
    return DemoResult(cfg_path, cfg.resolve(cfg.warehouse.path), totals,
                      list(warnings) + freeze_notes, not_complete, html, data.verdict,
                      len(summary), starved_runs(summary), metrics=data.metrics,
                      headline=data.headline)


class _CancelCrash(logging.Filter):
    """Drops Prefect's "Crash detected! Execution was cancelled by the runtime environment."
    (and its "Finished in state Crashed(...)"): in the demo only an interrupt cancels a night,
    and the demo's own line says so. One Ctrl-C printed four of them above that line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "cancelled by the runtime environment" not in record.getMessage()


@contextlib.contextmanager
def quiet_cancel_crashes():
    loggers = [logging.getLogger(n) for n in ("prefect.flow_runs", "prefect.task_runs")]
    quiet = _CancelCrash()
    for lg in loggers:
        lg.addFilter(quiet)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(quiet)


def starved_runs(summary: pd.DataFrame) -> list[str]:
    """Run ids whose disturbance is the harness starving the server (`warehouse.disturbed`):
    on the demo, its own machine was too busy for the compressed clock."""
    why = summary["disturbed"].fillna("")
    return list(summary.loc[why.str.contains(r"(?:^|; )starved: "), "run_id"])
