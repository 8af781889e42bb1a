"""evals benchmark: every metric table over the six-week synthetic warehouse.

Build the warehouse first: `python bench/warehouse.py --keep W.duckdb`, then
`python bench/evals.py W.duckdb`. Times reading the frames and computing every table.
Last line: `evals_s=... nights=... calls=...`
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and would shadow the `evals` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import time

from dualpath.evals.report import compute_metrics
from dualpath.warehouse.db import reader
from dualpath.warehouse.frames import calls_frame, prices_frame, runs_frame, units_frame


def main(db: Path, experiment: str) -> None:
    t0 = time.monotonic()
    with reader(db) as con:
        units = units_frame(con, experiment)
        calls = calls_frame(con, experiment)
        runs = runs_frame(con, experiment)
        prices = prices_frame(con)
    t1 = time.monotonic()
    m = compute_metrics(units, calls, runs, prices, [1, 5, 20], ("main", "backup"), seed=1)
    t2 = time.monotonic()
    print(f"read frames: {t1 - t0:.2f} s ({len(calls):,} calls, {len(units):,} units); "
          f"computed every table: {t2 - t1:.2f} s")
    for name in ("rank_ic", "comparison", "self_agreement", "speed"):
        print(f"  {name}: {len(getattr(m, name))} rows")
    nights = units["night"].nunique()
    print(f"evals_s={t2 - t0:.2f} nights={nights} calls={len(calls)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--experiment", default="bench")
    a = ap.parse_args()
    main(a.db, a.experiment)
