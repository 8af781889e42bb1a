"""What every command shares: the Typer apps, the consoles, options and table printing."""

from __future__ import annotations

import errno
import logging
import os
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.markup import escape
from rich.table import Table
from typer.core import TyperGroup

from dualpath.errors import DualpathError, UserError

if TYPE_CHECKING:     # pandas costs ~0.3 s of every command's start: imported where used
    import pandas as pd


# `dualpath --help` lists the commands by what a person does, in that order (typer would list
# them in the order the modules register them); a command not named here goes under "Other"
PANELS = {"Set up": ["init", "check", "doctor", "prices", "prereg"],
          "Score nights": ["nightly", "demo", "deploy", "serve"],
          "Results": ["runs", "metrics", "report", "plan", "ui"],
          "Warehouse": ["sql", "schema", "export", "repair", "rebuild"],
          "Speed sweeps": ["freeze", "sweep", "verify", "candidate"]}


class _Commands(TyperGroup):
    """The root group: commands in their panels, each summarised on one line."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        panel_of = {name: panel for panel, names in PANELS.items() for name in names}
        for name, command in self.commands.items():
            command.rich_help_panel = command.rich_help_panel or panel_of.get(name, "Other")
            if not command.short_help and command.help:
                # the first paragraph as one line: typer keeps a docstring's line breaks there
                command.short_help = " ".join(command.help.split("\n\n")[0].split())

    def list_commands(self, ctx) -> list[str]:
        order = [n for names in PANELS.values() for n in names]
        rank = {n: i for i, n in enumerate(order)}
        return sorted(self.commands, key=lambda n: (rank.get(n, len(order)), n))


app = typer.Typer(cls=_Commands, add_completion=False, no_args_is_help=True,
                  pretty_exceptions_enable=False)
prices_app = typer.Typer(no_args_is_help=True, help="Price data in the warehouse.")
app.add_typer(prices_app, name="prices")
prereg_app = typer.Typer(no_args_is_help=True, help="The preregistered comparison plan.")
app.add_typer(prereg_app, name="prereg")
# a pipe gets 160 columns unless COLUMNS says otherwise (tests read at 100)
console = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160)
err_console = Console(stderr=True, soft_wrap=True)

CONFIG_OPT = typer.Option(Path("dualpath.toml"), "--config", "-c", help="Config file.")


FORMAT_OPT = typer.Option("table", "--format", "-f", help="table | csv | json")


def load_config(path: Path):
    """`dualpath.config.load_config`, imported when a command reads its config: the config
    models (pydantic, the engines, httpx) cost `dualpath --help` ~0.2 s it does not need."""
    from dualpath.config import load_config as load

    return load(path)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version
        console.print(f"dualpath {version('dualpath')}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """Is the cheaper serving path as good, and how much slower is it?"""


def prefect_env(home: Path, quiet: bool = False, lean: bool = False) -> None:
    """Settings for Prefect, set at the CLI edge before Prefect is imported. `lean`: a
    temporary server that only this process uses (the demo) keeps what shows a run's
    Completed/Failed state (flow and task runs, their states, artifacts) and drops the rest."""
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(home.resolve()))
    # its first start migrates a new database: at a load of ~13 on 2 cores that took > 90 s
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "240")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_UI_ENABLED", "false")
    if quiet:
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    if lean and not os.environ.get("PREFECT_API_URL"):
        from dualpath.flows.prefect_api import database_current

        # measured on the demo (3 nights x 10 tickers, --clock 2.5, load ~9 on 2 cores): the
        # temporary server's CPU fell from 10.1 s to 4.5 s. Triggers and actions serve
        # automations (none here); the event persister stores the event feed (task runs and
        # their states are recorded from the same events by the task run recorder, kept);
        # its log lines are at WARNING and shown here; an already migrated database is not
        # checked again (alembic loads every migration script to do it)
        os.environ.setdefault("PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED", "false")
        os.environ.setdefault("PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED", "false")
        os.environ.setdefault("PREFECT_LOGGING_TO_API_ENABLED", "false")
        if database_current(Path(os.environ["PREFECT_HOME"])):
            os.environ.setdefault("PREFECT_API_DATABASE_MIGRATE_ON_START", "false")


class _OwnErrorsOnce(logging.Filter):
    """Drops Prefect's report of a flow or task that raised one of dualpath's own errors
    (its traceback, and the 'Finished in state Failed(...)' line naming it): the CLI prints
    that error in one line, and a damaged warehouse or a full disk printed two tracebacks
    above it."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, DualpathError) or unwritable_line(exc) is not None:
            return False
        if isinstance(exc, RuntimeError) and "stopped service instance" in str(exc):
            # a flow that ends at once races Prefect's heartbeat event against its own
            # shutdown (prefect/events/utilities.py): nothing was lost, nothing to report
            return False
        msg = record.msg if isinstance(record.msg, str) else ""
        if msg.startswith("Finished in state") and "Failed" in msg:
            return not any(f"{name}:" in msg or f"{name}(" in msg for name in _own_errors())
        return True


