"""A sweep's points judged: speed per point, the knee, verdicts and ablation deltas.

Frames (one row each):

* replayed calls of one point (`point_metrics`): ticker, draw, start_mono, end_mono
  (client monotonic s, compressed for simulated servers), ok (bool: answered, by the checked
  server), finish_reason, prompt_tokens, cached_tokens;
* point repeats (`verdicts`, `ablation`): point_key, label, slots, status (`ready` |
  `failed to start` | `incomplete`), decode_tps (aggregate generated tokens per real second
  of the replay, NaN unless ready), ticker_s_throughput, ticker_s_latency.

Truthful labels are the point: a point that did not replay every frozen call is
`tentative`, is never the best and never chosen; only `ready` points are compared, all on one
basis (aggregate decode tok/s from the server's own counters), which every column names.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

BASIS = "aggregate decode tok/s (server counters ÷ replay wall clock, real-scale)"
READY, FAILED, INCOMPLETE = "ready", "failed to start", "incomplete"


def point_metrics(calls: pd.DataFrame, *, wall_s: float, counters: dict[str, float],
                  time_scale: float = 1.0) -> dict[str, float | int | None]:
    """Speed of one replay. `counters` are the server's /metrics deltas over the replay:
    prompt_tokens, predicted_tokens, and (llama-server) prompt_seconds, predicted_seconds —
    busy seconds summed over slots, so tokens ÷ them is the speed of one busy slot."""
    real_wall = wall_s / time_scale
    p, d = counters.get("prompt_tokens"), counters.get("predicted_tokens")
    ps, ds = counters.get("prompt_seconds"), counters.get("predicted_seconds")
    tickers = calls["ticker"].nunique() if len(calls) else 0
    units = calls.groupby(["ticker", "draw"]) if len(calls) else None
    latency = ((units["end_mono"].max() - units["start_mono"].min()).median() / time_scale
               if units is not None else None)
    prompt = calls["prompt_tokens"].fillna(0).sum() if len(calls) else 0
    return {
        "calls_ok": int(calls["ok"].sum()) if len(calls) else 0,
        "prompt_tokens": None if p is None else int(p),
        "predicted_tokens": None if d is None else int(d),
        "prefill_tps": _div(p, real_wall), "decode_tps": _div(d, real_wall),
        "prefill_tps_per_slot": _div(p, ps), "decode_tps_per_slot": _div(d, ds),
        "ticker_s_throughput": _div(real_wall, tickers),
        "ticker_s_latency": None if latency is None or math.isnan(latency) else float(latency),
        "runaway_share": float((calls["finish_reason"] == "length").mean()) if len(calls) else None,
        "cached_share": _div(calls["cached_tokens"].fillna(0).sum(), prompt) if len(calls) else None,
    }


def _div(a, b) -> float | None:
    if a is None or b is None or not b or (isinstance(b, float) and math.isnan(b)):
        return None
    return float(a) / float(b)


def _collapse(repeats: pd.DataFrame) -> pd.DataFrame:
    """One row per point: ready only when every repeat is; speeds are means over repeats."""
    def status(s: pd.Series) -> str:
        if (s == READY).all():
            return READY
        return FAILED if (s == FAILED).any() and not (s == INCOMPLETE).any() else INCOMPLETE

    g = repeats.groupby("point_key", sort=False)
    out = g.agg(label=("label", "first"), slots=("slots", "first"),
                status=("status", status), repeats=("status", "size"),
                decode_tps=("decode_tps", "mean"), decode_sd=("decode_tps", "std"),
                ticker_s_throughput=("ticker_s_throughput", "mean"),
                ticker_s_latency=("ticker_s_latency", "mean")).reset_index()
    for col in ("decode_tps", "decode_sd", "ticker_s_throughput", "ticker_s_latency"):
        out[col] = out[col].where(out["status"] == READY)
    return out


def _pooled_sd(repeats: pd.DataFrame) -> float | None:
    """The pooled SD of aggregate decode between repeats of the same ready point."""
    ready = repeats[repeats["status"] == READY]
    groups = [g["decode_tps"].dropna().to_numpy(float) for _, g in ready.groupby("point_key")]
    df = sum(len(g) - 1 for g in groups if len(g))
    if df <= 0:
        return None
    return math.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups if len(g)) / df)


def verdicts(repeats: pd.DataFrame, share: float, sigmas: float = 2.0) -> pd.DataFrame:
    """Every point with its verdict: `knee (chosen)` — the fewest slots not measurably below
    the best ready point's aggregate decode —, `measured`, `tentative` (did not replay every
    frozen call) or `failed` (did not start). `is_best` marks the fastest ready point.

    "Not measurably below" is within `share` of the best, or within the noise band
    (`noise_band_tps`: `sigmas` × the pooled repeat SD × sqrt(1/n + 1/n_best)): a 4% lead of
    one point on one repeat is not a reason to take more slots. With one repeat the band is
    unknown (NaN) and only `share` counts."""
    pts = _collapse(repeats)
    sd = _pooled_sd(repeats)
    ready = pts[pts["status"] == READY]
    pts["verdict"] = pts["status"].map({READY: "measured", INCOMPLETE: "tentative",
                                        FAILED: "failed"})
    pts["is_best"] = False
    pts["is_knee"] = False
    pts["share_of_best"] = np.nan
    pts["noise_band_tps"] = np.nan
    if not ready.empty and ready["decode_tps"].notna().any():
        best_i = ready["decode_tps"].idxmax()
        best = ready["decode_tps"].max()
        pts.loc[ready.index, "share_of_best"] = ready["decode_tps"] / best
        pts.loc[best_i, "is_best"] = True
        if sd is not None:
            n_best = pts.loc[best_i, "repeats"]
            pts.loc[ready.index, "noise_band_tps"] = sigmas * sd * np.sqrt(
                1 / ready["repeats"] + 1 / n_best)
        band = pts.loc[ready.index, "noise_band_tps"].fillna(0.0)
        near = ready[(ready["decode_tps"] >= (1 - share) * best)
                     | (best - ready["decode_tps"] <= band)]
        knee = near.sort_values(["slots", "decode_tps"], ascending=[True, False]).index[0]
        pts.loc[knee, ["is_knee", "verdict"]] = [True, "knee (chosen)"]
    return pts


def chosen(table: pd.DataFrame) -> pd.Series | None:
    """The knee row of a `verdicts` table, or None when no point replayed every call."""
    rows = table[table["is_knee"]]
    return None if rows.empty else rows.iloc[0]


def ablation(repeats: pd.DataFrame, base_key: str, removed: dict[str, str],
             sigmas: float = 2.0) -> pd.DataFrame:
    """Each ablated flag's Δ (decode tok/s without it − with it) and its noise band:
    `sigmas` × the pooled repeat SD × sqrt(1/n_base + 1/n_without). Within the band: 'no
    measurable effect'; with fewer than two repeats anywhere the band is unknown and no
    effect is claimed."""
    ready = repeats[repeats["status"] == READY]
    groups = [g["decode_tps"].to_numpy(float) for _, g in ready.groupby("point_key")]
    df = sum(len(g) - 1 for g in groups)
    sd = math.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups) / df) if df > 0 else None
    base = ready.loc[ready["point_key"] == base_key, "decode_tps"]
    rows = []
    for flag, key in removed.items():
        without = ready.loc[ready["point_key"] == key, "decode_tps"]
        if base.empty or without.empty:
            rows.append({"flag": flag, "delta_tps": None, "band_tps": None,
                         "effect": "tentative — a point did not replay every call"})
            continue
        delta = float(without.mean() - base.mean())
        band = None if sd is None else sigmas * sd * math.sqrt(1 / len(base) + 1 / len(without))
        if band is None:
            effect = "noise unknown (repeats = 1): no effect claimed"
        elif abs(delta) <= band:
            effect = "no measurable effect"
        elif delta < 0:
            effect = "helps (removing it is slower)"
        else:
            effect = "hurts (removing it is faster)"
        rows.append({"flag": flag, "delta_tps": delta, "band_tps": band, "effect": effect})
    return pd.DataFrame(rows, columns=["flag", "delta_tps", "band_tps", "effect"])
