"""Results: the metric tables, the preregistered plan, the weekly report."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from dualpath.cli._common import (CONFIG_OPT, FORMAT_OPT, _parse_date, app, console,
                                  date_range, err_console, input_file, output_dir,
                                  output_file, print_frame)
from dualpath.config import load_config
from dualpath.errors import UserError


def load_metrics(cfg, paths: list[str] | None = None, since: date | None = None,
                 until: date | None = None):
    """All metric tables for an experiment, from the warehouse (see `flows.metrics`): under
    a frozen plan, the nights the report analyses, the primary verdict first in the notes."""
    from flows.metrics import load_metrics as load

    return load(cfg, paths, since, until)


METRIC_TABLES = {
    # key: (title, columns for csv/json, the fewer columns a terminal table shows or None)
    "rank_ic": ("RankIC per path x horizon (matured nights; t, p and CI on non-overlapping "
                "nights, or why not)",
                ["path", "horizon", "nights", "mean_ic", "sd_ic", "icir", "share_positive",
                 "skew", "excess_kurtosis", "n_independent", "tested_mean", "t", "df", "p",
                 "ci_low", "ci_high", "ci_level", "ci_method", "basis", "note", "pending_nights"],
                ["path", "horizon", "nights", "mean_ic", "icir", "tested_mean", "t", "df", "p",
                 "ci_low", "ci_high", "ci_level", "ci_method", "note", "pending_nights"]),
    "comparison": ("ΔIC = IC(candidate) − IC(baseline) on common tickers, each horizon's "
                   "planned test (non-inferior when the one-sided lower bound > −margin); "
                   "the interval is centred on `estimate` (ci_text says its level and "
                   "method); exploratory rows Holm-adjusted",
                   ["baseline", "candidate", "horizon", "role", "test", "nights",
                    "unpaired_nights", "unpaired_ticker_nights", "mean_common_tickers",
                    "mean_delta", "sd_delta", "rho_ic", "n_independent", "estimate", "df",
                    "ci_low", "ci_high", "ci_level", "ci_method", "ci_text", "basis", "margin",
                    "alpha", "p_claim", "p_claim_holm", "p_counter", "p_counter_holm",
                    "p_noninferior", "p_inferior", "verdict", "p_equivalent", "equivalence",
                    "mde", "power", "power_basis", "note"],
                   ["horizon", "role", "test", "nights", "unpaired_nights", "mean_delta",
                    "estimate", "ci_low", "ci_high", "ci_level", "margin", "verdict", "power",
                    "note"]),
    "cross_path": ("Cross-path agreement of mean scores", None, None),
    "self_agreement": ("Self-reproducibility between draws (pooled over nights; chance = "
                       "mean pairwise Cohen p_e)",
                       ["path", "ticker_nights", "draws", "exact_agreement", "chance_agreement",
                        "kappa_exact", "mean_qwk", "krippendorff_alpha", "icc_1_1", "icc_1_k",
                        "spearman_brown_k", "note"], None),
    "draws": ("What each draw buys: IC of the mean of k draws (measured), Spearman-Brown "
              "projection beyond, with its interval", ["path", "horizon", "k", "basis", "nights",
                                               "mean_ic", "reliability", "attenuation",
                                               "projected_ic", "projected_ci_low",
                                               "projected_ci_high", "projected_ci"], None),
    "signal_shape": ("Signal shape: top-minus-bottom quintile forward return, score rank "
                     "autocorrelation night to night", None, None),
    "by_grade": ("Mean forward return by grade (mean score rounded)", None, None),
    "grades": ("Grade distribution (share of units; failed = no grade)", None, None),
    "speed": ("Speed per path, median over complete runs (real-scale; s/ticker labelled by basis)",
              ["path", "runs", "not_complete_excluded", "partial_runs_excluded",
               "resumed_excluded", "disturbed_excluded",
               "throughput_s_per_ticker", "slot_latency_s_per_ticker", "calls_per_unit",
               "calls_per_ticker", "per_call_prefill_tps", "per_call_decode_tps",
               "client_decode_tps", "runaway_share", "runaway_time_share", "retries",
               "cached_prompt_share"], None),
}


def print_metrics(m, fmt: str, horizon: int | None = None, only: list[str] | None = None,
                  meta: dict | None = None, out_dir: Path | None = None) -> None:
    """The metric tables as rich tables, CSV (one file per table with `out_dir`) or JSON
    (tables, notes and `meta`)."""
    import orjson
    out = {}
    for key, (title, cols, table_cols) in METRIC_TABLES.items():
        if only and key not in only:
            continue
        frame = getattr(m, key, pd.DataFrame())
        if horizon is not None and "horizon" in frame:
            frame = frame[frame["horizon"] == horizon]
        if key == "comparison" and len(frame) and "margin" in frame:
            r = frame.iloc[0]
            title += (f" — {r['candidate']} vs {r['baseline']}, margin δ = {r['margin']:g}, "
                      f"α = {r['alpha']:g}")
        cols = table_cols or cols if fmt == "table" else cols
        if cols is not None and len(frame):
            frame = frame[[c for c in cols if c in frame]]
        if fmt == "json":
            out[key] = frame.to_dict("records")
        elif fmt == "csv" and out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            frame.to_csv(out_dir / f"{key}.csv", index=False)
        elif fmt == "csv":
            sys.stdout.write(f"# {key}\n")
            print_frame(frame, "csv")
        elif len(frame):
            print_frame(frame, fmt, title)
    if fmt == "json":
        doc = {"meta": meta or {}, "tables": out, "notes": list(m.notes)}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_INDENT_2,
                                      default=str).decode() + "\n")
    elif fmt == "csv" and out_dir is not None:
        (out_dir / "notes.txt").write_text("".join(f"{n}\n" for n in m.notes))
        err_console.print(f"wrote {len(list(out_dir.glob('*.csv')))} table(s) as CSV into "
                          f"{out_dir}")
    elif fmt == "table":
        for note in m.notes:
            console.print(f"[yellow]note:[/yellow] {note}")


@app.command()
def metrics(config: Path = CONFIG_OPT,
            path: Optional[list[str]] = typer.Option(None, "--path", help="Only these paths."),
            horizon: Optional[int] = typer.Option(None, help="Only this horizon."),
            since: Optional[str] = typer.Option(None, help="Only nights from YYYY-MM-DD."),
            fmt: str = FORMAT_OPT,
            plot: Optional[Path] = typer.Option(None, help="Also write a PNG of the comparison."),
            out: Optional[Path] = typer.Option(None, help="With -f csv: one file per table "
                                               "into this folder.")) -> None:
    """RankIC, path comparison, self-reproducibility and speed (complete runs only)."""
    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--format {fmt!r}: use table, csv or json")
    cfg = load_config(config)
    if horizon is not None and horizon not in cfg.experiment.horizons:
        raise UserError(f"--horizon {horizon}: the experiment's horizons are {cfg.experiment.horizons}")
    start = _parse_date(since, "--since") if since else None
    if out is not None and fmt != "csv":
        raise UserError("--out writes CSV files: add -f csv")
    if plot is not None:
        output_file(plot, "--plot")
    if out is not None:
        output_dir(out, "--out", create=False)
    m = load_metrics(cfg, path, start)
    meta = None
    if fmt == "json":
        from flows.metrics import metadata
        meta = metadata(cfg, start)
    print_metrics(m, fmt, horizon, meta=meta,
                  out_dir=output_dir(out, "--out") if out is not None else None)
    if plot is not None:
        from evals.plots import plot_comparison
        err_console.print(f"wrote {plot_comparison(m, plot, horizon or cfg.experiment.horizons[0])}")


@app.command()
def report(config: Path = CONFIG_OPT,
           week: Optional[str] = typer.Option(None, help="ISO week, e.g. 2027-W19: everything "
                                              "from the window's start to that week's end."),
           since: Optional[str] = typer.Option(None, help="First night (YYYY-MM-DD)."),
           until: Optional[str] = typer.Option(None, help="Last night (YYYY-MM-DD)."),
           out: Path = typer.Option(Path("reports"), help="Folder for the HTML and Markdown.")) -> None:
    """The weekly comparison report: one self-contained HTML file and one Markdown file."""
    from flows.weekly import week_range, write_report

    cfg = load_config(config)
    lo = _parse_date(since, "--since") if since else None
    hi = _parse_date(until, "--until") if until else None
    date_range(lo, hi)
    if week:
        if since or until:
            raise UserError("give --week or --since/--until, not both")
        lo, hi = None, week_range(week)[1]
    html, md, data = write_report(cfg, output_dir(out, "--out"), lo, hi)
    console.print(f"report ({data.plan.label}): {html}\n                      {md}")