# a read-only file system, or a place this user may not write
UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def unwritable_line(exc: BaseException | None) -> str | None:
    """The one line for an OSError that says a place cannot be written (the warehouse or its
    runs folder on a read-only file system once ended `nightly`, `rebuild` and `sql` in
    'internal error: OSError: [Errno 30]'), else None."""
    if not isinstance(exc, OSError) or exc.errno not in UNWRITABLE:
        return None
    where = exc.filename or "a file dualpath writes"
    why = "is on a read-only file system" if exc.errno == errno.EROFS else "cannot be written"
    return (f"{where} {why} ({exc.strerror}); dualpath writes the warehouse, the runs folder "
            "and the locks beside them: make that place writable, or point [warehouse] path "
            "and runs_dir at one that is")


def _own_errors() -> set[str]:
    out, todo = set(), [DualpathError]
    while todo:
        cls = todo.pop()
        out.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return out


def quiet_prefect_for_own_errors() -> None:
    """Install `_OwnErrorsOnce` on the loggers Prefect's engines report runs on."""
    for name in ("prefect.flow_runs", "prefect.task_runs", "prefect.engine",
                 "prefect.events.utilities"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _OwnErrorsOnce) for f in logger.filters):
            logger.addFilter(_OwnErrorsOnce())


def progress_bars() -> Progress:
    return Progress(TextColumn("[bold]{task.description:<20}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[what]}"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=console)


class PathBars:
    """Rich progress per path: units done / total, calls, ETA. On a rerun the units an
    earlier segment measured count as done, so a finished path shows finished (10/10), not
    0/10 with nothing left to report."""

    def __init__(self, bars: Progress):
        self.bars = bars
        self.tasks: dict[str, int] = {}
        self.before: dict[str, int] = {}

    def reset(self, label: str, paths: list[str], totals: dict[str, int],
              done: dict[str, int] | None = None) -> None:
        for p in paths:
            desc = f"{p} {label}"
            self.before[p] = (done or {}).get(p, 0)
            what = "done earlier" if self.before[p] >= totals[p] else ""
            if p in self.tasks:
                self.bars.reset(self.tasks[p], total=totals[p], description=desc, what=what,
                                completed=self.before[p])
            else:
                self.tasks[p] = self.bars.add_task(desc, total=totals[p], what=what,
                                                   completed=self.before[p])

    def __call__(self, path: str, done: int, total: int, calls: int) -> None:
        if path in self.tasks:
            before = self.before.get(path, 0)
            self.bars.update(self.tasks[path], completed=before + done, total=before + total,
                             what=f"units · {calls:,} calls")


def print_frame(frame: pd.DataFrame, fmt: str, title: str | None = None,
                kinds: dict | None = None) -> None:
    """A frame as a rich table, CSV or JSON (one JSON document: an array of records)."""
    if fmt == "csv":
        sys.stdout.write(frame.to_csv(index=False))
    elif fmt == "json":
        emit_json(records(frame))
    elif fmt == "table":
        from dualpath.evals.format import cell

        t = Table(title=escape(title) if title else None)
        kinds = kinds or {}
        for col in frame.columns:
            t.add_column(escape(str(col)),
                         justify="right" if frame[col].dtype.kind in "iuf" else "left")
        for row in frame.itertuples(index=False):
            t.add_row(*[escape(cell(v, kinds.get(c))) for v, c in zip(row, frame.columns)])
        console.print(t)
    else:
        raise UserError(f"--format {fmt!r}: use table, csv or json")


def print_registered(spec, frame: pd.DataFrame, wide: bool, title: str | None = None) -> None:
    """A registered table on the terminal: its brief columns (all with --wide), each cell by
    the one formatter, and the basis and gloss of the columns shown beneath it."""
    shown = spec.select(frame, wide, drop_empty=True)
    print_frame(shown, "table", title or spec.title, spec.kinds)
    for note in spec.footnotes(shown):
        console.print(f"  {escape(note)}", style="dim", highlight=False)


def records(frame: pd.DataFrame) -> list[dict]:
    """A frame as JSON-ready records (NaN as null, dates as ISO text: a night is a date)."""
    import orjson

    days = {c: frame[c].dt.strftime("%Y-%m-%d") for c in frame.columns
            if frame[c].dtype.kind == "M" and (frame[c].dropna() == frame[c].dropna()
                                               .dt.normalize()).all()}
    return orjson.loads(frame.assign(**days).to_json(orient="records", date_format="iso"))


def emit_json(doc) -> None:
    """One JSON document on stdout (never several back to back)."""
    import orjson

    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_INDENT_2
                                  | orjson.OPT_NON_STR_KEYS, default=str).decode() + "\n")


