"""`dualpath candidate`: a candidate path scored on past nights from their frozen inputs.

The candidate's runs are an experiment of their own (`<experiment>.candidate.<name>`), so
they never count as nights of the preregistered study; each night goes through the same
`flows.runner` functions as a night of the study (its lock, config binding, identity check,
scheduler, telemetry and journal, then ingest), handed the night's frozen inputs
(`warehouse.unit_inputs`) in place of the warehouse's prices. A rerun resumes: each night's
journal keeps what was measured.

Its draws are fresh: its seeds derive from a base seed of its own, never the reference's,
since a deterministic server handed the reference's seeds would repeat its answers and the
agreement test would read a replay as agreement.
"""

from __future__ import annotations

import time
import tomllib
import zlib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Callable

from dualpath.config import Config
from dualpath.config_paths import ServingPath
from dualpath.errors import UserError
from dualpath.flows import runner
from dualpath.frozen import FrozenHistory
from dualpath.warehouse.db import reader, writer

TAG = ".candidate."


def candidate_experiment(experiment: str, name: str) -> str:
    """Where a candidate's runs are stored: never the study's experiment."""
    out = f"{experiment}{TAG}{name}"
    if len(out) > 64:
        raise UserError(f"experiment '{experiment}' with candidate '{name}' makes a name of "
                        f"{len(out)} characters (at most 64); give the candidate a shorter name")
    return out


def read_candidate(cfg: Config, spec: str) -> tuple[str, ServingPath, dict]:
    """A path of the config by name, or a TOML file holding one [paths.NAME] table (the
    schema of a config's path) and, optionally, a [sampling] table of what it changes
    (e.g. thinking = "on"): (name, settings, sampling changes)."""
    if spec in cfg.paths:
        return spec, cfg.paths[spec], {}
    f = Path(spec)
    if not f.is_file():
        raise UserError(f"candidate {spec!r} is neither a path of the config "
                        f"({', '.join(cfg.paths)}) nor a TOML file; write its settings as "
                        "one [paths.NAME] table in a file and give the file")
    try:
        doc = tomllib.loads(f.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{f}: not valid TOML ({e})") from None
    tables, sampling = doc.get("paths", {}), doc.get("sampling", {})
    other = sorted(set(doc) - {"paths", "sampling"})
    if other:
        raise UserError(f"{f}: only [paths.NAME] and [sampling] belong in a candidate's file, "
                        f"not {', '.join(other)}")
    if len(tables) != 1:
        raise UserError(f"{f}: needs exactly one [paths.NAME] table (the candidate), found "
                        f"{len(tables)}")
    name, table = next(iter(tables.items()))
    from pydantic import ValidationError

    from dualpath.config import Sampling
    for section, model, data in ((f"paths.{name}", ServingPath, table),
                                 ("sampling", Sampling, {**cfg.sampling.model_dump(),
                                                         **sampling})):
        try:
            model.model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"])
            raise UserError(f"{f}: {section}.{where}: {first['msg']}") from None
    return name, ServingPath.model_validate(table), sampling


def candidate_seed(cfg: Config, name: str, seed: int | None = None) -> int:
    """The candidate's base seed: given, else derived from its name; never the reference's."""
    s = seed if seed is not None else cfg.sampling.base_seed + 1 + zlib.crc32(name.encode())
    return s + 1 if s == cfg.sampling.base_seed else s


def candidate_config(cfg: Config, name: str, sp: ServingPath, draws: int,
                     seed: int | None = None, sampling: dict | None = None) -> Config:
    """The config a candidate's nights run under: the study's, with only the candidate's
    path, its draws, its sampling changes, its own seeds and its own experiment name."""
    from dualpath.config import Sampling

    exp = cfg.experiment.model_copy(update={"name": candidate_experiment(
        cfg.experiment.name, name), "draws": draws})
    samp = Sampling.model_validate({**cfg.sampling.model_dump(), **(sampling or {}),
                                    "base_seed": candidate_seed(cfg, name, seed)})
    return cfg.model_copy(update={
        "experiment": exp, "paths": {name: sp.model_copy(update={"draws": None})},
        "sampling": samp})


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out |= _flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v}
    return out


def settings_of(cfg: Config, path: str) -> dict:
    """What a path does, as flat keys: its settings and the sampling it is sent (not the
    seed, which differs on purpose, nor its draws, which the sitting sets)."""
    sp = cfg.paths[path].model_dump(mode="json", exclude={"draws"})
    samp = cfg.sampling.model_dump(mode="json", exclude={"base_seed"})
    return _flat({"paths": sp, "sampling": samp})


def differences(reference: dict, candidate: dict) -> list[str]:
    """Each setting the candidate changes: 'sampling.thinking off → on' (`settings_of`)."""
    keys = sorted(set(reference) | set(candidate))
    return [f"{k} {reference.get(k)} → {candidate.get(k)}" for k in keys
            if reference.get(k) != candidate.get(k)]


