"""Render a `ReportData` to one self-contained HTML file and one Markdown file (jinja2).

The first screen decides: the headline's two cards (the primary verdict, how much slower)
come before anything else, in the words `evals.headline` gives every reader. Tables show
their registered brief columns, with every column folded beneath; each cell goes through the
one formatter (`evals.format.cell`).
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import numpy as np
import pandas as pd

from evals.format import cell
from evals.registry import registered
from evals.thinking import thinking_share
from evals.weekly import ReportData, figures

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("evals.weekly", "templates"),
                          # the templates are named *.html.j2: select_autoescape matches a
                          # name's ending, and ["html"] alone left every HTML template raw
                          # (a freeze reason, a server's error text or alias ran as script)
                          autoescape=jinja2.select_autoescape(["html", "html.j2"]),
                          trim_blocks=True, lstrip_blocks=True)

fmt = cell   # the one formatter, under the name the templates and older callers use


def table(frame: pd.DataFrame | None, cols: list[str] | None = None,
          kinds: dict[str, str] | None = None) -> dict:
    """{'cols': [...], 'rows': [[str, ...]]} for the templates; empty frames stay empty;
    `kinds` names a column's `evals.format.cell` kind."""
    if frame is None or not len(frame):
        return {"cols": [], "rows": [], "notes": []}
    if cols:
        frame = frame[[c for c in cols if c in frame]]
    kind = [(kinds or {}).get(str(c)) for c in frame.columns]
    return {"cols": [str(c) for c in frame.columns],
            "rows": [[cell(v, k) for v, k in zip(row, kind)]
                     for row in frame.itertuples(index=False)],
            "notes": []}


def registered_table(key: str, frame: pd.DataFrame | None, wide: bool = False) -> dict:
    """A registered table: brief columns (all with ``wide``), its formats and footnotes."""
    spec = registered()[key]
    if frame is None or not len(frame):
        return {"cols": [], "rows": [], "notes": []}
    shown = spec.select(frame, wide)
    return {"cols": [str(c) for c in shown.columns], "rows": spec.rows(shown),
            "notes": spec.footnotes(shown)}


def both(key: str, frame: pd.DataFrame | None) -> dict:
    """The brief table and, folded beneath it, every column (when there are more)."""
    brief = registered_table(key, frame)
    full = registered_table(key, frame, wide=True)
    return {**brief, "full": full if full["cols"] != brief["cols"] else None}


def real_scale_calls(calls: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Client-clock seconds of each call divided by its run's time scale (simulated paths
    compress their clocks); server timings are real-scale already."""
    if not len(calls) or "time_scale" not in runs:
        return calls
    scale = calls["run_id"].map(runs.set_index("run_id")["time_scale"]).fillna(1.0)
    return calls.assign(latency_s=calls["latency_s"] / scale, ttft_s=calls["ttft_s"] / scale)


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


SWEEP_COLUMNS = ["label", "slots", "status", "verdict", "decode_tps", "share_of_best",
                 "prefill_tps", "ticker_s_throughput", "ticker_s_latency", "cached_share",
                 "calls_ok", "calls_planned", "failure_kind"]


def sweeps(d: ReportData) -> list[dict]:
    """Each recorded sweep: title, verdict table and figure."""
    from evals.sweep_plot import sweep_figure

    out = []
    for s in d.sweeps:
        sw, t = s["sweep"], s["table"]
        title = (f"sweep {sw['name']} of path {sw['path']} over replay set "
                 f"{str(sw['replay_hash'])[:12]} ({sw['mode']}, knee within "
                 f"{float(sw['knee_share']):.0%} of the best)")
        out.append({"title": title, "chosen": sw.get("chosen_point") or "none (nothing "
                    "replayed every frozen call)", "table": table(t, SWEEP_COLUMNS),
                    "fig": figures.uri_of(sweep_figure(t, title)) if len(t) else None})
    return out


def _primary(d: ReportData) -> pd.DataFrame:
    comparison = getattr(d.metrics, "comparison", pd.DataFrame())
    if not len(comparison) or "role" not in comparison:
        return comparison
    return comparison[comparison["role"] == "primary"]


def cards(d: ReportData) -> list[dict]:
    """The headline as cards (quality, speed, energy): each a title line, its detail lines,
    and a class."""
    h = d.headline
    if h is None:
        return []
    v = h.verdict
    # an interim look is no decision: never the colour of one
    tone = "open" if v.label == "interim" else "good" if v.verdict in (
        "non-inferior", "equivalent", "candidate better") else "bad" if v.decided else "open"
    out = [{"cls": f"verdict {tone}", "lines": list(h.quality)}]
    if h.speed:
        out.append({"cls": "slowdown", "lines": list(h.speed)})
    if getattr(h, "energy", ()):
        out.append({"cls": "energy", "lines": list(h.energy)})
    return out


def figs(d: ReportData, span: str, nights: int) -> dict:
    m, colors = d.metrics, figures.path_colors(d.paths)
    primary_h = (d.plan.primary or {}).get("horizon") or 1
    uri = figures.uri_of
    return {
        "rank_ic": uri(figures.rank_ic(getattr(m, "nightly_ic", pd.DataFrame()), colors,
                                       f"RankIC — {span}, {nights} nights")),
        "grades": uri(figures.grade_distribution(getattr(m, "grades", pd.DataFrame()), colors,
                                                 f"grade distribution — {span}")),
        "speed": uri(figures.speed_by_night(d.runs, colors, f"speed by night — {span}")),
        "quality_speed": uri(figures.quality_vs_speed(
            getattr(m, "rank_ic", pd.DataFrame()), getattr(m, "speed", pd.DataFrame()), colors,
            primary_h, f"quality vs speed — {span}")),
        "confusion": {p: uri(figures.draw_confusion(d.units, p, f"{p}: draw 1 vs draw 2"))
                      for p in d.paths},
    }


def _left_out_of(runs: pd.DataFrame) -> pd.Series:
    """Per run, what it is kept out of: every metric (not complete), speed (complete but
    resumed or disturbed), or nothing (empty)."""
    complete = runs["status"].eq("complete")
    resumed = runs["segments"].gt(1) if "segments" in runs else complete & False
    disturbed = runs["disturbed"].notna() if "disturbed" in runs else complete & False
    return pd.Series(np.select([~complete, resumed | disturbed], ["every metric", "speed"], ""),
                     index=runs.index)


def left_out(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run the report leaves out of something, with what and why (one line)."""
    if not len(runs):
        return pd.DataFrame(columns=["night", "path", "status", "left_out", "why"])
    out = runs.assign(left_out=_left_out_of(runs))
    out = out[out["left_out"] != ""].copy()
    detail = out["status_detail"].fillna("") if "status_detail" in out else ""
    resumed = out["segments"].gt(1) if "segments" in out else out["status"].isna()
    why = np.where(out["status"] != "complete", out["status"] + ": " + detail,
                   np.where(resumed, "resumed: its interrupted segment has no trustworthy clock",
                            out.get("disturbed", pd.Series("", index=out.index)).fillna("")))
    return out.assign(why=pd.Series(why, index=out.index).str.rstrip(": "))


