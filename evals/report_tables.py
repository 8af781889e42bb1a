"""The weekly report's own tables, declared in the one registry like every measure's: the
per-call latency percentiles, the projected 100-ticker night, every recorded sweep's
points, the server sessions, the thinking share and the deviation log.

They are not metric tables (`dualpath metrics` prints none of them): the report computes
them from the frames it gathers (`evals.weekly.ReportData`). Declared here, they reach the
HTML and the Markdown (the Prefect artifact) through `evals.registry.every_table()` like
every other table, with their columns, footnotes and the line shown when one has no rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dualpath.evals.registry import table
from dualpath.evals.thinking import COLUMNS as THINKING_COLUMNS
from dualpath.evals.thinking import thinking_share

SWEEP_COLUMNS = ["label", "slots", "status", "verdict", "decode_tps", "share_of_best",
                 "prefill_tps", "ticker_s_throughput", "ticker_s_latency", "cached_share",
                 "calls_ok", "calls_planned", "failure_kind"]


def real_scale_calls(calls: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Client-clock seconds of each call divided by its run's time scale (simulated paths
    compress their clocks); server timings are real-scale already."""
    if not len(calls) or "time_scale" not in runs:
        return calls
    scale = calls["run_id"].map(runs.set_index("run_id")["time_scale"]).fillna(1.0)
    return calls.assign(latency_s=calls["latency_s"] / scale, ttft_s=calls["ttft_s"] / scale)


def result_calls(calls: pd.DataFrame, per_run: pd.DataFrame | None) -> pd.DataFrame:
    """The calls of the runs whose speed is a result (`evals.speed.run_speed`'s
    ``is_result``: complete, one segment, undisturbed), as the speed and serving tables
    count them: a starved or resumed run's calls waited on something other than their path."""
    if per_run is None or not len(per_run) or not len(calls):
        return calls.iloc[0:0]
    ok = per_run.loc[per_run["is_result"].astype(bool), "run_id"]
    return calls[calls["run_id"].isin(ok)]


def latency_percentiles(calls: pd.DataFrame) -> pd.DataFrame:
    """Per path: client latency, time to first token and time per output token at p50/90/99
    (as `vllm bench serve` reports them), each with its basis; real-scale seconds."""
    if not len(calls):
        return pd.DataFrame()
    c = calls.assign(
        tpot_client_ms=(calls["latency_s"] - calls["ttft_s"]) * 1e3
        / (calls["completion_tokens"].astype(float) - 1).where(lambda x: x > 0),
        tpot_server_ms=calls["predicted_ms"] / calls["predicted_n"].astype(float)
        .where(lambda x: x > 0) if "predicted_n" in calls else np.nan,
        ttft_ms=calls["ttft_s"] * 1e3, latency_s_=calls["latency_s"])
    rows = []
    for path, g in c.groupby("path"):
        for metric, basis in (("latency_s_", "client: request start to last byte, s"),
                              ("ttft_ms", "client, streaming only: to first token, ms"),
                              ("tpot_client_ms", "client, streaming: per output token, ms"),
                              ("tpot_server_ms", "server timings: per output token, ms")):
            s = g[metric].dropna()
            rows.append({"path": path, "metric": metric.rstrip("_"), "basis": basis,
                         "n": len(s), **{f"p{q}": (s.quantile(q / 100) if len(s) else np.nan)
                                         for q in (50, 90, 99)}})
    return pd.DataFrame(rows)


def projection(speed: pd.DataFrame | None) -> pd.DataFrame:
    """Per path, the hours a 100-ticker night takes at its median throughput seconds per
    ticker (the speed table's; paths without a speed are left out)."""
    if speed is None or not len(speed) or "throughput_s_per_ticker" not in speed:
        return pd.DataFrame()
    return pd.DataFrame({"path": speed["path"], "hours_for_100_tickers":
                         speed["throughput_s_per_ticker"] * 100 / 3600}).dropna()


def sweep_points(sweeps: list[dict]) -> pd.DataFrame:
    """Every point of every recorded sweep (`evals.sweep.verdicts` with the replay's
    extras), the sweep's name first."""
    frames = [s["table"].assign(sweep=str(s["sweep"]["name"])) for s in sweeps
              if len(s["table"])]
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)[["sweep"] + SWEEP_COLUMNS]


def frames(d) -> dict[str, pd.DataFrame]:
    """The frame behind each of these tables, from a `ReportData`."""
    return {"deviations": d.deviations,
            "latency": latency_percentiles(real_scale_calls(
                result_calls(d.calls, getattr(d.metrics, "speed_runs", None)), d.runs)),
            "projection": projection(getattr(d.metrics, "speed", None)),
            "sweep": sweep_points(d.sweeps), "sessions": d.sessions,
            "thinking": thinking_share(d.calls)}


table("deviations", "Deviations", ["night", "kind", "detail", "recorded_at"],
      kind="report", section="plan", empty="none logged")

table("latency", "Per-call latency percentiles over complete one-segment undisturbed "
      "runs (real-scale; a starved, resumed or partial run's calls are left out)",
      ["path", "metric", "basis", "n", "p50", "p90", "p99"],
      kind="report", section="speed", order=110, collapsed=True,
      empty="no calls of a complete, one-segment, undisturbed run")(latency_percentiles)

table("projection", "Projected duration of a 100-ticker night",
      ["path", "hours_for_100_tickers"], kinds={"hours_for_100_tickers": "h"},
      kind="report", section="speed", order=120,
      empty="no projection: no path has a complete, undisturbed run yet (the runs left out "
          "are listed under run hygiene)")(projection)

table("sweep", "Every point of the recorded sweeps", ["sweep"] + SWEEP_COLUMNS,
      gloss={"share_of_best": "the point's aggregate decode ÷ the fastest ready point's"},
      kind="report", section="retuning",
      empty="no sweep recorded: `dualpath sweep` retunes a path's slots")(sweep_points)

table("sessions", "Server identity per path and night",
      ["night", "path", "dialect", "how", "model", "build", "slots", "identity_problem"],
      kind="report", section="hygiene", order=6, collapsed=True,
      empty="no server session recorded for the runs in this range")

table("thinking", "Thinking share of generated tokens per path", THINKING_COLUMNS,
      gloss={"basis": "server: counted by the engine; chars: estimated from characters"},
      kind="report", section="sampling", empty="no calls")(thinking_share)
