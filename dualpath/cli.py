"""The `dualpath` command line. The only module that prints for people."""

from __future__ import annotations

import os
import sys
from datetime import date
from pathlib import Path
from typing import Optional

import pandas as pd
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table

from dualpath.config import load_config
from dualpath.errors import DualpathError, UserError
from dualpath.procs import start_reaper

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False)
prices_app = typer.Typer(no_args_is_help=True, help="Price data in the warehouse.")
app.add_typer(prices_app, name="prices")
prereg_app = typer.Typer(no_args_is_help=True, help="The preregistered comparison plan.")
app.add_typer(prereg_app, name="prereg")
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, soft_wrap=True)

CONFIG_OPT = typer.Option(Path("dualpath.toml"), "--config", "-c", help="Config file.")
FORMAT_OPT = typer.Option("table", "--format", "-f", help="table | csv | json")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version
        console.print(f"dualpath {version('dualpath')}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Is the cheaper serving path as good, and how much slower is it?"""


def prefect_env(home: Path, quiet: bool = False) -> None:
    """Settings for Prefect, set at the CLI edge before Prefect is imported."""
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(home.resolve()))
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_UI_ENABLED", "false")
    if quiet:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


def progress_bars() -> Progress:
    return Progress(TextColumn("[bold]{task.description:<20}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[what]}"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=console)


class PathBars:
    """Rich progress per path: units done / total, calls, ETA."""

    def __init__(self, bars: Progress):
        self.bars = bars
        self.tasks: dict[str, int] = {}

    def reset(self, label: str, paths: list[str], totals: dict[str, int]) -> None:
        for p in paths:
            desc = f"{p} {label}"
            if p in self.tasks:
                self.bars.reset(self.tasks[p], total=totals[p], description=desc, what="")
            else:
                self.tasks[p] = self.bars.add_task(desc, total=totals[p], what="")

    def __call__(self, path: str, done: int, total: int, calls: int) -> None:
        if path in self.tasks:
            self.bars.update(self.tasks[path], completed=done, total=total,
                             what=f"units · {calls:,} calls")


def print_frame(frame: pd.DataFrame, fmt: str, title: str | None = None) -> None:
    """A frame as a rich table, CSV or JSON."""
    if fmt == "csv":
        sys.stdout.write(frame.to_csv(index=False))
    elif fmt == "json":
        sys.stdout.write(frame.to_json(orient="records", date_format="iso", indent=1) + "\n")
    elif fmt == "table":
        t = Table(title=title)
        for col in frame.columns:
            t.add_column(str(col), justify="right" if frame[col].dtype.kind in "iuf" else "left")
        for row in frame.itertuples(index=False):
            t.add_row(*[_cell(v) for v in row])
        console.print(t)
    else:
        raise UserError(f"--format {fmt!r}: use table, csv or json")


def _cell(v) -> str:
    if v is None or (isinstance(v, float) and v != v) or v is pd.NA:
        return "—"
    if isinstance(v, pd.Timestamp) and v == v.normalize():
        return v.date().isoformat()
    if isinstance(v, float):
        if v != 0 and abs(v) < 1e-3:
            return f"{v:.2e}"      # a small p-value is not 0.000
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v)


@app.command()
def check(config: Path = CONFIG_OPT) -> None:
    """Validate a config file, check that a night could start (universe, pipeline import,
    API key variables), and show what it describes."""
    from dualpath.preflight import preflight

    cfg = load_config(config)
    preflight(cfg)
    tickers = cfg.tickers()
    console.print("[dim]offline check: the config alone (no server, warehouse or Prefect is "
                  "contacted; `dualpath doctor` does that)[/dim]")
    console.print(f"[green]ok[/green] {config}: experiment '{cfg.experiment.name}', "
                  f"{len(tickers)} tickers x {cfg.experiment.draws} draws, "
                  f"horizons {cfg.experiment.horizons}")
    for name, p in cfg.paths.items():
        how = "launch" if p.launch else ("simulated" if p.engine == "sim" else "attach")
        console.print(f"  path {name}: {p.engine} {p.base_url or ''} model={p.model} "
                      f"slots={p.slots} ({how})")


