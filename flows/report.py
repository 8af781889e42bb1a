"""Per-night summary rows and their markdown, for the Prefect artifact and the CLI."""

from __future__ import annotations

from datetime import date

import orjson

from dualpath.config import Config
from dualpath.sampling import applied_differences
from dualpath.warehouse.db import reader
from dualpath.evals.speed import SPEED_LABELS, with_speed
from dualpath.warehouse.queries import run_summaries, suspect_runs


def night_summary(cfg: Config, run_ids: list[str]) -> list[dict]:
    """One dict per run: status and why, units, calls, failures, runaways, per-ticker seconds."""
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        frame = with_speed(run_summaries(con, run_ids))
    return frame.astype(object).where(frame.notna(), None).to_dict("records")


def summary_markdown(night: date, rows: list[dict]) -> str:
    lines = [f"# dualpath night {night}", "",
             "| path | status | units measured | graded | parse failed | not measured | calls "
             "| runaway | contaminated | s/ticker (throughput) | s/unit (slot-latency) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['path']} | **{r['status']}** | "
                     f"{r['graded'] + r['parse_failed']}/{r['units_planned']} | {r['graded']} | "
                     f"{r['parse_failed']} | {r['failed']} | {r['calls']} | {r['runaway']} | "
                     f"{r['contaminated']} | {_num(r['throughput_s'])} | "
                     f"{_num(r['slot_latency_s'])} |")
    reasons = [f"- **{r['path']}** is {r['status']}: {r['status_detail']}"
               for r in rows if r["status"] != "complete"]
    if reasons:
        lines += ["", "## Not complete (not results; rerun the night to resume)", "", *reasons]
    lines += ["", *(f"- {SPEED_LABELS[c]}" for c in ("throughput_s", "slot_latency_s")),
              "- seconds are real-scale (simulated paths: divided by their time scale)",
              "- a run that is not `complete` is not a result: it is kept out of every metric"]
    return "\n".join(lines)


def _num(v) -> str:
    return "—" if v is None or v != v else f"{v:,.1f}"


def run_warnings(con) -> list[str]:
    """What makes a night's comparison suspect: contamination, external load, sampling drift."""
    rows = suspect_runs(con)
    out = [f"{run_id}: {n} call(s) answered by another server (contaminated; kept, never "
           "counted in any metric)" for run_id, n in rows["contaminated"]]
    out += [f"{run_id}: {problem}; calls after the last good check are contaminated"
            for run_id, problem in rows["identity"]]
    out += [f"{run_id}: up to {mx} busy slot(s) were not dualpath's ({polls} poll(s)): another "
            "client shared the server; its timings are suspect"
            for run_id, mx, polls in rows["external_load"]]
    out += [f"{run_id}: {why}; its speed is not a measurement (shown, kept out of every "
            "speed median)" for run_id, why in rows["disturbed"]]
    by_night: dict = {}
    for exp, night, path, js, n_ctx in rows["sampling"]:
        by_night.setdefault((exp, night), {})[path] = (orjson.loads(js), n_ctx)
    for (exp, night), paths in by_night.items():
        names = sorted(paths)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                diff = applied_differences(paths[a][0], paths[b][0], (paths[a][1], paths[b][1]))
                if diff:
                    out.append(f"{exp} {night}: paths {a} and {b} sampled differently: "
                               + "; ".join(diff))
    return out
