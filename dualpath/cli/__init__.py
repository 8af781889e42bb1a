"""The `dualpath` command line: the only package that prints for people.

One Typer app (`_common`), its commands by theme: `night` (check, nightly, demo, runs, plan,
doctor, deploy, serve), `data` (sql, schema, export, prices) and `results` (metrics, prereg,
report).
"""

from __future__ import annotations

import sys

from dualpath.cli import data, night, results, sweep  # noqa: F401  (registers the commands)
from dualpath.cli import ui  # noqa: F401  (registers `dualpath ui`)
from rich.markup import escape

from dualpath.cli._common import _cell, app, err_console  # noqa: F401  (the package's API)
from dualpath.errors import DualpathError, UserError

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
