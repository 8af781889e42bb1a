"""Render a `ReportData` to one self-contained HTML file and one Markdown file (jinja2)."""

from __future__ import annotations

import math
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd

from evals.weekly import ReportData, figures

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("evals.weekly", "templates"),
                          autoescape=jinja2.select_autoescape(["html"]),
                          trim_blocks=True, lstrip_blocks=True)


def fmt(v) -> str:
    """A cell: numbers to 3 significant decimals, tiny p-values in scientific notation."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        if v != 0 and abs(v) < 1e-3:
            return f"{v:.1e}"
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
    if isinstance(v, pd.Timestamp):
        return v.date().isoformat() if v == v.normalize() else v.isoformat()
    return str(v)


def table(frame: pd.DataFrame | None, cols: list[str] | None = None) -> dict:
    """{'cols': [...], 'rows': [[str, ...]]} for the templates; empty frames stay empty."""
    if frame is None or not len(frame):
        return {"cols": [], "rows": []}
    if cols:
        frame = frame[[c for c in cols if c in frame]]
    return {"cols": [str(c) for c in frame.columns],
            "rows": [[fmt(v) for v in row] for row in frame.itertuples(index=False)]}


def latency_percentiles(calls: pd.DataFrame) -> pd.DataFrame:
    """Per path: client latency, time to first token and time per output token at p50/90/99
    (as `vllm bench serve` reports them), each with its basis."""
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


def context(d: ReportData) -> dict:
    """What the templates show, section by section."""
    m = d.metrics
    colors = figures.path_colors(d.paths)
    span = f"{d.experiment}, {d.since} – {d.until}"
    nights = int(d.runs["night"].nunique()) if len(d.runs) else 0
    primary_h = (d.plan.primary or {}).get("horizon")
    comparison = getattr(m, "comparison", pd.DataFrame())
    primary = comparison[comparison["horizon"] == primary_h] if primary_h and len(comparison) \
        and "horizon" in comparison else comparison.head(1)
    speed = getattr(m, "speed", pd.DataFrame())
    projected = pd.DataFrame()
    if len(speed) and "throughput_s_per_ticker" in speed:
        projected = pd.DataFrame({"path": speed["path"], "hours_for_100_tickers":
                                  speed["throughput_s_per_ticker"] * 100 / 3600})
    not_complete = d.runs[d.runs["status"] != "complete"] if len(d.runs) else d.runs
    return {
        "d": d, "span": span, "nights": nights, "label": d.plan.label,
        "primary": table(primary), "comparison": table(comparison),
        "rank_ic": table(getattr(m, "rank_ic", None)),
        "self_agreement": table(getattr(m, "self_agreement", None)),
        "cross_path": table(getattr(m, "cross_path", None)),
        "grades": table(getattr(m, "grades", None)),
        "extra": {name: table(getattr(m, name)) for name in ("draws", "signal_shape",
                                                              "by_grade") if hasattr(m, name)},
        "speed": table(speed), "latency": table(latency_percentiles(d.calls)),
        "projected": table(projected),
        "runs": table(d.runs, ["night", "path", "status", "graded", "parse_failed", "failed",
                               "calls", "runaway", "retries", "contaminated", "throughput_s",
                               "slot_latency_s", "status_detail"]),
        "excluded": table(not_complete, ["night", "path", "status", "status_detail"]),
        "sessions": table(d.sessions), "deviations": table(d.deviations),
        "sweeps": sweeps(d),
        "notes": list(getattr(m, "notes", [])),
        "figs": {
            "rank_ic": figures.rank_ic(getattr(m, "nightly_ic", pd.DataFrame()), colors,
                                       f"RankIC — {span}, {nights} nights"),
            "grades": figures.grade_distribution(getattr(m, "grades", pd.DataFrame()), colors,
                                                 f"grade distribution — {span}"),
            "speed": figures.speed_by_night(d.runs, colors, f"speed by night — {span}"),
            "quality_speed": figures.quality_vs_speed(
                getattr(m, "nightly_ic", pd.DataFrame()), speed, colors, primary_h or 1,
                f"quality vs speed — {span}"),
            "confusion": {p: figures.draw_confusion(d.units, p, f"{p}: draw 1 vs draw 2")
                          for p in d.paths},
        },
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
