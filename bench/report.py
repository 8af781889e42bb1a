"""Report benchmark: the weekly report over the six-week synthetic warehouse.

Build the warehouse first: `python bench/warehouse.py --keep W.duckdb`, then
`python bench/report.py W.duckdb`. Times gathering every table and rendering the HTML and
Markdown (figures included) for 42 nights x 2 paths x 100 tickers x 3 draws.
Last line: `report_s=... nights=... html_kb=...` (goal: report_s <= 10).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and would shadow the `evals` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import tempfile
import time

from dualpath.config import dump_toml, load_config
from dualpath.flows.weekly import write_report


def bench_config(db: Path, root: Path, experiment: str) -> Path:
    data = {"experiment": {"name": experiment, "draws": 3, "horizons": [1, 5, 20],
                           "universe": [f"SYN{i:03d}" for i in range(100)]},
            "warehouse": {"path": str(db.resolve()), "runs_dir": str(root / "runs")},
            "paths": {"main": {"engine": "sim", "model": "m", "slots": 8},
                      "backup": {"engine": "sim", "model": "b", "slots": 4}}}
    cfg = root / "bench.toml"
    cfg.write_text(dump_toml(data) + "\n")
    return cfg


def main(db: Path, experiment: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cfg = load_config(bench_config(db, root, experiment))
        t0 = time.monotonic()
        html, md, data = write_report(cfg, root / "out")
        took = time.monotonic() - t0
        size = html.stat().st_size / 1024
        print(f"gathered and rendered {data.runs['night'].nunique()} nights "
              f"({len(data.calls):,} calls): HTML {size:,.0f} KB, Markdown "
              f"{md.stat().st_size / 1024:,.0f} KB")
        print(f"report_s={took:.2f} nights={data.runs['night'].nunique()} html_kb={size:.0f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--experiment", default="bench")
    a = ap.parse_args()
    main(a.db, a.experiment)