@app.command()
def init(path: Path = typer.Argument(Path("dualpath.toml")),
         demo: bool = typer.Option(False, help="Write the simulated demo config instead."),
         force: bool = typer.Option(False, help="Overwrite an existing file.")) -> None:
    """Write an example config (the real two-path setup, or --demo)."""
    if path.exists() and not force:
        raise UserError(f"{path} exists; pass --force to overwrite it")
    from dualpath.demo import demo_config_path
    src = demo_config_path() if demo else Path(__file__).with_name("example.toml")
    path.write_text(src.read_text())
    console.print(f"wrote {path}; check it with `dualpath check --config {path}`")


@app.command()
def nightly(config: Path = CONFIG_OPT,
            night: Optional[str] = typer.Option(None, "--date", help="Night (YYYY-MM-DD), a "
                                                "session of [market] calendar; default: the "
                                                "latest session whose close has passed."),
            ) -> None:
    """Score one night on every path through the Prefect flow (a rerun resumes).

    Exits 1 when any run is not complete (with the reason), 130 when interrupted."""
    from datetime import datetime, timezone

    from dualpath.calendar import MarketCalendar

    from dualpath.preflight import preflight

    cfg = load_config(config)
    preflight(cfg)       # one clean error for what every path would fail on, before Prefect
    cal = MarketCalendar.from_settings(cfg.market)
    # a night is a session of the market's calendar; by default the latest whose close has
    # passed in the market's time zone (never the machine's local date)
    when = (cal.require_session(_parse_date(night)) if night
            else cal.default_night(datetime.now(timezone.utc)))
    prefect_env(cfg.resolve(Path(".dualpath/prefect")))
    start_reaper()
    from flows.nightly import run_nightly
    from flows.runner import plan_night

    with progress_bars() as bars:
        pb = PathBars(bars)
        pb.reset(str(when), list(cfg.paths), {p.path: p.units_planned for p in plan_night(cfg, when)})
        complete, result = run_nightly(config, when, progress=pb)
    _print_night(result)
    if not complete:   # a scheduler or a shell loop must see that tonight is not a result
        for r in result["runs"]:
            if r["status"] != "complete":
                err_console.print(f"[red]{r['path']}: {r['status']}[/red] — "
                                  f"{escape(str(r['status_detail']))}")
        err_console.print("not complete: these runs are not results and are kept out of every "
                          "metric; fix the cause and rerun the night to resume it")
        raise typer.Exit(1)


def _print_night(result: dict) -> None:
    from warehouse.queries import SPEED_LABELS

    frame = pd.DataFrame(result["runs"])
    cols = ["path", "status", "units_planned", "graded", "parse_failed", "failed", "calls",
            "runaway", "retries", "contaminated", "throughput_s", "slot_latency_s"]
    print_frame(frame[cols], "table", f"night {result['night']}")
    for col in ("throughput_s", "slot_latency_s"):
        console.print(f"[dim]{col}: {SPEED_LABELS[col]}[/dim]")
    if result.get("missing_inputs"):
        from flows.inputs import describe_missing
        err_console.print(f"[yellow]warning:[/yellow] "
                          f"{describe_missing(result['missing_inputs'], result['night'])}")


TOTALS_LABELS = {"throughput_s_median": "s/ticker throughput",
                 "throughput_s_per_unit_median": "s/unit throughput",
                 "slot_latency_s_median": "s/unit slot-latency",
                 "overhead_share": "HTTP overhead share"}


def _parse_date(text: str, option: str = "--date") -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserError(f"{option} {text!r} is not a date; use YYYY-MM-DD") from None


