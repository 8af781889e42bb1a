"""Per-night summary rows and their markdown, for the Prefect artifact and the CLI."""

from __future__ import annotations

from datetime import date

from dualpath.config import Config
from evals.speed import BASIS_LABEL
from warehouse.db import reader
from warehouse.queries import run_summaries


def night_summary(cfg: Config, night: date, run_ids: list[str]) -> list[dict]:
    """One dict per run: units, calls, failures, runaways, per-ticker seconds on both bases."""
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        frame = run_summaries(con, run_ids)
    return frame.to_dict("records")


def summary_markdown(night: date, rows: list[dict]) -> str:
    lines = [f"# dualpath night {night}", "",
             "| path | status | units | graded | failed | calls | runaway | "
             "s/ticker throughput | s/ticker slot-latency |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['path']} | {r['status']} | {r['units_done']}/{r['units_planned']} | "
                     f"{r['graded']} | {r['failed']} | {r['calls']} | {r['runaway']} | "
                     f"{_num(r['throughput_s'])} | {_num(r['slot_latency_s'])} |")
    lines += ["", f"- throughput: {BASIS_LABEL['throughput']}",
              f"- slot-latency: {BASIS_LABEL['slot-latency']}",
              "- seconds are real-scale (simulated paths: divided by their time scale)",
              "- a run that is not `complete` is not a result"]
    return "\n".join(lines)


def _num(v) -> str:
    return "—" if v is None or v != v else f"{v:,.1f}"
