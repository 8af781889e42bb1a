"""The `dualpath` command line. The only module that prints for people."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pandas as pd
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from dualpath.config import Config, load_config
from dualpath.errors import DualpathError, UserError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Is the cheaper serving path as good, and how much slower is it?")
console = Console()
err_console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """Is the cheaper serving path as good, and how much slower is it?"""


def demo_config_path() -> Path:
    """The embedded default config shipped inside the package."""
    return Path(__file__).with_name("demo.toml")


def progress_bars() -> Progress:
    return Progress(TextColumn("[bold]{task.description:<8}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("units · {task.fields[calls]} calls"), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=console, transient=False)


def _speed_table(title: str, frame: pd.DataFrame) -> Table:
    t = Table(title=title)
    for col in frame.columns:
        t.add_column(col, justify="right" if frame[col].dtype.kind in "iuf" else "left")
    for row in frame.itertuples(index=False):
        t.add_row(*[f"{v:,.1f}" if isinstance(v, float) else str(v) for v in row])
    return t


CONFIG_OPT = typer.Option(Path("dualpath.toml"), "--config", "-c", help="Config file.")


@app.command()
def check(config: Path = CONFIG_OPT) -> None:
    """Validate a config file and show what it describes."""
    cfg = load_config(config)
    tickers = cfg.tickers()
    console.print(f"[green]ok[/green] {config}: experiment '{cfg.experiment.name}', "
                  f"{len(tickers)} tickers x {cfg.experiment.draws} draws, "
                  f"horizons {cfg.experiment.horizons}")
    for name, p in cfg.paths.items():
        how = "launch" if p.launch else ("simulated" if p.engine == "sim" else "attach")
        console.print(f"  path {name}: {p.engine} {p.base_url or ''} model={p.model} "
                      f"slots={p.slots} ({how})")


@app.command()
def demo(nights: int = typer.Option(1, min=1, help="Synthetic nights to score."),
         tickers: int = typer.Option(100, min=1, max=100, help="Tickers of the synthetic universe."),
         draws: int = typer.Option(2, min=1, help="Draws per ticker."),
         time_scale: float = typer.Option(2e-4, help="Real seconds per modelled second.")) -> None:
    """Score synthetic nights on both simulated paths (the embedded default)."""
    from dualpath.demo import run_demo_in_memory

    with progress_bars() as bars:
        summary = asyncio.run(run_demo_in_memory(nights, tickers, draws, time_scale, bars))
    console.print(_speed_table("Per path (real-scale seconds)", summary))
    console.print("[dim]throughput basis = run wall clock ÷ tickers (sets how long a night "
                  "takes); slot-latency basis = one ticker's first call to last call (what one "
                  "ticker waits, ≈ throughput × slots). Never compare across bases.[/dim]")


def main() -> None:
    """Entry point: user mistakes print one clear message and exit non-zero, no traceback."""
    try:
        app(standalone_mode=False)
    except UserError as e:
        err_console.print(f"[red]error:[/red] {e}")
        sys.exit(2)
    except DualpathError as e:
        err_console.print(f"[red]failed:[/red] {e}")
        sys.exit(1)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as e:
        # Usage errors of the (vendored) click inside typer: show them the way click does.
        if hasattr(e, "show") and hasattr(e, "exit_code"):
            e.show()
            sys.exit(e.exit_code)
        raise