@app.command()
def demo(nights: int = typer.Option(20, min=1, max=120, help="Synthetic nights to score."),
         tickers: int = typer.Option(20, min=2, max=100, help="Synthetic tickers (of 100)."),
         draws: int = typer.Option(2, min=1, max=10, help="Draws per ticker."),
         clock: float = typer.Option(1.0, min=1e-4, max=100.0,
                                     help="Multiplies the simulated clocks (smaller = faster "
                                          "demo, but HTTP overhead then distorts the seconds)."),
         root: Path = typer.Option(Path(".dualpath/demo"),
                                   help="Demo folder: created, or cleared if an earlier demo "
                                        "made it; any other non-empty folder is refused.")) -> None:
    """The embedded default: N synthetic nights on both simulated paths, through the nightly flow."""
    prefect_env(Path(".dualpath/prefect"), quiet=True)
    start_reaper()
    from flows.demo import run_demo

    with progress_bars() as bars:
        result = run_demo(root, nights, tickers, draws, clock, bars, PathBars(bars))
    print_frame(result.totals.rename(columns=TOTALS_LABELS), "table",
                "Per path; seconds from complete one-segment runs only (real-scale)")
    console.print("[dim]throughput basis = run wall clock ÷ tickers, or ÷ units (ticker × draw) "
                  "(sets how long a night takes); slot-latency basis = one unit's first call to "
                  "last call (what one ticker-draw waits, ≈ throughput per unit × slots). Never "
                  "compare across bases.[/dim]")
    for line in result.not_complete:
        err_console.print(f"[red]not complete:[/red] {escape(line)}")
    for line in result.notes:
        console.print(line)
    m = load_metrics(load_config(result.config))
    print_metrics(m, "table", only=["rank_ic", "comparison", "self_agreement"])
    from evals.plots import plot_comparison
    console.print(f"\nplot: {plot_comparison(m, result.config.parent / 'comparison.png')}")
    console.print(f"weekly report (preregistered demo plan): {result.report}")
    db = result.warehouse
    console.print(f"\nwarehouse: {db}  (config: {result.config})")
    console.print("try:")
    console.print(f"  dualpath sql --config {result.config} \"SELECT path, count(*) calls, "
                  "avg(latency_s) FROM v_calls GROUP BY path\"")
    console.print(f"  dualpath sql --config {result.config} \"SELECT path, grade, count(*) "
                  "FROM units GROUP BY ALL ORDER BY ALL\"")
    console.print(f"  dualpath runs --config {result.config}")


@app.command("sql")
def sql_cmd(query: str = typer.Argument(..., help="A read-only SQL query."),
            config: Path = CONFIG_OPT, fmt: str = FORMAT_OPT,
            db: Optional[Path] = typer.Option(None, help="Warehouse file (instead of --config).")) -> None:
    """Ad-hoc SQL over the warehouse (read-only; works while a night is running). It reads
    the warehouse and nothing else: no files, no COPY TO / EXPORT, no extensions."""
    import duckdb

    from warehouse.db import sandboxed_reader
    from warehouse.queries import sql

    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--format {fmt!r}: use table, csv or json")
    if db is None:
        cfg = load_config(config)
        path = cfg.resolve(cfg.warehouse.path)
    else:
        path = db
    with sandboxed_reader(path) as con:
        try:
            frame = sql(con, query)
        except duckdb.PermissionException as e:
            raise UserError(f"query refused: {str(e).splitlines()[0][:300]}. `dualpath sql` "
                            "reads the warehouse only (no files, COPY TO, EXPORT, ATTACH or "
                            "extensions); use `dualpath export` to write files") from None
        except duckdb.Error as e:
            # DuckDB's whole message: its "Did you mean" hints are on the lines after the first
            raise UserError(f"query failed: {str(e)[:1500]}") from None
    print_frame(frame, fmt)