def context(d: ReportData) -> dict:
    """What the templates show, section by section."""
    m = d.metrics
    span = f"{d.experiment}, {d.since} – {d.until}"
    nights = int(d.runs["night"].nunique()) if len(d.runs) else 0
    speed = getattr(m, "speed", pd.DataFrame())
    projected = pd.DataFrame()
    if len(speed) and "throughput_s_per_ticker" in speed:
        projected = pd.DataFrame({"path": speed["path"], "hours_for_100_tickers":
                                  speed["throughput_s_per_ticker"] * 100 / 3600}).dropna()
    left = left_out(d.runs)
    return {
        "d": d, "span": span, "nights": nights, "label": d.plan.label, "cards": cards(d),
        "primary": both("comparison", _primary(d)),
        "comparison": both("comparison", getattr(m, "comparison", None)),
        "rank_ic": both("rank_ic", getattr(m, "rank_ic", None)),
        "self_agreement": both("self_agreement", getattr(m, "self_agreement", None)),
        "cross_path": both("cross_path", getattr(m, "cross_path", None)),
        "grades": both("grades", getattr(m, "grades", None)),
        "extra": {name: both(name, getattr(m, name)) for name in ("draws", "signal_shape",
                                                                   "by_grade") if hasattr(m, name)},
        "speed": both("speed", speed),
        "serving": both("serving", getattr(m, "serving", None)),
        "latency": table(latency_percentiles(real_scale_calls(d.calls, d.runs))),
        "projected": table(projected, kinds={"hours_for_100_tickers": "h"}),
        "runs": table(d.runs.assign(left_out=_left_out_of(d.runs)) if len(d.runs) else d.runs,
                      ["night", "path", "status", "left_out", "graded", "parse_failed", "failed",
                       "calls", "runaway", "retries", "contaminated", "throughput_s",
                       "slot_latency_s", "status_detail"]),
        "excluded": table(left, ["night", "path", "status", "left_out", "why"]),
        "sessions": table(d.sessions), "deviations": table(d.deviations),
        "thinking": table(thinking_share(d.calls)), "declared": list(d.declared),
        "sweeps": sweeps(d), "notes": list(getattr(m, "notes", [])),
        "figs": figs(d, span, nights),
    }


def render(d: ReportData, out_dir: Path, stem: str) -> tuple[Path, Path]:
    """Write `<stem>.html` and `<stem>.md` into `out_dir`; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = context(d)
    html = out_dir / f"{stem}.html"
    md = out_dir / f"{stem}.md"
    html.write_text(_ENV.get_template("report.html.j2").render(**ctx), encoding="utf-8")
    md.write_text(_ENV.get_template("report.md.j2").render(**ctx), encoding="utf-8")
    return html, md
