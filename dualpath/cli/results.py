"""Results: the metric tables, the preregistered plan, the weekly report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from dualpath.cli._common import (CONFIG_OPT, FORMAT_OPT, _parse_date, app, console,
                                  date_range, emit_json, err_console, input_file,
                                  output_dir, output_file, print_frame, print_registered,
                                  records)
from dualpath.cli._common import load_config
from dualpath.errors import UserError
from dualpath.evals.wrap import hang


def print_metrics(m, fmt: str, horizon: int | None = None, only: list[str] | None = None,
                  meta: dict | None = None, out_dir: Path | None = None, headline=None,
                  wide: bool = False, verbose: bool = False) -> None:
    """The headline first (its details with ``verbose``), then every registered table: rich
    tables of the brief columns (all with ``wide``), CSV (one file per table with `out_dir`)
    or one JSON document (the result object, headline, tables, notes and `meta`). csv and
    json carry every column."""
    import pandas as pd

    from dualpath.evals.result import headline_table
    from dualpath.evals.registry import registered

    frames = {}
    for key, spec in registered().items():
        if only and key not in only:
            continue
        if key == "headline":
            frame = headline_table(headline) if headline is not None else pd.DataFrame()
        else:
            frame = getattr(m, key, pd.DataFrame())
        if horizon is not None and "horizon" in frame:
            frame = frame[frame["horizon"] == horizon]
        frames[key] = (spec, frame)
    if fmt == "json":
        from dualpath.evals.result import result

        doc = {"meta": meta or {}, "result": result(headline) if headline else None,
               "headline": list(headline.lines) if headline else [],
               "tables": {k: records(spec.select(f)) for k, (spec, f) in frames.items()},
               "notes": list(m.notes)}
        if getattr(m, "verdict", None) is not None:      # the label and verdict, as data
            from dataclasses import asdict
            doc["primary"] = asdict(m.verdict)
        emit_json(doc)
    elif fmt == "csv":
        _write_csv(frames, m.notes, out_dir)
    else:
        _print_tables(frames, m.notes, headline, wide, verbose,
                      {"serving": list(getattr(m, "serving_missing", []))
                       + list(getattr(m, "serving_unmeasured", []))})


def _print_tables(frames: dict, notes: list[str], headline, wide: bool, verbose: bool,
                  missing: dict[str, list[str]] | None = None) -> None:
    """Each table with rows, then the line of each path a table has no row for (`missing`:
    table key -> lines), in its place."""
    missing = missing or {}
    if headline is not None:
        for line in headline.lines if verbose else headline.brief:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        console.print()
    for key, (spec, frame) in frames.items():
        if key == "headline" or not (len(frame) or missing.get(key)):
            continue
        title = spec.title
        if key == "comparison" and "margin" in frame:
            # the primary's margin: the first row is the shortest horizon, an exploratory
            # row whose margin may be another (a plan's δ = 0.9 at h = 1 headed the table)
            primary = frame[frame["role"] == "primary"] if "role" in frame else frame
            r = (primary if len(primary) else frame).iloc[0]
            title += (f" — {r['candidate']} vs {r['baseline']}, primary h={r['horizon']} "
                      f"margin δ = {r['margin']:g}, α = {r['alpha']:g}")
        from dualpath.cli.metrics_table import print_fitted
        print_fitted(spec, frame, title, wide, missing.get(key, ()))
    if not wide:
        console.print("(brief columns; --wide, -f csv and -f json show every column)",
                      style="dim", highlight=False)
    for note in notes:       # wrapped under their own indent, never back at column 0
        for line in hang(f"note: {note}", max(40, console.width)):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def _write_csv(frames: dict, notes: list[str], out_dir: Path | None) -> None:
    for key, (spec, frame) in frames.items():
        frame = spec.select(frame)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            frame.to_csv(out_dir / f"{key}.csv", index=False)
        else:
            sys.stdout.write(f"# {key}\n")
            print_frame(frame, "csv")
    if out_dir is not None:
        (out_dir / "notes.txt").write_text("".join(f"{n}\n" for n in notes))
        err_console.print(f"wrote {len(list(out_dir.glob('*.csv')))} table(s) as CSV into "
                          f"{out_dir}")


@app.command()
def metrics(config: Path = CONFIG_OPT,
            path: Optional[list[str]] = typer.Option(None, "--path", help="Only these paths."),
            horizon: Optional[int] = typer.Option(None, help="Only this horizon."),
            since: Optional[str] = typer.Option(None, help="Only nights from YYYY-MM-DD."),
            fmt: str = FORMAT_OPT,
            plot: Optional[Path] = typer.Option(None, help="Also write a PNG of the comparison."),
            out: Optional[Path] = typer.Option(None, help="With -f csv: one file per table "
                                               "into this folder."),
            wide: bool = typer.Option(False, "--wide", help="Every column of every table "
                                      "(csv and json always carry every column)."),
            verbose: bool = typer.Option(False, "--verbose", "-v", help="The headline's "
                                         "details too (the weekly report always shows "
                                         "them).")) -> None:
    """Both answers first (the primary verdict; how much slower), then RankIC, the path
    comparison, self-reproducibility and speed (complete runs only)."""
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
    from dualpath.flows.glance import metrics_and_headline

    m, head = metrics_and_headline(cfg, path, start)
    meta = None
    if fmt == "json":
        from dualpath.flows.metrics import metadata
        meta = metadata(cfg, start)
    print_metrics(m, fmt, horizon, meta=meta,
                  out_dir=output_dir(out, "--out") if out is not None else None,
                  headline=head, wide=wide, verbose=verbose)
    if plot is not None:
        from dualpath.evals.plots import plot_comparison
        err_console.print(f"wrote {plot_comparison(m, plot, horizon or cfg.experiment.horizons[0])}")


@app.command()
def report(config: Path = CONFIG_OPT,
           week: Optional[str] = typer.Option(None, help="ISO week, e.g. 2027-W19: everything "
                                              "from the window's start to that week's end."),
           since: Optional[str] = typer.Option(None, help="First night (YYYY-MM-DD)."),
           until: Optional[str] = typer.Option(None, help="Last night (YYYY-MM-DD)."),
           out: Path = typer.Option(Path("reports"), help="Folder for the HTML and Markdown.")) -> None:
    """The weekly comparison report: one self-contained HTML file and one Markdown file."""
    from dualpath.flows.weekly import week_range, write_report

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


def _listings():
    """The `dualpath runs` tables, declared once in `evals.listings`."""
    from dualpath.evals.registry import listings

    return listings()


def print_runs(cfg, fmt: str, evidence: bool, wide: bool) -> None:
    """`dualpath runs`: every run, and with `evidence` the servers' counters and hosts; one
    JSON document with -f json."""
    from dualpath.evals.listings import gpu_frame
    from dualpath.evals.speed import with_speed
    from dualpath.flows.report import run_warnings
    from dualpath.flows.runner import label_interrupted
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.energy import gpu_evidence
    from dualpath.warehouse.queries import run_hosts, run_summaries, server_evidence

    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--format {fmt!r}: use table, csv or json")
    specs = _listings()
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        # a run stored `running` that no live process holds (killed, its host crashed)
        frames = {"runs": with_speed(label_interrupted(cfg, run_summaries(con)))}
        if evidence:
            frames["evidence"], frames["hosts"] = server_evidence(con), run_hosts(con)
            frames["gpu"] = gpu_frame(gpu_evidence(con))
        warnings = run_warnings(con)
    from dualpath.sampling import config_differences
    declared = config_differences(cfg)
    frames = {k: f[list(specs[k].columns)] for k, f in frames.items()}
    from dualpath.cli.ui import night_links

    runs, cols, viewer = night_links(cfg, frames["runs"], list(frames["runs"].columns), fmt)
    frames["runs"] = runs[cols]     # csv and json: a ui_url column with [ui] base_url
    if fmt == "json":
        emit_json({**{k: records(f) for k, f in frames.items()}, "warnings": warnings,
                   "declared_differences": declared})
        return
    for key, frame in frames.items():
        if fmt == "csv":
            sys.stdout.write(f"# {key}\n" if evidence else "")
            print_frame(frame, "csv")
        elif key == "runs" and not wide:
            from dualpath.cli.runs_table import print_brief_runs
            print_brief_runs(frame, specs[key].title)
            if viewer:
                console.print(viewer, markup=False, highlight=False)
        else:
            print_registered(specs[key], frame, wide)
            if key == "runs" and viewer:
                console.print(viewer, markup=False, highlight=False)
    for w in warnings:
        err_console.print(f"warning: {w}", markup=False, highlight=False)
    for d in declared:
        err_console.print(f"declared difference: {d}", markup=False, highlight=False)


def print_plan(cfg, tickers: int | None, draws: int | None, paths: list[str] | None,
               window: float | None) -> None:
    """`dualpath plan`: each path's night at these tickers and draws, unknown where nothing
    is measured, and whether it fits the configured window (or the one given)."""
    import pandas as pd

    from dualpath.evals.format import cell
    from dualpath.flows.planning import NIGHT_START, estimates, window_hours

    n_t = tickers or len(cfg.tickers())
    own = {n: draws or cfg.draws_for(n) for n in (paths or list(cfg.paths)) if n in cfg.paths}
    n_d = next(iter(own.values())) if len(set(own.values())) == 1 else None
    what = f"{draws} draws" if draws else cfg.draws_text(list(own))
    unknown = sorted(set(paths or []) - set(cfg.paths))
    if unknown:
        raise UserError(f"no such path {unknown}; paths: {list(cfg.paths)}")
    hours_window = window or window_hours(cfg.schedule.deadline)
    rows, lines = [], []
    for e in estimates(cfg):
        if paths and e.path not in paths:
            continue
        h, lo, hi = e.hours(n_t * own[e.path])
        span = lambda a, b, c, unit="": (f"{cell(a)}{unit} ({cell(b)}–{cell(c)})" if e.known
                                         else "unknown")
        row = {"path": e.path, "slots": cfg.paths[e.path].slots,
               **({} if n_d else {"draws": own[e.path]}), "source": e.source,
               "s_per_unit (range)": span(e.s_per_unit, e.lo, e.hi),
               "hours (range)": (f"{h:.1f} ({lo:.1f}–{hi:.1f})" if e.known else "unknown")}
        if hours_window:
            fit = e.draws_that_fit(hours_window * 3600, n_t)
            row["draws_that_fit"] = "unknown" if fit is None else str(fit)
        rows.append(row)
        fits = "" if not (hours_window and e.known) else (
            " (fits)" if h <= hours_window else " (does not fit)")
        lines.append(f"{e.path} {h:.1f} h{fits}" if e.known else f"{e.path} unknown "
                     "(nothing measured yet)")
    print_frame(pd.DataFrame(rows), "table",
                f"{n_t} tickers × {what} per night (throughput basis: seconds per unit = "
                "run wall clock ÷ ticker-draws; complete one-segment runs at the same slots)",
                {"slots": "int", "draws": "int"})
    night = f"a night of {n_t:,} tickers × {what} takes " + ", ".join(lines)
    if window:
        where = f"the window given, {window:g} h"
    elif hours_window:
        where = (f"the configured window, {NIGHT_START} to {cfg.schedule.deadline} market time "
                 f"({hours_window:g} h)")
    else:
        where = "no window configured ([schedule] deadline unset; or pass --window-hours)"
    console.print(f"{night}; {where}", markup=False, highlight=False)