@app.command()
def runs(config: Path = CONFIG_OPT, fmt: str = FORMAT_OPT,
         evidence: bool = typer.Option(False, help="Also compare with the servers' /metrics.")) -> None:
    """Every run with its completeness (only 'complete' runs are results)."""
    from warehouse.db import reader
    from flows.report import run_warnings
    from warehouse.queries import run_summaries, server_evidence

    cfg = load_config(config)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        frame = run_summaries(con)
        warnings = run_warnings(con)
    cols = ["night", "path", "status", "units_planned", "graded", "parse_failed", "failed",
            "calls", "runaway", "contaminated", "segments", "throughput_s", "slot_latency_s",
            "status_detail"]
    print_frame(frame[cols], fmt, "runs (only 'complete' runs are results; seconds real-scale: "
                "throughput s/ticker | slot-latency s/unit, complete one-segment runs only)")
    if evidence:
        with reader(cfg.resolve(cfg.warehouse.path)) as con:
            ev = server_evidence(con)
        print_frame(ev, fmt, "server evidence: the calls' token counts vs the server's own "
                    "/metrics counters, and slot occupancy")
    for w in warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(w)}")


def load_metrics(cfg, paths: list[str] | None = None, since: date | None = None):
    """All metric tables for an experiment, from the warehouse (see `flows.metrics`)."""
    from flows.metrics import load_metrics as load

    return load(cfg, paths, since)


