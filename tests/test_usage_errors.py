"""What a person can get wrong on the command line ends in one line and a non-zero exit, never
a traceback: run through the installed console script (`.venv/bin/dualpath`), the way people
run it, since typer raises its own vendored click classes there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_run import run_cli
from tests.helpers import make_project

SCRIPT = Path(sys.executable).parent / "dualpath"


def dualpath(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=env)


def one_line_error(r: subprocess.CompletedProcess, code: int = 2) -> str:
    """The single stderr line of a refused command (and nothing that looks like a traceback)."""
    out = r.stdout + r.stderr
    assert r.returncode == code, out
    assert "Traceback" not in out and "internal error" not in out, out
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


@pytest.mark.parametrize("args,needle", [
    (["--bogus"], "No such option: --bogus (see `dualpath --help`)"),
    (["nosuch"], "No such command 'nosuch'."),
    (["sql"], "Missing argument 'query'. (see `dualpath sql --help`)"),
    (["runs", "--bogus"], "No such option: --bogus (see `dualpath runs --help`)"),
    (["metrics", "--horizon", "x"], "Invalid value for '--horizon'"),
    (["demo", "--nights", "1"], "Invalid value for '--nights'"),
    (["prices", "nosuch"], "No such command 'nosuch'. (see `dualpath prices --help`)"),
    (["prereg", "freeze"], "Missing argument 'plan'."),
    (["export", "-c", "x.toml"], "Missing option '--out'."),
    (["sweep"], "Missing argument 'spec'."),
    (["plan", "--window-hours", "1e308"], "Invalid value for '--window-hours'"),
    (["deploy", "--nightly-cron", "nonsense"], "--nightly-cron 'nonsense' is not a cron "
     "schedule; use five fields"),
    (["serve", "--weekly-cron", "99 99 * * *"], "--weekly-cron '99 99 * * *' is not a cron"),
    (["deploy", "--pool", "a/b"], "--pool 'a/b': give a work pool name without"),
    (["prices", "import", "x.csv", "--date-format", "%Q"], "--date-format '%Q': 'Q' is a bad "
     "directive"),
    (["sql", " "], "the query is empty"),
])
def test_a_usage_error_through_the_console_script_exits_2_with_one_line(tmp_path, args, needle):
    assert SCRIPT.exists(), "the console script is installed by `pip install -e .`"
    line = one_line_error(dualpath(*args, cwd=tmp_path))
    assert needle in line, line


def test_the_bare_command_shows_its_help(tmp_path):
    r = dualpath(cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr
    assert "nightly" in r.stdout + r.stderr


def test_bad_places_on_the_command_line_are_one_line_each(tmp_path):
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    c = ["-c", str(cfg_path)]
    afile = tmp_path / "afile"
    afile.write_text("not a warehouse\n")
    (tmp_path / "empty").write_bytes(b"")
    os.mkfifo(tmp_path / "fifo")
    cases = [
        (["sql", *c, "--db", str(afile), "SELECT 1"], "is not a DuckDB warehouse (no DuckDB header)"),
        (["sql", *c, "--db", str(tmp_path / "empty"), "SELECT 1"], "(an empty file)"),
        (["sql", *c, "--db", str(tmp_path), "SELECT 1"], "is a folder; give the warehouse file"),
        (["export", *c, "--out", str(afile)], f"{afile} is a file; give a folder"),
        (["export", *c, "--out", str(afile / "sub")], f"{afile} is a file; give a folder"),
        (["metrics", *c, "--plot", str(tmp_path)], "is a folder; give a file name"),
        (["metrics", *c, "--plot", str(afile / "x.png")], f"{afile} is a file, not a folder"),
        (["metrics", *c, "-f", "csv", "--out", str(afile)], "is a file; give a folder"),
        (["report", *c, "--out", str(afile)], "is a file; give a folder"),
        (["report", *c, "--since", "2027-05-01", "--until", "2027-04-01"],
         "--since 2027-05-01 is after --until 2027-04-01"),
        (["prereg", "draft", str(tmp_path / "no" / "p.toml"), *c, "--first-night", "2027-04-29"],
         "does not exist; create it first"),
        (["prereg", "draft", str(tmp_path), *c, "--first-night", "2027-04-29", "--force"],
         "is a folder; give a file name"),
        (["prereg", "freeze", str(tmp_path / "fifo"), *c], "is not a regular file (a FIFO"),
        (["prices", "import", str(tmp_path / "fifo"), *c], "is not a regular file (a FIFO"),
        (["sweep", str(tmp_path / "fifo"), *c], "is not a regular file (a FIFO"),
        (["check", "-c", str(tmp_path / "fifo")], "not a regular file (a FIFO"),
        (["init", str(tmp_path / "no" / "x.toml")], "does not exist; create it first"),
        (["init", str(tmp_path), "--force"], "is a folder; give a file name"),
        (["freeze", "--night", "2027-04-29", "--tickers", "1", "--path", "main", *c, "--out",
          str(tmp_path)], "is a folder; give a file name"),
    ]
    # in process: these are dualpath's own errors, not typer's (the console script's
    # are the usage errors above); 19 spawns cost ~30 s of imports
    for args, needle in cases:
        line = one_line_error(run_cli(*args))
        assert needle in line, (args, line)
    assert afile.read_text() == "not a warehouse\n"       # nothing was written over it


def test_an_unexpected_exception_is_one_line_with_the_traceback_in_a_file(tmp_path):
    """The last line of defence: what no handler expected is still one line, and the
    traceback is kept for the bug report."""
    code = ("import sys; sys.argv = ['dualpath', 'check', '-c', 'x.toml']\n"
            "import dualpath.cli.night as n\n"
            "def boom(*a, **k): raise RuntimeError('boom\\nsecond line')\n"
            "n.load_config = boom\n"
            "from dualpath.cli import main; main()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    line, = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert line.startswith("internal error: RuntimeError: boom second line (a dualpath bug")
    kept, = tmp_path.glob("dualpath-traceback-*.txt")
    assert str(kept) in line and "Traceback" in kept.read_text()


def test_every_help_text_shows_its_bracketed_settings():
    """Typer renders help as rich markup: an unescaped '[market]' or '[paths.X.measured]'
    vanished from `--help` ("a session of  calendar")."""
    import re

    import typer
    from typer.testing import CliRunner

    from dualpath.cli import app

    def walk(cmd, path):
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, [*path, name])

    root = typer.main.get_command(app)
    checked = 0
    for path, cmd in walk(root, []):
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        wanted = {m for t in texts for m in re.findall(r"\[[A-Za-z_.]+\]", t.replace("\\[", "["))}
        if not wanted:
            continue
        out = " ".join(CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
                       .output.split())
        for w in wanted:
            assert w in out, (path, w)
            checked += 1
    assert checked >= 4


def test_the_viewer_refuses_a_file_that_is_no_warehouse_before_listening(tmp_path):
    """`dualpath ui --db` checks the file as `dualpath sql --db` does (it started a server
    that answered every page with a 500 and a traceback in the terminal)."""
    import duckdb

    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    c = ["-c", str(cfg_path), "--port", "0"]
    assert one_line_error(dualpath("ui", *c, "--db", "/etc/passwd", timeout=60)) == (
        "error: --db /etc/passwd is not a DuckDB warehouse (no DuckDB header); give the "
        "warehouse file of a config's [warehouse] path")
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).execute("CREATE TABLE t (x INTEGER)").close()
    assert one_line_error(dualpath("ui", *c, "--db", str(other), timeout=60)) == (
        f"error: --db {other} is a DuckDB file but no dualpath warehouse (it has no runs "
        "table); give the warehouse file of a config's [warehouse] path")
    with duckdb.connect(str(other), read_only=True) as con:      # and it was left as it was
        assert [r[0] for r in con.execute("SHOW TABLES").fetchall()] == ["t"]
