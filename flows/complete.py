"""Whether a night is already done: a rerun of a night complete on every path has nothing to
score, and says so before Prefect or any server starts (it took 26-34 s to score nothing)."""

from __future__ import annotations

from datetime import date

from dualpath.config import Config


def complete_night(cfg: Config, night: date, paths: list[str] | None = None) -> list[str] | None:
    """The paths (every path of the config, or `paths`) when each one's run of `night` is
    stored `complete` under this config; else None: a path with units left, a run not yet
    stored, or one scored under another config (the night itself then says which)."""
    wanted = list(paths or cfg.paths)
    db = cfg.resolve(cfg.warehouse.path)
    if not wanted or not db.exists():
        return None
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.queries import night_runs

    with reader(db) as con:
        stored = night_runs(con, cfg.experiment.name, night)
    done = ("complete", cfg.fingerprint())
    return wanted if all(stored.get(p) == done for p in wanted) else None
