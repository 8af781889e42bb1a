"""Small real projects for tests: a config on disk, prices imported, simulated paths."""

from __future__ import annotations

import asyncio
from pathlib import Path

from dualpath.demo import demo_config_data
from dualpath.sim.fleet import SimFleet
from dualpath.flows import inputs, runner
from dualpath.warehouse.db import writer
from dualpath.warehouse.ingest import ingest_journals
from dualpath.warehouse.journal import read_journal
from dualpath.flows.demo import synthetic_project


def make_project(root: Path, tickers: int = 6, draws: int = 2, nights: int = 2,
                 clock: float = 0.01, **overrides):
    data = demo_config_data(root, tickers, draws, clock)
    for section, values in overrides.items():
        data[section].update(values)
    cfg_path, cfg, market, _ = synthetic_project(root, data, nights)
    return cfg_path, cfg, market.nights(nights)


def score_night_plain(cfg, night, urls, stop_after_units: int | None = None):
    """Plan and score every path into its journal; returns the works. With
    `stop_after_units`, each path is cut (its task cancelled, as an interrupt does) once it
    has measured that many more units, whatever the other paths have done: a cut on the
    paths' total could leave the slower path with nothing measured, and such a run is
    rightly `failed`, not `partial`; waiting for it instead let the faster path finish."""
    works = runner.plan_night(cfg, night)
    history = inputs.price_history(cfg)
    missing = inputs.missing_inputs(cfg, history, night)

    def measured(w) -> int:
        return len(read_journal(w.journal, skip_calls=True).measured_units())

    async def go():
        before = {w.path: measured(w) for w in works}
        tasks = {w.path: asyncio.create_task(runner.run_path(cfg, night, w, history, missing,
                                                             override_url=urls[w.path]))
                 for w in works}
        if stop_after_units is None:
            return await asyncio.gather(*tasks.values())
        going = list(works)
        while going:
            await asyncio.sleep(0.005)
            for w in list(going):
                if tasks[w.path].done() or measured(w) - before[w.path] >= stop_after_units:
                    tasks[w.path].cancel()
                    going.remove(w)
        await asyncio.gather(*tasks.values(), return_exceptions=True)

    asyncio.run(go())
    return works


def ingest(cfg, works):
    """Ingest the works' journals as the flow does."""
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        return ingest_journals(con, [w.journal for w in works if w.journal.exists()])


__all__ = ["make_project", "score_night_plain", "ingest", "SimFleet"]
