"""Per-night summary rows and their markdown, for the Prefect artifact and the CLI."""

from __future__ import annotations

from datetime import date

import orjson

from dualpath.config import Config
from dualpath.identity import sampling_differences
from evals.speed import BASIS_LABEL
from warehouse.db import reader
from warehouse.queries import run_summaries, suspect_runs


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


def run_warnings(con) -> list[str]:
    """What makes a night's comparison suspect: contamination, external load, sampling drift."""
    rows = suspect_runs(con)
    out = [f"{run_id}: {n} call(s) answered by another server (contaminated; kept, never "
           "counted in any metric)" for run_id, n in rows["contaminated"]]
    out += [f"{run_id}: up to {mx} busy slot(s) were not dualpath's ({polls} poll(s)): another "
            "client shared the server; its timings are suspect"
            for run_id, mx, polls in rows["external_load"]]
    by_night: dict = {}
    for exp, night, path, js, n_ctx in rows["sampling"]:
        by_night.setdefault((exp, night), {})[path] = (orjson.loads(js), n_ctx)
    for (exp, night), paths in by_night.items():
        names = sorted(paths)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                diff = sampling_differences(paths[a][0], paths[b][0], (paths[a][1], paths[b][1]))
                if diff:
                    out.append(f"{exp} {night}: paths {a} and {b} sampled differently: "
                               + "; ".join(diff))
    return out
