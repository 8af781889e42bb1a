"""Seconds per ticker and per unit, always labelled with their basis: the one definition.

Two different "seconds per ticker" exist and once nearly made a faster build look like a
regression (188.5 s on one basis against 504 s on the other):

* ``throughput`` basis: a run's wall clock ÷ its tickers (every draw of a ticker counted in
  its ticker's share), or ÷ its units (one ticker x one draw, the basis of a single-pass
  replay). This is what sets how long a night takes.
* ``slot-latency`` basis: the time one unit took from its first call's start to its last
  call's end, i.e. what one ticker-draw waits (per ticker: all its draws' slot time). It is
  roughly throughput per unit x slots.

`seconds(runs, basis, per)` is the only place either is computed; everything that prints,
plots or plans a per-ticker second calls it (the warehouse's `run_summaries` included, through
`with_speed`). Speed is a result only for runs that are complete (every unit measured, no
contaminated call), were scored in one segment and were not disturbed: a failed night
finishes in an instant, a resumed run's interrupted segment has no trustworthy wall clock,
and a run whose server restarted, stalled or served someone else too, or whose harness
starved it (`disturbed`, see `warehouse.disturbed`), waited on something other than its own
work. Others are shown, never
counted.

Functions here take the ``units`` and ``runs`` frames described in `evals`.
"""

from __future__ import annotations

from typing import Literal

import math

import numpy as np
import pandas as pd

from dualpath.evals.draws import run_draws
from dualpath.evals.inputs import MetricInputs
from dualpath.evals.registry import table

Basis = Literal["throughput", "slot-latency"]
Per = Literal["ticker", "unit"]

# The one label set: what each per-ticker (per-unit) second means, printed beside it.
LABELS = {
    ("throughput", "ticker"): "s/ticker, throughput basis: run wall clock ÷ tickers (all "
                              "draws of a ticker)",
    ("throughput", "unit"): "s/unit, throughput basis: run wall clock ÷ units (one ticker × "
                            "one draw: the basis of a single-pass replay)",
    ("slot-latency", "unit"): "s/unit, slot-latency basis: one ticker-draw's first call start "
                              "to last call end (≈ throughput per unit × slots)",
    ("slot-latency", "ticker"): "s/ticker, slot-latency basis: the slot time of all a "
                                "ticker's draws (per unit × draws)",
}
# column names of per-run and per-path tables -> (basis, per)
COLUMNS = {
    "throughput_s_per_ticker": ("throughput", "ticker"), "throughput_s": ("throughput", "ticker"),
    "throughput_s_per_unit": ("throughput", "unit"),
    "slot_latency_s_per_unit": ("slot-latency", "unit"), "slot_latency_s": ("slot-latency", "unit"),
    "slot_latency_s_per_ticker": ("slot-latency", "ticker"),
}
SPEED_LABELS = {col: LABELS[key] for col, key in COLUMNS.items()}


def seconds(runs: pd.DataFrame, basis: Basis = "throughput", per: Per = "ticker",
            units: pd.DataFrame | None = None) -> pd.Series:
    """Real-scale seconds per ticker or per unit of each run (indexed like ``runs``).

    ``runs`` needs wall_s and time_scale (1 when absent); tickers_planned (else units) for
    per-ticker figures; the unit count and mean unit seconds come from ``units`` when given,
    else from the runs' own ``units`` / ``unit_seconds`` columns.
    """
    if (basis, per) not in LABELS:
        raise ValueError(f"basis must be one of {sorted({b for b, _ in LABELS})} and per one "
                         f"of ['ticker', 'unit'], got {basis!r}, {per!r}")
    r = runs
    n, unit_s = r.get("units"), r.get("unit_seconds")
    if units is not None:
        g = units.groupby("run_id")["seconds"]
        n = r["run_id"].map(g.size()).astype(float)
        unit_s = r["run_id"].map(g.mean())
    n = pd.Series(n, index=r.index, dtype=float)
    tickers = (r["tickers_planned"].astype(float).fillna(n) if "tickers_planned" in r else n)
    scale = r["time_scale"].astype(float) if "time_scale" in r else 1.0
    if basis == "throughput":
        out = r["wall_s"].astype(float) / (tickers if per == "ticker" else n)
    else:
        out = pd.Series(unit_s, index=r.index, dtype=float)
        out = out * n / tickers if per == "ticker" else out
    return (out / scale).replace([np.inf, -np.inf], np.nan)


