"""Per-ticker speed, always labelled with its basis.

Two different "seconds per ticker" exist and once nearly made a faster build look like a
regression (188.5 s on one basis against 504 s on the other):

* ``throughput`` basis: a run's wall clock / its tickers (every draw of a ticker counted in
  its ticker's share), or / its units (one ticker x one draw, the basis of a single-pass
  replay). This is what sets how long a night takes.
* ``slot-latency`` basis: the time one unit took from its first call's start to its last
  call's end, i.e. what one ticker-draw waits. It is roughly throughput per unit x slots.

Speed is a result only for runs that are complete (every unit measured, no contaminated
call), were scored in one segment and were not disturbed: a failed night finishes in an
instant, a resumed run's interrupted segment has no trustworthy wall clock, and a run whose
server restarted, stalled or served someone else too (`disturbed`, see
`warehouse.disturbed`) waited on something other than its own work. Others are shown, never
counted.

Functions here take the ``units`` and ``runs`` frames described in `evals`.
"""

from __future__ import annotations

from typing import Literal

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


def run_speed(calls: pd.DataFrame, units: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Speed per run from the ``calls``, ``units`` and ``runs`` frames (real-scale).

    `per_call_*_tps` are per-call rates from the server's own timings (sum tokens / sum
    time, so long calls weigh by their length); under batching the calls' times overlap, so
    they are not a path's aggregate rate: that comes from the server's counters (`dualpath
    runs --evidence`) and, client-side, `client_*_tps` over the run's wall clock. Only
    runs with status 'complete' are results (`is_result`); the others are shown, marked.
    """
    r = runs.set_index("run_id")
    scale = r["time_scale"]
    segments = r["segments"] if "segments" in r else pd.Series(1, index=r.index)
    tickers = (r["tickers_planned"].fillna(r["units"]) if "tickers_planned" in r
               else r["units"]).astype(float)
    c = calls.assign(runaway=calls["finish_reason"].eq("length"),
                     retries=calls["attempts"] - 1,
                     decode_s=(calls["latency_s"] - calls["ttft_s"]).where(calls["ttft_s"].notna()))
    g = c.groupby("run_id")
    out = pd.DataFrame({
        "calls": g.size(),
        "per_call_prefill_tps": g["prompt_n"].sum() / g["prompt_ms"].sum() * 1e3,
        "per_call_decode_tps": g["predicted_n"].sum() / g["predicted_ms"].sum() * 1e3,
        "prompt_tokens": g["prompt_tokens"].sum(),
        "completion_tokens": g["completion_tokens"].sum(),
        "cached_tokens": g["cached_tokens"].sum(),
        "runaway_calls": g["runaway"].sum(),
        "runaway_s": c[c["runaway"]].groupby("run_id")["latency_s"].sum(),
        "busy_s": g["latency_s"].sum(),
        "retries": g["retries"].sum(),
        "stream_decode_s": g["decode_s"].sum(min_count=1),
        "stream_tokens": c[c["decode_s"].notna()].groupby("run_id")["completion_tokens"].sum(),
    }).reindex(r.index)
    n_units = units.groupby("run_id").size().reindex(r.index)
    wall = r["wall_s"] / scale
    out["runaway_s"] = out["runaway_s"].fillna(0.0) / scale
    out["busy_s"] = out["busy_s"] / scale
    complete = r["status"].eq("complete")
    # a complete run whose server restarted, stalled or was shared is shown, not counted
    disturbed = r["disturbed"] if "disturbed" in r else pd.Series(None, index=r.index,
                                                                  dtype=object)
    res = pd.DataFrame({
        "path": r["path"], "night": r.get("night"), "status": r["status"],
        "resumed": segments.gt(1), "disturbed": disturbed,
        "is_result": complete & segments.eq(1) & disturbed.isna(), "units": n_units,
        "throughput_s_per_ticker": wall / tickers,
        "throughput_s_per_unit": wall / n_units,
        # one unit = one ticker x one draw: what a single pass of the pipeline costs
        "slot_latency_s_per_unit": units.groupby("run_id")["seconds"].mean().reindex(r.index) / scale,
        "calls_per_unit": out["calls"] / n_units,
        "prompt_tokens_per_unit": out["prompt_tokens"] / n_units,
        "completion_tokens_per_unit": out["completion_tokens"] / n_units,
        "per_call_prefill_tps": out["per_call_prefill_tps"],
        "per_call_decode_tps": out["per_call_decode_tps"],
        "client_prompt_tps": out["prompt_tokens"] / wall,
        "client_decode_tps": out["completion_tokens"] / wall,
        "client_stream_decode_tps": out["stream_tokens"] / (out["stream_decode_s"] / scale),
        "runaway_share": out["runaway_calls"] / out["calls"],
        "runaway_time_share": out["runaway_s"] / out["busy_s"],
        "runaway_s": out["runaway_s"],
        "retries": out["retries"],
        "cached_prompt_share": out["cached_tokens"] / out["prompt_tokens"],
    })
    return res.reset_index()


def path_speed(per_run: pd.DataFrame) -> pd.DataFrame:
    """Medians per path over the runs whose speed is a result, with counts of the runs left
    out: not complete (partial, failed, contaminated), complete but resumed, or complete in
    one segment but disturbed (server restarted, stalled or shared)."""
    ok = per_run[per_run["is_result"]]
    cols = [c for c in per_run.columns if c not in ("run_id", "path", "night", "status",
                                                    "resumed", "disturbed", "is_result",
                                                    "units")]
    paths = sorted(per_run["path"].unique())
    med = ok.groupby("path")[cols].median().reindex(paths)
    count = lambda mask: per_run[mask].groupby("path").size().reindex(paths, fill_value=0)
    med.insert(0, "runs", count(per_run["is_result"]))
    not_complete = ~per_run["status"].eq("complete")
    med.insert(1, "not_complete_excluded", count(not_complete))
    med.insert(2, "resumed_excluded", count(~not_complete & per_run["resumed"]))
    disturbed = per_run["disturbed"].notna() if "disturbed" in per_run else False
    med.insert(3, "disturbed_excluded",
               count(~not_complete & ~per_run["resumed"] & disturbed))
    return med.rename_axis("path").reset_index()