def _cell(v, kind: str | None = None) -> str:
    """Kept for callers of the package API: the one formatter is `evals.format.cell`."""
    from dualpath.evals.format import cell

    return cell(v, kind)


def input_file(path: Path, what: str) -> Path:
    """A file the command reads: a FIFO or a device is refused (reading one waits forever);
    a missing file or a folder is left to the reader, which names it in its own words."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return path
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise UserError(f"{what} {path} is not a regular file (a FIFO, socket or device); "
                        "give a file")
    return path


def output_file(path: Path, option: str) -> Path:
    """A file the command will write: refused, in one line, when it cannot be one."""
    if path.is_dir():
        raise UserError(f"{option} {path} is a folder; give a file name (e.g. {path / 'x'})")
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise UserError(f"{option} {path}: {parent} is a file, not a folder")
    if not parent.exists():
        raise UserError(f"{option} {path}: folder {parent} does not exist; create it first")
    return path


def output_dir(path: Path, option: str, create: bool = True) -> Path:
    """A folder the command writes into, created if missing (`create`); refused when it
    cannot be one."""
    for p in (path, *path.parents):
        if p.exists() and not p.is_dir():
            raise UserError(f"{option} {path}: {p} is a file; give a folder (it is created "
                            "if missing)")
    if not create:
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{option} {path}: cannot create the folder: "
                        f"{e.strerror or e}") from None
    return path


def date_range(since: date | None, until: date | None) -> None:
    """--since after --until selects nothing: refused rather than an empty result."""
    if since is not None and until is not None and since > until:
        raise UserError(f"--since {since} is after --until {until}; give the earlier night "
                        "first")


def _parse_date(text: str, option: str = "--date") -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserError(f"{option} {text!r} is not a date; use YYYY-MM-DD") from None


def warehouse_file(path: Path, option: str) -> Path:
    """A file given as a warehouse, refused in one line when it is no DuckDB database (a
    DuckDB file says DUCK at byte 8 of its header)."""
    if path.is_dir():
        raise UserError(f"{option} {path} is a folder; give the warehouse file (e.g. "
                        f"{path / 'warehouse.duckdb'})")
    if path.exists():
        try:
            with open(path, "rb") as f:
                head = f.read(12)
        except OSError as e:
            raise UserError(f"{option} {path}: cannot read it: {e.strerror or e}") from None
        if head[8:12] != b"DUCK":
            raise UserError(f"{option} {path} is not a DuckDB warehouse ("
                            + ("an empty file" if not head else "no DuckDB header")
                            + "); give the warehouse file of a config's [warehouse] path")
    return path
