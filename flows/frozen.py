"""The night's unit inputs frozen into the warehouse before any call (`warehouse.unit_inputs`),
built by the same calls the scheduler's input function makes, so the stored input is the one
the pipeline is handed."""

from __future__ import annotations

from datetime import date

from dualpath.config import Config
from dualpath.frozen import FrozenInput
from dualpath.pipeline import read_documents
from dualpath.warehouse.db import writer
from dualpath.warehouse.unit_inputs import freeze


def night_inputs(cfg: Config, night: date, history, tickers: list[str],
                 missing: dict[str, str]) -> list[FrozenInput]:
    """Each scoreable ticker's input tonight, as `dualpath.night.path_runner` builds it."""
    docs_dir = cfg.resolve(cfg.pipeline.documents_dir) if cfg.pipeline.documents_dir else None
    days = cfg.pipeline.history_days
    return [FrozenInput(t, night, history.closes(t, night, days), read_documents(docs_dir, t))
            for t in tickers if t not in missing]


def freeze_night(cfg: Config, night: date, history, tickers: list[str],
                 missing: dict[str, str]) -> int:
    """Store tonight's inputs (one short write); returns how many ticker-nights are new."""
    frozen = night_inputs(cfg, night, history, tickers, missing)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        return freeze(con, cfg.experiment.name, frozen)
