"""The serving-benchmark block `vllm bench serve` and GuideLLM print, from the stored calls.

Per path, over the calls of the runs whose speed is a result (complete, one segment,
undisturbed: `evals.speed.run_speed`'s ``is_result``, the same exclusion the speed medians
use), in real-scale time:

* ``req_per_s``: answered calls ÷ the runs' summed wall clock (client clock); a failed call
  (error_kind set) is counted apart, as vllm bench counts failed requests, and is in no figure;
* ``out_tok_per_s``: completion tokens ÷ the same wall clock (client clock);
* ``ttft_p*`` (ms): time to first token, each streamed call's (client clock);
* ``tpot_p*`` (ms): time per output token after the first, (latency − TTFT) ÷ (tokens − 1), of
  each streamed call with 2+ tokens (client clock; vLLM's definition);
* ``itl_p*`` (ms): each call's mean inter-token gap from the server's own decode timing,
  predicted_ms ÷ predicted_n (server clock): the per-token gaps themselves are not stored,
  so this is a per-call mean, not vLLM's distribution over every gap;
* ``goodput``: the share of judged calls (streamed) meeting both SLOs below.

Percentiles are `numpy.percentile`'s linear interpolation, as `vllm bench serve` computes
them. A path with no such run has no row (a row of dashes says nothing): `missing` gives
its line instead, what kept each of its runs out in the words of the report's "Left out, and
why" (the run's status, resumed, or the first kind of its disturbance: starved, stalled,
restarted, shared, ...). The module takes frames and returns a frame (no warehouse access).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dualpath.evals.inputs import MetricInputs
from dualpath.evals.registry import table

SLO_TTFT_MS = 5000.0    # a first token within 5 s
SLO_TPOT_MS = 200.0     # then at least 5 tokens/s
PERCENTILES = (50, 90, 99)
METRICS = ("ttft", "tpot", "itl")    # ms each

SERVING_COLUMNS = (["path", "runs", "requests", "failed", "req_per_s", "out_tok_per_s"]
                   + [f"{m}_p{p}" for m in METRICS for p in PERCENTILES] + ["goodput"])
_CLIENT = "client clock, real-scale"
_BASIS = {"req_per_s": f"requests/s, {_CLIENT}: calls ÷ the runs' summed wall clock",
          "out_tok_per_s": f"tokens/s, {_CLIENT}: completion tokens ÷ the runs' summed wall clock",
          **{f"ttft_p{p}": f"ms, {_CLIENT}: time to first token (streamed calls)"
             for p in PERCENTILES},
          **{f"tpot_p{p}": f"ms, {_CLIENT}: (latency − TTFT) ÷ (tokens − 1)"
             for p in PERCENTILES},
          **{f"itl_p{p}": "ms, server clock: each call's predicted_ms ÷ predicted_n "
                             "(a per-call mean gap; per-token gaps are not stored)"
             for p in PERCENTILES},
          "goodput": f"share of streamed calls with TTFT ≤ {SLO_TTFT_MS:.0f} ms and TPOT ≤ "
                     f"{SLO_TPOT_MS:.0f} ms ({_CLIENT})"}


def percentiles(values: pd.Series) -> list[float]:
    """p50, p90, p99 of the non-missing values (linear interpolation; NaN when none)."""
    v = pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float)
    return [float(np.percentile(v, p)) if len(v) else float("nan") for p in PERCENTILES]


def per_call(calls: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Each call's real-scale TTFT, TPOT and server-side ITL in ms (NaN where unmeasured)."""
    scale = calls["run_id"].map(runs.set_index("run_id")["time_scale"]).astype(float)
    latency = calls["latency_s"].astype(float) / scale * 1e3
    ttft = calls["ttft_s"].astype(float) / scale * 1e3
    tokens = calls["completion_tokens"].astype(float)
    tpot = ((latency - ttft) / (tokens - 1)).where(tokens > 1)
    itl = (calls["predicted_ms"].astype(float) / calls["predicted_n"].astype(float)).where(
        calls["predicted_n"].astype(float) > 0)
    failed = (calls["error_kind"].notna() if "error_kind" in calls
              else pd.Series(False, index=calls.index))
    return pd.DataFrame({"path": calls["path"], "ttft": ttft, "tpot": tpot,
                         "itl": itl, "tokens": tokens, "failed": failed})