def past_nights(cfg: Config, reference: str) -> tuple[list[date], list[date]]:
    """(nights whose reference run is complete and whose inputs were frozen, the study's
    nights that kept no frozen inputs)."""
    from dualpath.warehouse.frames import runs_frame
    from dualpath.warehouse.unit_inputs import frozen_nights, nights_without_inputs

    exp = cfg.experiment.name
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        runs = runs_frame(con, exp, paths=[reference])
        frozen = frozen_nights(con, exp)
        lacking = nights_without_inputs(con, exp)
    done = {d.date() for d in runs.loc[runs["status"] == "complete", "night"]}
    return sorted(n for n in frozen if n in done), lacking


class SittingProgress:
    """Progress over every night of the sitting, with an ETA from this sitting's own pace
    (units done since it started, not a model): `say(line)` at most every `every_s`."""

    def __init__(self, total: int, done_before: int, say: Callable[[str], None],
                 every_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.total, self.before, self.say, self.every = total, done_before, say, every_s
        self.clock, self.t0, self.last = clock, clock(), -1e9
        self.finished = 0          # units of this sitting's nights already closed
        self.current = 0

    def next_night(self) -> None:
        self.finished += self.current
        self.current = 0

    def __call__(self, path: str, done: int, total: int, calls: int) -> None:
        self.current = done
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self.say(self.line())

    def line(self) -> str:
        here = self.finished + self.current
        done = self.before + here
        left = max(self.total - done, 0)
        elapsed = self.clock() - self.t0
        eta = ("nothing left" if not left else f"ETA {elapsed / here * left:.0f} s" if here
               else "ETA after the first unit")
        return f"{done}/{self.total} units, {elapsed:.0f} s this sitting, {eta}"


async def score_nights(cfg: Config, cfg_c: Config, name: str, nights: list[date],
                       config_path: Path | None, url: str | None,
                       progress: SittingProgress | None = None) -> list[runner.PathOutcome]:
    """Each night scored on the candidate from the study's frozen inputs, journaled and
    ingested into the candidate's experiment; a night already measured is nothing to do."""
    from dualpath.warehouse.ingest import ingest_journals
    from dualpath.warehouse.unit_inputs import frozen_inputs

    out = []
    for night in nights:
        with reader(cfg.resolve(cfg.warehouse.path)) as con:
            frozen = frozen_inputs(con, cfg.experiment.name, night)
        tickers = [t for t in cfg.tickers() if t in frozen]
        with runner.hold_night(cfg_c, night):
            runner.claim_night(cfg_c, night, config_path)
            work = runner.plan_path(cfg_c, night, name, tickers)
            outcome = await runner.run_path(cfg_c, night, work, FrozenHistory(night, frozen),
                                            {}, override_url=url, progress=progress)
            with writer(cfg.resolve(cfg.warehouse.path)) as con:
                ingest_journals(con, [work.journal] if work.journal.exists() else [])
        if progress is not None:
            progress.next_night()
        out.append(outcome)
    return out


def units_done(cfg_c: Config, name: str, nights: list[date]) -> int:
    """Units the candidate's journals already hold measured (a resumed sitting)."""
    from dualpath.warehouse.journal import read_journal

    return sum(len(read_journal(runner.journal_path(cfg_c, n, name)).measured_units())
               for n in nights)


def record_candidate(cfg: Config, cfg_c: Config, name: str, reference: str) -> None:
    from dualpath.warehouse.candidates import record

    import orjson

    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        record(con, cfg_c.experiment.name, cfg.experiment.name, name, reference,
               cfg_c.experiment.draws, cfg_c.sampling.base_seed,
               orjson.dumps(settings_of(cfg_c, name)).decode())


def run_candidate(cfg: Config, cfg_c: Config, name: str, reference: str, nights: list[date],
                  config_path: Path | None, say: Callable[[str], None] = lambda s: None,
                  every_s: float = 10.0) -> list[runner.PathOutcome]:
    """Score the candidate on `nights` (a simulated one on its own server, started once)."""
    import asyncio

    from dualpath.sim.fleet import SimFleet

    record_candidate(cfg, cfg_c, name, reference)
    total = len(nights) * len(cfg.tickers()) * cfg_c.experiment.draws
    progress = SittingProgress(total, units_done(cfg_c, name, nights), say, every_s)
    sp = cfg_c.paths[name]
    simulated = sp.engine == "sim" and sp.base_url is None
    with SimFleet(cfg_c) if simulated else _nothing() as fleet:
        url = fleet.urls.get(name) if simulated else None
        outcomes = asyncio.run(score_nights(cfg, cfg_c, name, nights, config_path, url,
                                            progress))
    say(progress.line())
    return outcomes


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return None
