"""The CLI run in this process as `python -m dualpath` runs it in its own, for whole-output
tests: `dualpath.cli.main` (its one-line errors and exit codes) under click's `CliRunner`
isolation (stdin, stdout and stderr swapped; simonw/llm tests its click CLI so), the console
as wide as a pipe gets (160, or `columns` as COLUMNS would set it). Spawning the CLI costs
1-3.4 s of imports per call; here the imports are paid once per test process."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from click.testing import CliRunner


@dataclass(frozen=True)
class Ran:
    """What `subprocess.run(..., capture_output=True, text=True)` would have returned."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, columns: int | None = None) -> Ran:
    """Run `dualpath ARGS` in process; never raises for what the CLI itself reports."""
    from dualpath.cli import main
    from dualpath.cli._common import console

    # the CLI sets environment variables at its edge (Prefect's settings), for its own
    # process: they are put back, so no later test inherits them
    argv, width, environ = sys.argv, console._width, dict(os.environ)
    console._width = columns or 160
    with CliRunner().isolation() as (out, err, _):
        sys.argv = ["dualpath", *map(str, args)]
        try:
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            sys.argv, console._width = argv, width
            os.environ.clear()
            os.environ.update(environ)
            sys.stdout.flush()         # what the CLI wrote to sys.stdout itself (csv, json)
            sys.stderr.flush()
        return Ran(code, out.getvalue().decode(), err.getvalue().decode())
