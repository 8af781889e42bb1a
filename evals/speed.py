"""Per-ticker speed, always labelled with its basis.

Two different "seconds per ticker" exist and once nearly made a faster build look like a
regression (188.5 s on one basis against 504 s on the other):

* ``throughput`` basis: a run's wall clock / the units it finished. This is what sets how
  long a night takes.
* ``slot-latency`` basis: the time one unit took from its first call's start to its last
  call's end, i.e. what one ticker waits. It is roughly throughput x slots.

Functions here take the ``units`` and ``runs`` frames described in `evals`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

Basis = Literal["throughput", "slot-latency"]
BASIS_LABEL = {
    "throughput": "s/ticker, throughput basis (run wall clock / tickers)",
    "slot-latency": "s/ticker, slot-latency basis (one ticker's first call to last call)",
}


def per_ticker_seconds(units: pd.DataFrame, runs: pd.DataFrame, basis: Basis) -> pd.DataFrame:
    """Seconds per ticker for each run on one basis.

    Returns one row per run: run_id, path, basis, seconds (for slot-latency: the median unit;
    mean beside it), units. Real-scale seconds for simulated runs (divided by time_scale).
    """
    if basis not in BASIS_LABEL:
        raise ValueError(f"basis must be one of {list(BASIS_LABEL)}, got {basis!r}")
    scale = runs.set_index("run_id")["time_scale"]
    n = units.groupby("run_id").size().rename("units")
    if basis == "throughput":
        r = runs.set_index("run_id")
        out = pd.DataFrame({"path": r["path"], "seconds": r["wall_s"] / n.reindex(r.index),
                            "units": n.reindex(r.index)})
        out["mean_seconds"] = out["seconds"]
    else:
        g = units.groupby("run_id")["seconds"]
        out = pd.DataFrame({"seconds": g.median(), "mean_seconds": g.mean(), "units": n})
        out["path"] = runs.set_index("run_id")["path"].reindex(out.index)
    for col in ("seconds", "mean_seconds"):
        out[col] = out[col] / scale.reindex(out.index)
    out["basis"] = basis
    return out.reset_index()[["run_id", "path", "basis", "seconds", "mean_seconds", "units"]]


def speed_summary(units: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Both bases side by side per run, plus their ratio (≈ slots when slots stay full)."""
    tp = per_ticker_seconds(units, runs, "throughput").set_index("run_id")
    sl = per_ticker_seconds(units, runs, "slot-latency").set_index("run_id")
    out = pd.DataFrame({
        "path": tp["path"], "units": tp["units"],
        "throughput_s_per_ticker": tp["seconds"],
        "slot_latency_s_per_ticker": sl["mean_seconds"],
        "slot_latency_median_s": sl["seconds"],
    })
    out["latency_over_throughput"] = out["slot_latency_s_per_ticker"] / out["throughput_s_per_ticker"]
    return out.reset_index()


def wall_seconds(start_wall: pd.Series, end_wall: pd.Series) -> float:
    """Wall clock from the earliest start to the latest end (NaN when empty)."""
    if len(start_wall) == 0:
        return float("nan")
    return float(np.max(end_wall) - np.min(start_wall))