def drift_df(nights: int) -> int:
    """The cosine terms (the interval's degrees of freedom) for `nights` nightly log ratios:
    Lazarus, Lewis, Stock & Watson's (2018) rule for the EWC test, floor(0.4 n^(2/3)), at
    least 4 and at most n - 1. With the drift-robust critical value (`evals.drift`) more
    terms make a narrower interval that covers more: at 5 nights 4 terms gave a median hi/lo
    of 2.08 and coverage 0.998 under AR(1) φ 0.5 drift where 2 terms gave 2.32 and 0.987
    (`bench/calibration_speed.py`)."""
    return int(min(nights - 1, max(4, math.floor(0.4 * nights ** (2 / 3)))))


def slowdown_interval(logs: np.ndarray, level: float = 0.95) -> tuple[float, float, int]:
    """(lo, hi, df) of the mean nightly log ratio, robust to slow night-to-night drift: an
    equal-weighted cosine (EWC) HAC variance (Lazarus, Lewis, Stock & Watson 2018) with the
    critical value that holds the level when the nights are a Gaussian AR(1) at φ 0.8, the
    slowest drift allowed (Müller 2014; `evals.drift`), never below Student t on its df.
    A backup that warms up or fills a cache over a week makes neighbouring nights' ratios
    alike: under AR(1) drift at φ 0.8 (sd 0.07-0.10) the t critical value covered 0.83-0.86
    at 5 nights; this one covers at least 0.95 for any φ <= 0.8 and drift of any size, with
    Gaussian or t3 innovations (`bench/calibration_speed.py`). The price is width: at 5 nights
    a median hi/lo of about 2.1 under φ 0.5 drift, 1.55 at 10. The variance is the mean
    square of the series' first df DCT-II coefficients, i.e. the long-run variance at the
    lowest frequencies. Needs 2 or more nights."""
    from scipy import fft   # `dualpath runs` imports this module, never this

    from dualpath.evals.drift import critical

    x = np.asarray(logs, dtype=float)
    n = len(x)
    if n < 2:
        raise ValueError("a slowdown interval needs 2 or more paired nights")
    nu = drift_df(n)
    lam = fft.dct(x, type=2, norm="ortho")[1:nu + 1]
    half = critical(n, nu, level) * math.sqrt(float(np.mean(lam ** 2)) / n)
    return float(x.mean() - half), float(x.mean() + half), nu


