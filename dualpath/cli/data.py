"""The warehouse and its prices: ad-hoc SQL, the schema, export, price import/update/status."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dualpath.cli._common import (CONFIG_OPT, FORMAT_OPT, _parse_date, app, console,
                                  err_console, input_file, output_dir, prices_app,
                                  print_frame, warehouse_file)
from dualpath.cli._common import load_config
from dualpath.config_checks import date_format_problem
from dualpath.errors import UserError


@app.command("sql")
def sql_cmd(query: str = typer.Argument(..., help="A read-only SQL query."),
            config: Path = CONFIG_OPT, fmt: str = FORMAT_OPT,
            db: Optional[Path] = typer.Option(None, help="Warehouse file (instead of --config)."),
            timeout: float = typer.Option(60.0, "--timeout", min=0.1, max=86400.0,
                                          help="Stop the query after this many seconds.")
            ) -> None:
    """Ad-hoc SQL over the warehouse (read-only; works while a night is running, and never
    keeps its ingest out: a query still running after a few seconds continues on a
    snapshot). It reads the warehouse and nothing else: no files, no COPY TO / EXPORT, no
    extensions."""
    from dualpath.warehouse.adhoc import user_sql

    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--format {fmt!r}: use table, csv or json")
    if not query.strip():
        raise UserError("the query is empty; give one, e.g. \"SELECT count(*) FROM calls\"")
    if db is None:
        cfg = load_config(config)
        path = cfg.resolve(cfg.warehouse.path)
    else:
        path = warehouse_file(db, "--db")
    print_frame(user_sql(path, query, timeout), fmt)


@app.command()
def schema(config: Path = CONFIG_OPT, fmt: str = FORMAT_OPT,
           table: Optional[str] = typer.Option(None, "--table", help="Only this table or view.")) -> None:
    """Every table and view of the warehouse, each column with its type, unit and meaning."""
    from dualpath.warehouse.adhoc import schema_frame
    from dualpath.warehouse.dictionary import TABLES

    cfg = load_config(config)
    frame = schema_frame(cfg.resolve(cfg.warehouse.path))
    if table:
        if table not in set(frame["table"]):
            raise UserError(f"no table or view {table!r}; tables: {sorted(set(frame['table']))}")
        frame = frame[frame["table"] == table]
    elif fmt == "table":
        for name, (what, _) in TABLES.items():
            console.print(f"[bold]{name}[/bold]: {what}")
    print_frame(frame, fmt, "warehouse schema")


@app.command()
def export(config: Path = CONFIG_OPT,
           out: Path = typer.Option(..., help="Folder for one file per table and view."),
           fmt: str = typer.Option("parquet", "--format", "-f", help="parquet | csv")) -> None:
    """Write every table and view of the warehouse to files (the way to get data out:
    `dualpath sql` cannot write files)."""
    from dualpath.warehouse.adhoc import export_tables

    if fmt not in ("parquet", "csv"):
        raise UserError(f"--format {fmt!r}: use parquet or csv")
    cfg = load_config(config)
    output_dir(out, "--out")
    n = export_tables(cfg.resolve(cfg.warehouse.path), out, fmt)
    console.print(f"wrote {n} tables and views to {out} as {fmt}")


@prices_app.command("import")
def prices_import(file: Path, config: Path = CONFIG_OPT,
                  map_: Optional[str] = typer.Option(
                      None, "--map", help="Rename file columns: \"Date=date,'Adj Close'=adj_close\" "
                      "(targets: ticker, close, adj_close)."),
                  ticker: Optional[str] = typer.Option(None, help="The ticker of a one-ticker "
                                                       "export (a file without a ticker column)."),
                  date_format: Optional[str] = typer.Option(None, help="strptime format of the "
                                                            "dates, e.g. %d/%m/%Y (default: ISO)."),
                  strict: bool = typer.Option(False, help="Treat every warning as an error: "
                                              "nothing is imported."),
                  encoding: Optional[str] = typer.Option(None, help="The CSV's text encoding, "
                                                         "e.g. cp949 (default: \\[market] "
                                                         "encoding, utf-8)."),
                  thousands: Optional[str] = typer.Option(None, help="Thousands separator in "
                                                          "prices, e.g. , (default: \\[market] "
                                                          "thousands).")) -> None:
    """Validate and import a CSV/Parquet price file (ticker, date, adj_close[, close])."""
    from rich.markup import escape

    from dualpath.calendar import MarketCalendar
    from dualpath.warehouse.db import writer
    from dualpath.warehouse.price_sources import import_file
    from dualpath.warehouse.prices import parse_map

    if date_format is not None and (problem := date_format_problem(date_format)):
        raise UserError(f"--date-format {date_format!r}: {problem}")
    cfg = load_config(config)
    calendar = MarketCalendar.from_settings(cfg.market)
    columns = parse_map(map_) if map_ else None
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        r = import_file(con, input_file(file, "price file"), cfg.market, calendar, cfg.tickers(), columns=columns,
                        ticker=ticker, date_format=date_format, strict=strict,
                        encoding=encoding, thousands=thousands)
    for w in r.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {escape(w)}")
    span = f" ({r.first} .. {r.last})" if r.rows else ""
    console.print(f"imported {r.rows:,} price rows for {r.tickers} tickers{span}: {r.new:,} new, "
                  f"{r.revised:,} revised")
    for m in (r.coverage.messages if r.coverage else []):
        console.print(escape(f"warehouse: {m}"))


NIGHT_OPT = typer.Option(None, "--date", help="The night (a session, YYYY-MM-DD); default: "
                         "the latest session whose close has passed.")


def _fresh_table(fresh, fmt: str) -> None:
    frame = fresh.frame()
    order = {"missing": 0, "stale": 1, "halted": 2, "fresh": 3}
    frame = frame.sort_values(["status", "ticker"], key=lambda s: s.map(order) if s.name == "status" else s)
    print_frame(frame, fmt, title=f"prices for the night of {fresh.night}")


@prices_app.command("update")
def prices_update(config: Path = CONFIG_OPT,
                  night: Optional[str] = NIGHT_OPT,
                  fmt: str = FORMAT_OPT) -> None:
    """Import what is new from the market section's prices_file, prices_dir and source, then
    show each ticker's freshness.
    Exits 1 when a source failed (the others are still imported)."""
    from rich.markup import escape

    from dualpath.calendar import MarketCalendar
    from dualpath.warehouse.db import writer
    from dualpath.warehouse.price_sources import update_prices

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
                  night: Optional[str] = NIGHT_OPT,
                  fmt: str = FORMAT_OPT) -> None:
    """Per ticker: the last priced session and how far behind the night it is (read-only).
    Exits 1 when a ticker is stale or missing."""
    from rich.markup import escape

    from dualpath.calendar import MarketCalendar
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.freshness import freshness

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


@app.command("repair")
def repair_cmd(journal: Path = typer.Argument(..., help="The damaged journal "
                                              "(<runs_dir>/<experiment>/<night>/<path>/journal.jsonl)."),
               config: Path = CONFIG_OPT) -> None:
    """Quarantine a damaged journal and re-ingest exactly what can still be read (its run's
    rows replaced by those of the repaired journal); then rerun the night to resume it."""
    from datetime import date

    from dualpath.night import run_id_for
    from dualpath.flows.runner import hold_night
    from dualpath.warehouse.db import writer
    from dualpath.warehouse.rebuild import repair_journal

    cfg = load_config(config)
    journal = journal.resolve()
    if not journal.is_file():
        raise UserError(f"no journal at {journal}")
    try:
        path, night = journal.parent.name, date.fromisoformat(journal.parent.parent.name)
        experiment = journal.parent.parent.parent.name
    except ValueError:
        raise UserError(f"{journal} is not a run journal (<runs_dir>/<experiment>/<night>/"
                        "<path>/journal.jsonl)") from None
    if experiment != cfg.experiment.name:
        raise UserError(f"{journal} is a journal of experiment '{experiment}'; give its "
                        f"config (this one runs '{cfg.experiment.name}')")
    with hold_night(cfg, night), writer(cfg.resolve(cfg.warehouse.path)) as con:
        r = repair_journal(con, journal, run_id_for(experiment, night, path))
    console.print(f"quarantined the damaged journal as {r.quarantined}")
    for n, why in r.dropped:
        err_console.print(f"  line {n} left out: {why}")
    console.print(f"kept {r.kept_lines:,} readable lines; run {r.run_id} re-ingested from them "
                  f"({sum(s.calls for s in r.stats):,} calls, {sum(s.units for s in r.stats):,} "
                  f"unit attempts). Rerun the night to score what is missing: dualpath "
                  f"nightly -c {config} --date {night}")


@app.command("rebuild")
def rebuild_cmd(config: Path = CONFIG_OPT) -> None:
    """Make the warehouse again from the journals under runs_dir (a damaged or lost file);
    prices, plans and sweeps are copied from the old file when it can still be read."""
    from dualpath.locks import night_holder
    from dualpath.warehouse.rebuild import rebuild_warehouse

    cfg = load_config(config)
    path = cfg.resolve(cfg.warehouse.path)
    locks = path.with_name(path.name + ".locks")
    live = [h for f in sorted(locks.glob("*.lock")) if (h := night_holder(f)) is not None]
    if live:
        raise UserError(f"a night is being scored ({live[0].describe()}); rebuild once it "
                        "has ended")
    r = rebuild_warehouse(path, cfg.resolve(cfg.warehouse.runs_dir))
    if r.kept_old:
        console.print(f"the old warehouse is kept as {r.kept_old}")
    console.print(f"rebuilt {r.path} from {len(r.stats)} journal(s): "
                  f"{sum(s.calls for s in r.stats):,} calls, {len(r.stats)} runs")
    if r.copied:
        console.print(f"copied from the old file: {', '.join(r.copied)}")
    for t in r.not_recovered:
        err_console.print(f"[yellow]not recovered:[/yellow] {t} (prices: `dualpath prices "
                          "update` or `prices import`; a plan: `dualpath prereg freeze`)")
    for d in r.damaged_journals:
        err_console.print(f"[red]not ingested:[/red] {escape_text(d)}")
    if r.damaged_journals:
        raise typer.Exit(1)


def escape_text(text: str) -> str:
    from rich.markup import escape
    return escape(text)
