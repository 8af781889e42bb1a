"""The run listings' tables, declared once like every measure's: `runs`, `evidence`, `hosts`
(what `dualpath runs` prints) and `left_out` (every run a report keeps out of something,
and why). The weekly report and its Prefect artifact show each of them; the CLI reads their
columns from here.

`runs` and `left_out` take the warehouse's run summaries (`warehouse.queries.run_summaries`
with `evals.speed.with_speed`): one row per run with night, path, status, status_detail,
segments, disturbed and the seconds columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dualpath.evals.registry import table
from dualpath.evals.speed import SPEED_LABELS

LEFT_OUT = ["night", "path", "status", "left_out", "why"]


def left_out_of(runs: pd.DataFrame) -> pd.Series:
    """Per run, what it is kept out of: every metric (not complete), speed (complete but
    resumed or disturbed), or nothing (empty)."""
    complete = runs["status"].eq("complete")
    resumed = runs["segments"].gt(1) if "segments" in runs else complete & False
    disturbed = runs["disturbed"].notna() if "disturbed" in runs else complete & False
    return pd.Series(np.select([~complete, resumed | disturbed], ["every metric", "speed"], ""),
                     index=runs.index)


def left_out(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run left out of something, with what and why (one line each)."""
    if not len(runs):
        return pd.DataFrame(columns=LEFT_OUT)
    out = runs.assign(left_out=left_out_of(runs))
    out = out[out["left_out"] != ""].copy()
    detail = out["status_detail"].fillna("") if "status_detail" in out else ""
    resumed = out["segments"].gt(1) if "segments" in out else out["status"].isna()
    why = np.where(out["status"] != "complete", out["status"] + ": " + detail,
                   np.where(resumed, "resumed: its interrupted segment has no trustworthy clock",
                            out.get("disturbed", pd.Series("", index=out.index)).fillna("")))
    return out.assign(why=pd.Series(why, index=out.index).str.rstrip(": "))[LEFT_OUT]


def gpu_frame(gpu: pd.DataFrame) -> pd.DataFrame:
    """The GPU evidence (`warehouse.energy.gpu_evidence`) with its energy said in words: its
    basis where joules are known (`evals.energy.basis_words`, and the reader's failures it
    rode out), "energy unknown (why)" where not, never 0."""
    from dualpath.evals.energy import basis_words    # scipy, only where GPUs are shown

    def words(r) -> str:
        if isinstance(r["energy_unknown"], str):
            return f"energy unknown ({r['energy_unknown']})"
        error = r.get("energy_error_j")
        pct = error / r["joules"] if error is not None and not pd.isna(error) \
            and r["joules"] else None
        text = basis_words(r.get("energy_basis"), r.get("energy_hz"), pct)
        faults = r.get("energy_faults")
        return text + (f"; {faults}" if isinstance(faults, str) else "")
    return gpu.assign(energy=[words(r) for _, r in gpu.iterrows()] if len(gpu) else [])


def marked(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs with each left-out run's status saying so ("complete, out of speed"), as
    every place that lists runs marks them; the reason stays in its own columns."""
    if not len(runs):
        return runs
    out = left_out_of(runs)
    status = runs["status"].where(out == "", runs["status"] + ", out of " + out)
    return runs.assign(status=status)


table("runs", "runs (only 'complete' runs are results; seconds real-scale, complete "
      "one-segment runs only)",
      ["night", "path", "status", "units_planned", "draws", "graded", "parse_failed",
       "failed", "calls", "runaway", "contaminated", "segments", "throughput_s",
       "slot_latency_s", "j_per_ticker", "mean_w", "idle_w", "energy_unknown", "disturbed", "status_detail"],
      ["night", "path", "status", "units_planned", "graded", "parse_failed", "failed",
       "runaway", "throughput_s", "slot_latency_s", "disturbed", "status_detail"],
      basis={c: SPEED_LABELS[c] for c in ("throughput_s", "slot_latency_s")},
      gloss={"parse_failed": "measured, but the answer held no readable grade; graded + "
                             "parse_failed + failed = units_planned once every unit "
                             "was scored",
             "disturbed": "why a complete run's seconds are kept out of every median "
                          "(server restarted, stalled or shared; harness starved; its "
                          "GPU changed)",
             "j_per_ticker": "board energy of the scoring ÷ tickers, idle floor "
                             "included (complete undisturbed one-segment runs only)",
             "draws": "draws per ticker the run planned (units_planned ÷ tickers; each "
                      "path its own)"},
      kinds={"draws": "int"},
      kind="listing", section="hygiene", order=2, collapsed=True, empty="no runs in this range")

table("left_out", "Left out, and why (not complete: every metric; resumed or disturbed: "
      "speed)", LEFT_OUT,
      kind="listing", section="hygiene", order=1,
      empty="nothing left out: every run is complete, in one segment and undisturbed")(left_out)

table("evidence", "server evidence: the calls' tokens and seconds vs the server's own "
      "/metrics counters, its aggregate rates, and slot occupancy from the server's side",
      ["night", "run_id", "session_id", "path", "how", "slots", "calls_prompt_tokens",
       "server_prompt_tokens",
       "calls_predicted_tokens", "server_predicted_tokens", "calls_prompt_s",
       "server_prompt_s", "calls_predicted_s", "server_predicted_s", "server_prefill_tps",
       "server_decode_tps", "decode_tps_over_wall", "occupancy", "occupancy_client",
       "external_load_max", "restarts", "comparable", "note"],
      ["night", "path", "slots", "calls_prompt_tokens", "server_prompt_tokens",
       "calls_predicted_tokens", "server_predicted_tokens", "server_decode_tps",
       "occupancy", "comparable", "note"],
      gloss={"occupancy": "the calls' service time (server timings) ÷ slots × wall clock"},
      kinds={"slots": "int"},
      kind="listing", section="hygiene", order=3, collapsed=True,
      empty="no server evidence: no session in this range recorded the server's counters")

table("gpu", "GPU evidence: what each run's GPU read as the night began and the board "
      "energy of its scoring, idle floor included",
      ["night", "run_id", "path", "host", "gpu", "power_limit_w", "link", "link_max",
       "vram_total_mb", "joules", "mean_w", "idle_w", "energy"],
      ["night", "path", "gpu", "power_limit_w", "link", "vram_total_mb", "joules",
       "idle_w", "energy"],
      gloss={"link": "PCIe generation x width as trained at the night's start (link_max: "
                     "the most the card and slot reach)",
             "energy": "how the joules were measured (the GPU's counter, or power sampled "
                       "and integrated within a bound); 'energy unknown (why)' where no "
                       "joules were stored; never 0"},
      kinds={"vram_total_mb": "int", "joules": "int"},
      kind="listing", section="hygiene", order=4, collapsed=True,
      empty="no GPU readings: no run in this range recorded its GPU")

table("hosts", "where each run was scored: host and Prefect worker per segment (no "
      "worker: the nightly flow's own process)",
      ["night", "path", "segment", "host", "worker", "how", "base_url"],
      kinds={"segment": "int"},
      kind="listing", section="hygiene", order=5, collapsed=True,
      empty="no hosts recorded for the runs in this range")
