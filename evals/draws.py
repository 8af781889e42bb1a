"""Each run's own draws: the one place a night's work is divided by the draws it was scored with.

A path's draws can change between nights (`paths.<name>.draws` edited mid-study). Dividing
every stored night by the config's draws as they are now re-reads the past: with main at 3
draws and the backup moved from 2 to 3, the same stored night read 3.9× slower instead of
5.8×. So every per-unit figure divides a run by its own draws, taken from what the run
planned (`run_draws`: units_planned ÷ tickers_planned, both stored with the run), and a
ratio of two paths compares per unit (one ticker × one draw) wherever the paired runs'
draws differ (`paired_logs`). A change of draws is named beside the figures it touches
(`change_line`).

Frames: ``runs`` (`evals`) with units_planned and tickers_planned; per-run frames
(`evals.speed.run_speed`, `evals.energy.run_energy`) carry the result as ``draws``.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd


def run_draws(runs: pd.DataFrame) -> pd.Series:
    """Each run's draws of a ticker: units_planned ÷ tickers_planned (a night is draw-major,
    every ticker at the path's draws); NaN where the run did not record its tickers."""
    if not {"units_planned", "tickers_planned"} <= set(runs.columns):
        return pd.Series(np.nan, index=runs.index, dtype=float)
    tickers = pd.to_numeric(runs["tickers_planned"], errors="coerce").astype(float)
    units = pd.to_numeric(runs["units_planned"], errors="coerce").astype(float)
    return (units // tickers.where(tickers > 0)).astype(float)


def paired_logs(frame: pd.DataFrame, baseline: str, candidate: str, per_ticker: str,
                per_unit: str, fallback: int | dict | None = None) -> tuple[np.ndarray, str]:
    """(nightly log ratios candidate ÷ baseline, "ticker" or "unit"): per ticker where on
    every paired night both runs scored the same draws, else per unit, each run divided by
    its own draws. `frame`: one row per result run with night, path, ``draws`` and both
    columns; `fallback` (the config's draws) decides only where no run recorded its draws."""
    if not len(frame) or per_ticker not in frame:
        return np.array([]), "ticker"
    wide = frame.pivot_table(index="night", columns="path", values=per_ticker)
    if not {baseline, candidate} <= set(wide):
        return np.array([]), "ticker"
    nights = wide[[baseline, candidate]].dropna().index
    draws = (frame.pivot_table(index="night", columns="path", values="draws")
             if "draws" in frame and frame["draws"].notna().any() else None)
    if draws is None or not {baseline, candidate} <= set(draws):
        # no run recorded its draws (a warehouse older than tickers_planned): the config's
        pairs = wide.loc[nights, [baseline, candidate]]
        logs = np.log(pairs[candidate] / pairs[baseline]).to_numpy(dtype=float)
        if isinstance(fallback, dict) and fallback.get(baseline) != fallback.get(candidate):
            return logs - math.log(fallback[candidate] / fallback[baseline]), "unit"
        return logs, "ticker"
    d = draws.reindex(nights)
    per = "unit" if bool((d[baseline] != d[candidate]).any()) else "ticker"
    if per == "unit":
        wide = frame.pivot_table(index="night", columns="path", values=per_unit)
    pairs = wide.reindex(nights)[[baseline, candidate]].dropna()
    return np.log(pairs[candidate] / pairs[baseline]).to_numpy(dtype=float), per


def changes(frame: pd.DataFrame, paths: tuple) -> dict[str, list[tuple]]:
    """Per path in `paths`, (night, draws before, draws from then) for each night its runs'
    draws differ from the night before's; `frame`: one row per run with night, path, draws."""
    if not len(frame) or "draws" not in frame:
        return {}
    out = {}
    for p in paths:
        runs = frame[(frame["path"] == p) & frame["draws"].notna()].sort_values("night")
        by_night = runs.groupby("night", sort=True)["draws"].last()
        steps = [(night, int(before), int(now)) for (night, now), before
                 in zip(by_night.iloc[1:].items(), by_night.iloc[:-1]) if now != before]
        if steps:
            out[p] = steps
    return out


def latest(frame: pd.DataFrame, path: str) -> int | None:
    """The draws of `path`'s latest run that recorded them (what a night scores now)."""
    if not len(frame) or "draws" not in frame:
        return None
    runs = frame[(frame["path"] == path) & frame["draws"].notna()]
    return None if not len(runs) else int(runs.sort_values("night")["draws"].iloc[-1])


def now_draws(frame: pd.DataFrame, paths: tuple, fallback: int | dict) -> dict:
    """Each path's draws on its latest run, else the config's (`fallback`)."""
    own = lambda p: fallback.get(p) if isinstance(fallback, dict) else fallback
    return {p: (latest(frame, p) or own(p)) for p in paths}


def described(steps: dict[str, list[tuple]]) -> str:
    """'backup 2 → 3 from 2026-03-04' for each change of `changes`."""
    return "; ".join(f"{p} " + ", ".join(f"{a} → {b} from {_day(n)}" for n, a, b in s)
                     for p, s in steps.items())


def change_line(steps: dict[str, list[tuple]]) -> str | None:
    """'  draws changed mid-study: backup 2 → 3 from 2026-03-04; each night read at its own
    draws' (None without a change)."""
    if not steps:
        return None
    return f"  draws changed mid-study: {described(steps)}; each night read at its own draws"


def _day(night) -> str:
    return pd.Timestamp(night).date().isoformat() if not (
        isinstance(night, float) and math.isnan(night)) else "?"
