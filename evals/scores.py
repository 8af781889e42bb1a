"""Per ticker-night scores: the mean grade over the draws that parsed.

Takes the ``units`` frame (see `evals`). Only units usable as results should be passed
(complete runs, no contaminated call); `usable_units` applies that filter.
"""

from __future__ import annotations

import pandas as pd


def usable_units(units: pd.DataFrame) -> pd.DataFrame:
    """Units of complete runs with no contaminated call (the only ones metrics may use)."""
    keep = pd.Series(True, index=units.index)
    if "run_status" in units:
        keep &= units["run_status"] == "complete"
    if "clean" in units:
        keep &= units["clean"].astype(bool)
    return units[keep]


def ticker_scores(units: pd.DataFrame) -> pd.DataFrame:
    """night, path, ticker, score (mean parsed grade), n_draws (parsed), n_failed."""
    g = units.assign(parsed=units["grade"].notna(),
                     grade_f=pd.to_numeric(units["grade"], errors="coerce").astype(float))
    out = g.groupby(["night", "path", "ticker"], as_index=False).agg(
        score=("grade_f", "mean"), n_draws=("parsed", "sum"), n_units=("parsed", "size"))
    out["n_failed"] = out["n_units"] - out["n_draws"]
    return out.drop(columns="n_units")