def with_speed(summary: pd.DataFrame) -> pd.DataFrame:
    """A `warehouse.queries.run_summaries` frame with each run's draws (`evals.draws`) and
    its speed columns: throughput_s
    (s/ticker), throughput_s_per_unit, slot_latency_s (s/unit), for complete one-segment
    runs only (NaN otherwise; a disturbed run's are shown, `speed_measured` keeps them out
    of every median)."""
    ok = summary["status"].eq("complete") & summary["segments"].eq(1)
    runs = summary.assign(units=summary["units_planned"])
    out = summary.assign(draws=run_draws(summary))
    for col in ("throughput_s", "throughput_s_per_unit", "slot_latency_s"):
        out[col] = seconds(runs, *COLUMNS[col]).where(ok)
    return out


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
    # a complete run whose server restarted, stalled or was shared, or that its harness
    # starved, is shown, not counted
    disturbed = r["disturbed"] if "disturbed" in r else pd.Series(None, index=r.index,
                                                                  dtype=object)
    per = lambda basis, unit: seconds(runs, basis, unit, units).set_axis(r.index)
    res = pd.DataFrame({
        "path": r["path"], "night": r.get("night"), "status": r["status"],
        "resumed": segments.gt(1), "disturbed": disturbed,
        "is_result": complete & segments.eq(1) & disturbed.isna(), "units": n_units,
        # the tickers the run scored (a headline's night is this experiment's size first)
        "tickers": (r["tickers_planned"] if "tickers_planned" in r
                    else pd.Series(float("nan"), index=r.index)),
        # the draws this run was scored with (`evals.draws`): every per-unit ratio uses them
        "draws": run_draws(r),
        "throughput_s_per_ticker": per("throughput", "ticker"),
        "throughput_s_per_unit": per("throughput", "unit"),
        "slot_latency_s_per_unit": per("slot-latency", "unit"),
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


SPEED_COLUMNS = ["path", "runs", "not_complete_excluded", "resumed_excluded",
                 "disturbed_excluded", "throughput_s_per_ticker", "throughput_s_per_unit", "slot_latency_s_per_unit",
                 "calls_per_unit", "prompt_tokens_per_unit", "completion_tokens_per_unit",
                 "per_call_prefill_tps", "per_call_decode_tps", "client_prompt_tps",
                 "client_decode_tps", "client_stream_decode_tps", "runaway_share",
                 "runaway_time_share", "runaway_s", "retries", "cached_prompt_share"]


@table("speed", "Speed per path, median over complete one-segment undisturbed runs (real-scale; "
       "s/ticker labelled by basis)", SPEED_COLUMNS,
       ["path", "runs", "not_complete_excluded", "resumed_excluded", "disturbed_excluded",
        "throughput_s_per_ticker", "throughput_s_per_unit", "slot_latency_s_per_unit",
        "runaway_share"],
       basis={c: SPEED_LABELS[c] for c in SPEED_COLUMNS if c in SPEED_LABELS},
       gloss={"not_complete_excluded": "runs left out: partial, failed or contaminated",
              "resumed_excluded": "complete runs left out: resumed, so no trustworthy clock",
              "disturbed_excluded": "complete runs left out: the server restarted, stalled "
                                    "or served someone else too, or the harness starved it",
              "per_call_decode_tps": "one call's decode rate from the server's timings, not "
                                     "the path's aggregate",
              "client_decode_tps": "generated tokens ÷ the run's wall clock: the aggregate",
              "runaway_share": "share of calls that stopped at max_tokens"},
       kinds={"runs": "int", "not_complete_excluded": "int", "resumed_excluded": "int",
              "retries": "int"},
       order=90, section="speed", empty="no speed yet: no path has a complete, undisturbed run")
def speed_table(d: MetricInputs) -> pd.DataFrame:
    """`path_speed` of the study's runs."""
    return path_speed(d.per_run) if len(d.per_run) else pd.DataFrame()


def path_speed(per_run: pd.DataFrame) -> pd.DataFrame:
    """Medians per path over the runs whose speed is a result, with counts of the runs left
    out: not complete (partial, failed, contaminated), complete but resumed, or complete in
    one segment but disturbed (server restarted, stalled or shared; harness starved)."""
    ok = per_run[per_run["is_result"]]
    cols = [c for c in per_run.columns if c not in ("run_id", "path", "night", "status",
                                                    "resumed", "disturbed", "is_result",
                                                    "units", "tickers", "draws")]
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


def path_totals(summary: pd.DataFrame) -> pd.DataFrame:
    """Per path over a `with_speed` run-summary frame: complete runs, runs not complete,
    units, grades, calls and runaways of complete runs, contaminated calls, and the medians
    of both bases and of the queue+HTTP share over the runs whose speed is measured."""
    done = summary["status"].eq("complete")
    measured = summary["speed_measured"].fillna(False).astype(bool)
    rows = []
    for path, g in summary.groupby("path", sort=True):
        c, m = g[done.loc[g.index]], g[measured.loc[g.index]]
        rows.append({"path": path, "complete_runs": len(c), "runs_not_complete": len(g) - len(c),
                     "units": int(c["units_done"].sum()), "graded": int(c["graded"].sum()),
                     "parse_failed": int(c["parse_failed"].sum()), "calls": int(c["calls"].sum()),
                     "runaway": int(c["runaway"].sum()),
                     "contaminated_calls": int(g["contaminated"].sum()),
                     "throughput_s_median": m["throughput_s"].median(),
                     "throughput_s_per_unit_median": m["throughput_s_per_unit"].median(),
                     "slot_latency_s_median": m["slot_latency_s"].median(),
                     "overhead_share": m["overhead_share"].median()})
    return pd.DataFrame(rows)