METRIC_TABLES = {
    # key: (title, columns for csv/json, the fewer columns a terminal table shows or None)
    "rank_ic": ("RankIC per path x horizon (matured nights; t, p and CI on non-overlapping "
                "nights, or why not)",
                ["path", "horizon", "nights", "mean_ic", "sd_ic", "icir", "share_positive",
                 "skew", "excess_kurtosis", "n_independent", "tested_mean", "t", "df", "p",
                 "ci_low", "ci_high", "ci_level", "ci_method", "basis", "note", "pending_nights"],
                ["path", "horizon", "nights", "mean_ic", "icir", "tested_mean", "t", "df", "p",
                 "ci_low", "ci_high", "ci_level", "ci_method", "note", "pending_nights"]),
    "comparison": ("Non-inferiority: ΔIC = IC(candidate) − IC(baseline) on common tickers; "
                   "non-inferior when the one-sided lower bound (ci_low) > −margin; "
                   "exploratory rows Holm-adjusted",
                   ["baseline", "candidate", "horizon", "role", "nights", "unpaired_nights",
                    "unpaired_ticker_nights", "mean_common_tickers", "mean_delta", "sd_delta",
                    "rho_ic", "n_independent", "tested_mean", "df", "ci_low", "ci_high",
                    "ci_level", "ci_method", "basis", "margin", "alpha", "p_noninferior",
                    "p_noninferior_holm", "p_inferior", "p_inferior_holm", "verdict",
                    "p_equivalent", "equivalence", "mde", "power_at_zero", "note"],
                   ["horizon", "role", "nights", "unpaired_nights", "unpaired_ticker_nights",
                    "mean_delta", "tested_mean", "ci_low", "ci_high", "ci_level", "ci_method",
                    "verdict", "equivalence", "note"]),
    "cross_path": ("Cross-path agreement of mean scores", None, None),
    "self_agreement": ("Self-reproducibility between draws (pooled over nights; chance = "
                       "mean pairwise Cohen p_e)",
                       ["path", "ticker_nights", "draws", "exact_agreement", "chance_agreement",
                        "kappa_exact", "mean_qwk", "krippendorff_alpha", "icc_1_1", "icc_1_k",
                        "spearman_brown_k", "note"], None),
    "draws": ("What each draw buys: IC of the mean of k draws (measured), Spearman-Brown "
              "projection beyond", ["path", "horizon", "k", "basis", "nights", "mean_ic",
                                    "reliability", "attenuation", "projected_ic"], None),
    "signal_shape": ("Signal shape: top-minus-bottom quintile forward return, score rank "
                     "autocorrelation night to night", None, None),
    "by_grade": ("Mean forward return by grade (mean score rounded)", None, None),
    "grades": ("Grade distribution (share of units; failed = no grade)", None, None),
    "speed": ("Speed per path, median over complete runs (real-scale; s/ticker labelled by basis)",
              ["path", "runs", "not_complete_excluded", "partial_runs_excluded",
               "throughput_s_per_ticker", "slot_latency_s_per_ticker", "calls_per_unit",
               "calls_per_ticker", "server_prefill_tps", "server_decode_tps",
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
    m = load_metrics(cfg, path, start)
    meta = None
    if fmt == "json":
        from flows.metrics import metadata
        meta = metadata(cfg, start)
    if out is not None and fmt != "csv":
        raise UserError("--out writes CSV files: add -f csv")
    print_metrics(m, fmt, horizon, meta=meta, out_dir=out)
    if plot is not None:
        from evals.plots import plot_comparison
        err_console.print(f"wrote {plot_comparison(m, plot, horizon or cfg.experiment.horizons[0])}")


@prices_app.command("import")
def prices_import(file: Path, config: Path = CONFIG_OPT,
                  map_: Optional[str] = typer.Option(
                      None, "--map", help="Rename file columns: \"Date=date,'Adj Close'=adj_close\" "
                      "(targets: ticker, date, close, adj_close)."),
                  ticker: Optional[str] = typer.Option(None, help="The ticker of a one-ticker "
                                                       "export (a file without a ticker column)."),
                  date_format: Optional[str] = typer.Option(None, help="strptime format of the "
                                                            "dates, e.g. %d/%m/%Y (default: ISO)."),
                  strict: bool = typer.Option(False, help="Treat every warning as an error: "
                                              "nothing is imported.")) -> None:
    """Validate and import a CSV/Parquet price file (ticker, date, adj_close[, close])."""
    from rich.markup import escape

    from dualpath.calendar import MarketCalendar
    from warehouse.db import writer
    from warehouse.price_sources import import_file
    from warehouse.prices import parse_map

    cfg = load_config(config)
    calendar = MarketCalendar.from_settings(cfg.market)
    columns = parse_map(map_) if map_ else None
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        r = import_file(con, file, cfg.market, calendar, cfg.tickers(), columns=columns,
                        ticker=ticker, date_format=date_format, strict=strict)
    for w in r.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    span = f" ({r.first} .. {r.last})" if r.rows else ""
    console.print(f"imported {r.rows:,} price rows for {r.tickers} tickers{span}: {r.new:,} new, "
                  f"{r.revised:,} revised")
    for m in (r.coverage.messages if r.coverage else []):
        console.print(escape(f"warehouse: {m}"))


def _fresh_table(fresh, fmt: str) -> None:
    frame = fresh.frame()
    order = {"missing": 0, "stale": 1, "halted": 2, "fresh": 3}
    frame = frame.sort_values(["status", "ticker"], key=lambda s: s.map(order) if s.name == "status" else s)
    print_frame(frame, fmt, title=f"prices for the night of {fresh.night}")


@prices_app.command("update")
def prices_update(config: Path = CONFIG_OPT,
                  night: Optional[str] = typer.Option(None, "--date", help="The night (a session, "
                                                      "YYYY-MM-DD); default: the latest session "
                                                      "whose close has passed."),
                  fmt: str = FORMAT_OPT) -> None:
    """Import what is new from the market section's prices_file, prices_dir and source, then
    show each ticker's freshness.
    Exits 1 when a source failed (the others are still imported)."""
    from rich.markup import escape

    from dualpath.calendar import MarketCalendar
    from warehouse.db import writer
    from warehouse.price_sources import update_prices

    cfg = load_config(config)
    calendar = MarketCalendar.from_settings(cfg.market)
    when = calendar.require_session(_parse_date(night)) if night else None
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        report = update_prices(con, cfg.market, cfg.base_dir, calendar, cfg.tickers(), when,
                               max_horizon=max(cfg.experiment.horizons))
    out = console if fmt == "table" else err_console     # csv/json: only data on stdout
    for line in report.lines():
        (err_console if line.startswith("  warning") else out).print(escape(line))
    _fresh_table(report.freshness, fmt)
    if report.failed:
        raise typer.Exit(1)


@prices_app.command("status")
def prices_status(config: Path = CONFIG_OPT,
                  night: Optional[str] = typer.Option(None, "--date", help="The night (a session, "
                                                      "YYYY-MM-DD); default: the latest session "
                                                      "whose close has passed."),
                  fmt: str = FORMAT_OPT) -> None:
    """Per ticker: the last priced session and how far behind the night it is (read-only).
    Exits 1 when a ticker is stale or missing."""
    from rich.markup import escape

    from dualpath.calendar import MarketCalendar
    from warehouse.db import reader
    from warehouse.freshness import freshness

    cfg = load_config(config)
    calendar = MarketCalendar.from_settings(cfg.market)
    when = calendar.require_session(_parse_date(night) if night else calendar.default_night())
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        fresh = freshness(con, cfg.tickers(), when, calendar, market=cfg.market,
                          max_horizon=max(cfg.experiment.horizons))
    for m in fresh.messages:
        (console if fmt == "table" else err_console).print(escape(m))
    _fresh_table(fresh, fmt)
    if not fresh.ok:
        raise typer.Exit(1)


@prereg_app.command("draft")
def prereg_draft(plan: Path = typer.Argument(Path("prereg.toml"), help="Plan file to write."),
                 config: Path = CONFIG_OPT,
                 first_night: str = typer.Option(..., help="First night of the window (YYYY-MM-DD)."),
                 nights: int = typer.Option(30, min=2, max=500, help="Trading nights in the window."),
                 force: bool = typer.Option(False, help="Overwrite an existing file.")) -> None:
    """Write a plan from the config: fingerprints and universe hash filled in; edit, then freeze."""
    from dualpath.prereg import draft_plan, plan_toml

    if plan.exists() and not force:
        raise UserError(f"{plan} exists; pass --force to overwrite it")
    p = draft_plan(load_config(config), _parse_date(first_night, "--first-night"), nights)
    plan.write_text(plan_toml(p))
    console.print(f"wrote {plan} (sha256 {p.sha256()[:12]}); review the hypotheses, then "
                  f"`dualpath prereg freeze {plan} -c {config}`")


@prereg_app.command("freeze")
def prereg_freeze(plan: Path = typer.Argument(..., help="The plan file."),
                  config: Path = CONFIG_OPT,
                  force: bool = typer.Option(False, help="Freeze although nights of the window "
                                             "exist (marked as forced in every report).")) -> None:
    """Validate the plan and record its canonical SHA-256 and freeze time in the warehouse."""
    from flows.prereg import freeze_plan

    frozen = freeze_plan(load_config(config), plan, force)
    console.print(f"frozen: {frozen.plan_hash} at {frozen.frozen_at:%Y-%m-%d %H:%M %Z}"
                  + (" [yellow](forced)[/yellow]" if frozen.forced else ""))


@prereg_app.command("status")
def prereg_status(config: Path = CONFIG_OPT) -> None:
    """The frozen plan, nights collected against its window, and the deviation log."""
    from flows.prereg import plan_status

    st = plan_status(load_config(config))
    if st.frozen is None:
        console.print("no frozen plan: results are exploratory (`dualpath prereg draft`, "
                      "then `dualpath prereg freeze`)")
        return
    p = st.frozen.plan
    console.print(f"plan {st.frozen.plan_hash[:12]} frozen {st.frozen.frozen_at:%Y-%m-%d}"
                  + (" (forced)" if st.frozen.forced else "")
                  + ("" if st.frozen.intact else " [red]EDITED AFTER FREEZING[/red]"))
    console.print(f"primary: {p.candidate} vs {p.baseline}, {p.primary.test} at "
                  f"h={p.primary.horizon}, δ={p.primary.margin}, α={p.primary.alpha}")
    console.print(f"window: {len(st.nights)} of {p.window.nights} nights from "
                  f"{p.window.first_night}"
                  + ("" if st.window_complete else " — interim: no decision"))
    for d in st.deviations:
        console.print(f"[yellow]deviation[/yellow] {d['night'] or '-'} {d['kind']}: {d['detail']}")


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
    if week:
        if since or until:
            raise UserError("give --week or --since/--until, not both")
        lo, hi = None, week_range(week)[1]
    html, md, data = write_report(cfg, out, lo, hi)
    console.print(f"report ({data.plan.label}): {html}\n                      {md}")


def _prefect_api_or_explain() -> None:
    if not os.environ.get("PREFECT_API_URL"):
        raise UserError("deployments live on a Prefect server: start one (`prefect server "
                        "start`) and `export PREFECT_API_URL=http://127.0.0.1:4200/api` in "
                        "every shell that deploys, serves or runs a worker")


@app.command("deploy")
def deploy_cmd(config: Path = CONFIG_OPT,
               pool: str = typer.Option("dualpath", help="Work pool (a process pool is created "
                                        "if missing)."),
               nightly_cron: str = typer.Option("30 18 * * 1-5", help="When the night runs, in "
                                                "[market] timezone."),
               weekly_cron: str = typer.Option("0 9 * * 6", help="When the weekly report runs.")
               ) -> None:
    """Register the nightly and weekly deployments; then run `prefect worker start --pool P`."""
    _prefect_api_or_explain()
    cfg = load_config(config)
    from flows.deploy import run_deploy

    for name in run_deploy(cfg, config, pool, nightly_cron, weekly_cron):
        console.print(f"deployed {name} (pool {pool}, times in {cfg.market.timezone})")
    console.print(f"start a worker: prefect worker start --pool {pool}")


@app.command("serve")
def serve_cmd(config: Path = CONFIG_OPT,
              nightly_cron: str = typer.Option("30 18 * * 1-5", help="When the night runs."),
              weekly_cron: str = typer.Option("0 9 * * 6", help="When the weekly report runs.")
              ) -> None:
    """Serve the nightly and weekly deployments from this process (no work pool needed)."""
    _prefect_api_or_explain()
    cfg = load_config(config)
    start_reaper()
    from flows.deploy import serve

    serve(cfg, config, nightly_cron, weekly_cron)


@app.command()
def schema(config: Path = CONFIG_OPT, fmt: str = FORMAT_OPT,
           table: Optional[str] = typer.Option(None, "--table", help="Only this table or view.")) -> None:
    """Every table and view of the warehouse, each column with its type, unit and meaning."""
    import duckdb

    from warehouse.dictionary import TABLES, dictionary
    from warehouse.migrations import migrate

    cfg = load_config(config)
    path = cfg.resolve(cfg.warehouse.path)
    if path.exists():
        from warehouse.db import reader
        with reader(path) as con:
            frame = dictionary(con)
    else:   # the schema a new warehouse will have
        with duckdb.connect() as con:
            migrate(con)
            frame = dictionary(con)
    if table:
        if table not in set(frame["table"]):
            raise UserError(f"no table or view {table!r}; tables: {sorted(set(frame['table']))}")
        frame = frame[frame["table"] == table]
    elif fmt == "table":
        for name, (what, _) in TABLES.items():
            console.print(f"[bold]{name}[/bold]: {what}")
    print_frame(frame, fmt, "warehouse schema")


@app.command("plan")
def plan_cmd(config: Path = CONFIG_OPT,
             tickers: Optional[int] = typer.Option(None, min=1, help="Tickers (default: the universe)."),
             draws: Optional[int] = typer.Option(None, min=1, help="Draws (default: the config's)."),
             path: Optional[list[str]] = typer.Option(None, "--path", help="Only these paths."),
             window_hours: Optional[float] = typer.Option(None, min=0.1, help="Hours available: "
                                                          "how many draws fit.")) -> None:
    """Expected night duration per path, with an interval, from the speeds measured so far."""
    from flows.planning import estimates

    cfg = load_config(config)
    n_t = tickers or len(cfg.tickers())
    n_d = draws or cfg.experiment.draws
    unknown = sorted(set(path or []) - set(cfg.paths))
    if unknown:
        raise UserError(f"no such path {unknown}; paths: {list(cfg.paths)}")
    rows = []
    for e in estimates(cfg):
        if path and e.path not in path:
            continue
        h, lo, hi = e.hours(n_t * n_d)
        row = {"path": e.path, "slots": cfg.paths[e.path].slots, "source": e.source,
               "s_per_unit": e.s_per_unit, "s_per_unit_lo": e.lo, "s_per_unit_hi": e.hi,
               "hours": h, "hours_lo": lo, "hours_hi": hi}
        if window_hours:
            row["draws_that_fit"] = e.draws_that_fit(window_hours * 3600, n_t)
        rows.append(row)
    print_frame(pd.DataFrame(rows), "table",
                f"{n_t} tickers × {n_d} draws per night (throughput basis: seconds per unit = "
                "run wall clock ÷ ticker-draws; complete one-segment runs at the same slots)")


@app.command()
def doctor(config: Path = CONFIG_OPT) -> None:
    """Check everything a night depends on (servers, warehouse, Prefect); exit 1 if any fails."""
    from flows.doctor import doctor as run_checks

    checks = run_checks(load_config(config))
    for c in checks:
        mark = "[green]✓[/green]" if c.ok else "[red]✗[/red]"
        text = f"{c.name}: {c.detail}" + ("" if c.ok else f" — fix: {c.fix}")
        console.print(f"{mark} {escape(text)}", soft_wrap=True, highlight=False)
    failed = [c for c in checks if not c.ok]
    console.print(f"{len(checks) - len(failed)} of {len(checks)} checks passed")
    if failed:
        raise typer.Exit(1)


@app.command()
def export(config: Path = CONFIG_OPT,
           out: Path = typer.Option(..., help="Folder for one file per table and view."),
           fmt: str = typer.Option("parquet", "--format", "-f", help="parquet | csv")) -> None:
    """Write every table and view of the warehouse to files (the way to get data out:
    `dualpath sql` cannot write files)."""
    from warehouse.db import reader

    if fmt not in ("parquet", "csv"):
        raise UserError(f"--format {fmt!r}: use parquet or csv")
    cfg = load_config(config)
    out.mkdir(parents=True, exist_ok=True)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                           "WHERE table_schema = 'main' ORDER BY 1").fetchall()]
        for name in names:
            target = (out / f"{name}.{fmt}").resolve()
            opts = "(FORMAT parquet)" if fmt == "parquet" else "(HEADER, DELIMITER ',')"
            con.execute(f"COPY (SELECT * FROM \"{name}\") TO '{target}' {opts}")
    console.print(f"wrote {len(names)} tables and views to {out} as {fmt}")


INTERRUPTED = "interrupted; rerun the night to resume"


def main() -> None:
    """Entry point: user mistakes print one clear message and exit non-zero, no traceback.

    Exit codes: 0 ok; 1 a night not complete or a failure; 2 a user mistake; 130 interrupted.
    """
    import click

    try:
        code = app(standalone_mode=False)
    except UserError as e:
        err_console.print(f"[red]error:[/red] {escape(str(e))}")
        sys.exit(2)
    except DualpathError as e:
        err_console.print(f"[red]failed:[/red] {escape(str(e))}")
        sys.exit(1)
    except (KeyboardInterrupt, click.exceptions.Abort):
        err_console.print(INTERRUPTED)
        sys.exit(130)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:   # usage errors: shown the way click does
        e.show()
        sys.exit(e.exit_code)
    # without standalone mode typer returns an exit code instead of raising: 130 is its
    # answer to a KeyboardInterrupt inside a command
    if code == 130:
        err_console.print(INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)