@table("serving", "Serving benchmark per path (as vllm bench serve): over complete "
       "one-segment undisturbed runs, real-scale; percentiles p50/p90/p99",
       SERVING_COLUMNS,
       ["path", "runs", "req_per_s", "out_tok_per_s", "ttft_p50", "ttft_p99", "tpot_p50",
        "tpot_p99", "goodput"],
       basis=_BASIS,
       gloss={"requests": "calls answered (failed ones are counted apart, in no figure)",
              "failed": "calls whose last attempt failed (error_kind set)"},
       kinds={"runs": "int", "requests": "int", "failed": "int"},
       optional=[c for c in SERVING_COLUMNS if c.split("_p")[0] in METRICS] + ["goodput"],
       order=100, section="speed",
       empty="no serving figures: no path has a complete, undisturbed run")
def serving_table(d: MetricInputs) -> pd.DataFrame:
    """`serving_benchmark` of the study's calls and runs."""
    return serving_benchmark(d.calls, d.runs, d.per_run) if len(d.per_run) else pd.DataFrame()


def serving_benchmark(calls: pd.DataFrame, runs: pd.DataFrame,
                      per_run: pd.DataFrame) -> pd.DataFrame:
    """One row per path from the ``calls`` and ``runs`` frames and `run_speed`'s per-run
    frame (whose ``is_result`` picks the runs); a path without such a run has no row
    (`missing` says why)."""
    result = per_run["is_result"].astype(bool)
    paths = sorted(per_run.loc[result, "path"].unique())
    ok_runs = per_run.loc[result, "run_id"]
    r = runs[runs["run_id"].isin(ok_runs)]
    c = calls[calls["run_id"].isin(ok_runs)]
    pc = per_call(c, r)
    wall = r["wall_s"].astype(float) / r["time_scale"].astype(float)
    rows = []
    for path in paths:
        mine = pc[pc["path"].eq(path)]
        failed = int(mine["failed"].sum())
        mine = mine[~mine["failed"]]      # as vllm bench: figures of completed requests
        secs = float(wall[r["path"].eq(path)].sum())
        judged = mine["ttft"].notna() & mine["tpot"].notna()
        good = (mine["ttft"] <= SLO_TTFT_MS) & (mine["tpot"] <= SLO_TPOT_MS)
        row = {"path": path, "runs": int(r["path"].eq(path).sum()), "requests": len(mine),
               "failed": failed,
               "req_per_s": len(mine) / secs if secs > 0 else float("nan"),
               "out_tok_per_s": float(mine["tokens"].sum()) / secs if secs > 0 else float("nan")}
        for m in METRICS:
            row.update(zip((f"{m}_p{p}" for p in PERCENTILES), percentiles(mine[m])))
        row["goodput"] = float(good[judged].mean()) if judged.any() else float("nan")
        rows.append(row)
    return pd.DataFrame(rows, columns=SERVING_COLUMNS)


def _why(run) -> str:
    """What keeps one run's speed from being a result, in a word: its status when it is not
    complete, 'resumed', else the first kind of its disturbance ('starved', 'stalled', ...)."""
    if run.get("status") != "complete":
        return str(run.get("status"))
    if bool(run.get("resumed", False)):
        return "resumed"
    disturbed = run.get("disturbed")
    if isinstance(disturbed, str) and disturbed:
        return disturbed.split(";", 1)[0].split(":", 1)[0].strip()
    return "not a result"


def missing(per_run: pd.DataFrame) -> list[str]:
    """One line per path of `run_speed`'s per-run frame with no run whose speed is a result:
    how many of its runs each reason kept out, the commonest first ("backup: no complete,
    one-segment, undisturbed run — 20 starved, 1 partial; see `dualpath runs`")."""
    if not len(per_run):
        return []
    out = []
    for path, g in per_run.groupby("path", sort=True):
        if g["is_result"].astype(bool).any():
            continue
        counts = pd.Series([_why(r) for r in g.to_dict("records")]).value_counts(sort=False)
        counts = counts.sort_values(ascending=False, kind="stable")
        reasons = ", ".join(f"{n} {why}" for why, n in counts.items())
        out.append(f"{path}: no complete, one-segment, undisturbed run — {reasons}; see "
                   "`dualpath runs`")
    return out


def unmeasured(serving: pd.DataFrame) -> list[str]:
    """A line for each figure of the serving table that no path has (its columns are left
    out of what a person reads): the time to first token needs streamed replies, the
    inter-token gap a server that reports its own decode timings."""
    if not len(serving):
        return []
    out = []
    if serving[[f"ttft_p{p}" for p in PERCENTILES]].isna().all().all():
        out.append("ttft, tpot, goodput: not measured on any path — no call of these runs "
                   "was streamed (a first token's time needs a streamed reply: stream = true "
                   "in the path's config)")
    if serving[[f"itl_p{p}" for p in PERCENTILES]].isna().all().all():
        out.append("itl: not measured on any path — no server reported its own decode "
                   "timings (vLLM's replies carry none; llama-server's do)")
    return out
