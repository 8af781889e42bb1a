"""The `dualpath` command line: the only package that prints for people.

One Typer app (`_common`), its commands by theme: `night` (check, nightly, demo, runs, plan,
doctor, deploy, serve), `data` (sql, schema, export, prices), `results` (metrics, report)
and `prereg` (draft, freeze, status). `main` is the console script: whatever happens, a person
sees one line, never a traceback.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback

from dualpath.cli import data, night, prereg, results, sweep  # noqa: F401  (registers the commands)
from dualpath.cli import ui  # noqa: F401  (registers `dualpath ui`)
from dualpath.cli import candidate  # noqa: F401  (registers `dualpath candidate`)
from rich.markup import escape

from dualpath.cli._common import _cell, app, err_console  # noqa: F401  (the package's API)
from dualpath.cli._common import quiet_prefect_for_own_errors, unwritable_line
from dualpath.errors import DualpathError, UserError

INTERRUPTED = "interrupted; rerun the night to resume"
# commands whose interruption leaves a night to resume; any other just stops
RESUMABLE = {"nightly", "demo"}


def _interrupted() -> str:
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
    return INTERRUPTED if command in RESUMABLE else "interrupted"


def _click_classes() -> tuple[tuple, tuple, tuple, tuple]:
    """(ClickException, UsageError, NoArgsIsHelpError, Abort) classes of every click that
    can raise here: typer >= 0.2x vendors click as `typer._click` and raises those, not the
    standalone package's (a `click.UsageError` handler never saw them)."""
    mods = []
    try:
        from typer import _click as vendored
        from typer import exceptions as typer_exc
        mods.append((vendored.exceptions, typer_exc.Abort))
    except ImportError:
        pass
    try:
        import click
        mods.append((click.exceptions, click.exceptions.Abort))
    except ImportError:
        pass
    return (tuple(m.ClickException for m, _ in mods), tuple(m.UsageError for m, _ in mods),
            tuple(getattr(m, "NoArgsIsHelpError", ()) for m, _ in mods
                  if hasattr(m, "NoArgsIsHelpError")),
            tuple(a for _, a in mods))


def _usage_line(e) -> str:
    """A usage error as one line: what was wrong and where the help is."""
    ctx = getattr(e, "ctx", None)
    where = f"`{ctx.command_path} --help`" if ctx is not None else "`dualpath --help`"
    message = " ".join(str(e.format_message()).split())
    return f"{message} (see {where})"


def _internal_error(e: BaseException) -> None:
    """An exception no handler expected: one line, the traceback kept in a file for a bug
    report (DUALPATH_TRACEBACK=1 prints it instead)."""
    text = "".join(traceback.format_exception(e))
    if os.environ.get("DUALPATH_TRACEBACK") == "1":
        sys.stderr.write(text)
        return
    where = ""
    try:
        fd, name = tempfile.mkstemp(prefix="dualpath-traceback-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        where = f"; the traceback is in {name}"
    except OSError:
        pass
    first = " ".join(str(e).split())[:300]
    err_console.print(f"[red]internal error:[/red] {escape(type(e).__name__)}: {escape(first)} "
                      f"(a dualpath bug, please report it{escape(where)})")


def main() -> None:
    """Entry point: user mistakes print one clear message and exit non-zero, no traceback.

    Exit codes: 0 ok; 1 a night not complete or a failure; 2 a user mistake (usage errors
    included); 130 interrupted.
    """
    click_error, usage_error, no_args, abort = _click_classes()
    quiet_prefect_for_own_errors()
    try:
        code = app(standalone_mode=False)
    except UserError as e:
        err_console.print(f"[red]error:[/red] {escape(str(e))}")
        sys.exit(2)
    except DualpathError as e:
        err_console.print(f"[red]failed:[/red] {escape(str(e))}")
        sys.exit(1)
    except (KeyboardInterrupt, *abort):
        err_console.print(_interrupted())
        sys.exit(130)
    except no_args as e:       # `dualpath` alone: the help, as click shows it
        e.show()
        sys.exit(e.exit_code)
    except usage_error as e:
        err_console.print(f"[red]error:[/red] {escape(_usage_line(e))}")
        sys.exit(2)
    except click_error as e:
        err_console.print(f"[red]error:[/red] {escape(' '.join(e.format_message().split()))}")
        sys.exit(e.exit_code)
    except SystemExit:
        raise
    except BrokenPipeError:    # `dualpath runs | head`: the reader left; nothing to say
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        sys.exit(1)
    except Exception as e:     # noqa: BLE001 — the last line of defence: no traceback shown
        if (line := unwritable_line(e)) is not None:
            err_console.print(f"[red]error:[/red] {escape(line)}")
            sys.exit(2)
        _internal_error(e)
        sys.exit(1)
    # without standalone mode typer returns an exit code instead of raising: 130 is its
    # answer to a KeyboardInterrupt inside a command
    if code == 130:
        err_console.print(_interrupted())
    sys.exit(code if isinstance(code, int) else 0)
