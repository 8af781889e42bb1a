"""A small warehouse with every number fixed: for tests that compare whole outputs.

Rows are written directly (no server, no clock), so seconds, grades and counts are the same
on every machine. Grades follow the synthetic market's planted signal through a seeded
generator; the main path's real-scale seconds per ticker are 60 + night % 3, the backup's
345 + 2 × (night % 4); the last night's backup run is partial (shown, never a result).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from dualpath.config import load_config
from dualpath.market import SyntheticMarket
from tests.helpers import make_project
from dualpath.warehouse.db import writer

SPEED = {"main": lambda i: 60.0 + i % 3, "backup": lambda i: 345.0 + 2 * (i % 4)}
SLOTS = {"main": 8, "backup": 4}
# board watts while scoring and the idle floor: J/ticker = W × s/ticker (modelled seconds)
POWER = {"main": 520.0, "backup": 190.0}
IDLE = {"main": 70.0, "backup": 30.0}


# Each shape is built once per test process and copied into each test's folder (the files
# hold no path of their own: the config's are relative): a build took ~1.2 s on a loaded
# 2-core machine, a copy a few milliseconds.
_BUILT: dict[tuple[int, int, int], tuple[Path, list]] = {}


def seed_warehouse(root: Path, tickers: int = 8, nights: int = 10, draws: int = 2):
    """(config path, config, nights) of a warehouse holding `nights` nights on both paths."""
    key = (tickers, nights, draws)
    if key not in _BUILT:
        built = Path(tempfile.mkdtemp(prefix="dualpath-seeded-"))
        atexit.register(shutil.rmtree, built, True)
        _BUILT[key] = (built, _build(built, tickers, nights, draws))
    built, dates = _BUILT[key]
    root.mkdir(parents=True, exist_ok=True)
    for f in built.iterdir():
        shutil.copy2(f, root / f.name)
    cfg_path = root / "dualpath.toml"
    return cfg_path, load_config(cfg_path), list(dates)


def _build(root: Path, tickers: int, nights: int, draws: int) -> list:
    cfg_path, cfg, dates = make_project(root, tickers=tickers, draws=draws, nights=nights)
    market = SyntheticMarket(cfg.market.synthetic_seed)
    rng = np.random.default_rng(7)
    runs, units, calls, energy = [], [], [], []
    for i, night in enumerate(dates):
        for path in ("backup", "main"):
            partial = path == "backup" and i == len(dates) - 1
            r, u, c = _run(cfg, path, night, i, tickers, draws, partial, market, rng)
            runs.append(r), units.extend(u), calls.extend(c)
            energy.append(_energy(r["run_id"], path, SPEED[path](i) * tickers))
    _insert(cfg, runs, units, calls, energy)
    return dates


def seed_nights(cfg, nights: list, draws: dict[str, int], first: int = 0,
                tickers: int = 8) -> None:
    """Add complete runs of `nights` (night numbers from `first`) on both paths, each path
    at its `draws`, with the same seconds and watts per ticker as `seed_warehouse`'s."""
    market = SyntheticMarket(cfg.market.synthetic_seed)
    rng = np.random.default_rng(11 + first)
    runs, units, calls, energy = [], [], [], []
    for i, night in enumerate(nights, start=first):
        for path in ("backup", "main"):
            r, u, c = _run(cfg, path, night, i, tickers, draws[path], False, market, rng)
            runs.append(r), units.extend(u), calls.extend(c)
            energy.append(_energy(r["run_id"], path, SPEED[path](i) * tickers))
    _insert(cfg, runs, units, calls, energy)


def _energy(run_id: str, path: str, s: float) -> dict:
    return {"run_id": run_id, "segment": 1, "host": "seeded", "source": "sim", "gpus": "0",
            "basis": "counter", "joules": POWER[path] * s, "seconds": s, "mean_w": POWER[path],
            "idle_w": IDLE[path], "idle_s": 5.0, "samples": 100}


def _insert(cfg, runs, units, calls, energy) -> None:
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        for name, rows in (("runs", runs), ("units", units), ("calls", calls),
                           ("energy_runs", energy)):
            frame = pd.DataFrame(rows)  # noqa: F841  (read by DuckDB by name)
            cols = ", ".join(rows[0])
            con.execute(f"INSERT INTO {name} ({cols}) SELECT {cols} FROM frame")


def _run(cfg, path, night, i, tickers, draws, partial, market, rng):
    scale = cfg.paths[path].sim.time_scale
    names = cfg.tickers()[:tickers]
    wall = SPEED[path](i) * tickers * scale           # client clock: compressed
    unit_s = wall * SLOTS[path] / (tickers * draws)   # slots kept full
    run_id = f"{cfg.experiment.name}/{night}/{path}"
    t0 = 1.8e9 + i * 86400 + (0 if path == "main" else 1)
    units, calls = [], []
    for k, (d, t) in enumerate((d, t) for d in range(1, draws + 1) for t in names):
        if partial and k >= len(names):
            break
        signal = market.signal(t, night) or 0.0
        grade = int(np.clip(np.round(3 + 1.2 * signal + rng.normal(0, 0.9)), 1, 5))
        start = t0 + k * unit_s / SLOTS[path]
        units.append({"run_id": run_id, "path": path, "night": night, "ticker": t, "draw": d,
                      "unit_attempt": 1, "start_wall": start, "end_wall": start + unit_s,
                      "seconds": unit_s, "n_calls": 2, "grade": grade, "outcome": "graded"})
        for seq in (1, 2):
            calls.append({"call_id": f"{run_id}/{t}/{d}/{seq}", "run_id": run_id, "path": path,
                          "night": night, "ticker": t, "draw": d, "unit_attempt": 1,
                          "agent": "final" if seq == 2 else "analyst", "call_seq": seq,
                          "start_wall": start, "end_wall": start + unit_s / 2,
                          "latency_s": unit_s / 2, "ttft_s": unit_s / 8, "attempts": 1,
                          "finish_reason": "length" if (k + seq + i) % 23 == 0 else "stop",
                          "prompt_tokens": 4000, "completion_tokens": 500, "cached_tokens": 1000,
                          "prompt_n": 3000, "prompt_ms": unit_s / scale * 250,
                          "predicted_n": 500, "predicted_ms": unit_s / scale * 250})
    done = len(units)
    run = {"run_id": run_id, "experiment": cfg.experiment.name, "night": night, "path": path,
           "engine": "sim", "config_hash": "c0ffee", "status": "partial" if partial else "complete",
           "status_detail": f"{done} of {tickers * draws} units measured" if partial else None,
           "units_planned": tickers * draws, "units_done": done, "units_measured": done,
           "tickers_planned": tickers, "slots": SLOTS[path], "time_scale": scale,
           "wall_s": wall, "segments": 1}
    return run, units, calls
