"""User mistakes print one clear message, exit non-zero, and never show a traceback."""

import subprocess
import sys


from tests.cli_run import run_cli
from tests.helpers import make_project


def dualpath(*args, cwd=None):
    if cwd is None:                      # in process: the CLI's imports paid once, not per call
        return run_cli(*args)
    return subprocess.run([sys.executable, "-m", "dualpath", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def assert_user_error(r, needle):
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert needle in out, out
    assert "Traceback" not in out


def test_a_user_error_in_its_own_process_is_one_line_without_a_traceback():
    """The helper runs the CLI in process; this spawns it as a shell does (exit code, stderr)."""
    r = subprocess.run([sys.executable, "-m", "dualpath", "runs", "--config", "nope.toml"],
                       capture_output=True, text=True, timeout=120)
    assert_user_error(r, "not found; create one with `dualpath init`")


def test_missing_config():
    assert_user_error(dualpath("runs", "--config", "nope.toml"), "not found; create one with `dualpath init`")


def test_sql_without_warehouse(tmp_path):
    dualpath("init", "--demo", str(tmp_path / "c.toml"))
    assert_user_error(dualpath("sql", "--config", str(tmp_path / "c.toml"), "SELECT 1"),
                      "no warehouse at")


def test_bad_sql_and_bad_format_and_bad_date(tmp_path):
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    assert_user_error(dualpath("sql", "--config", str(cfg_path), "SELEC nonsense"), "query failed")
    assert_user_error(dualpath("sql", "--config", str(cfg_path), "-f", "xml", "SELECT 1"),
                      "use table, csv or json")
    assert_user_error(dualpath("nightly", "--config", str(cfg_path), "--date", "2027-13-01"),
                      "is not a date")
    r = dualpath("sql", "--config", str(cfg_path), "-f", "json", "SELECT 1 AS one")
    assert r.returncode == 0 and '"one":1' in r.stdout.replace(" ", "")


def test_sql_is_read_only(tmp_path):
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    assert_user_error(dualpath("sql", "--config", str(cfg_path), "DELETE FROM prices"),
                      "query failed")


def test_bad_price_file(tmp_path):
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    (tmp_path / "p.csv").write_text("ticker,date,adj_close\nSYN000,2027-01-04,-1\n")
    assert_user_error(dualpath("prices", "import", str(tmp_path / "p.csv"), "--config",
                               str(cfg_path)), "adj_close must be > 0")


def test_init_refuses_to_overwrite(tmp_path):
    assert dualpath("init", str(tmp_path / "c.toml")).returncode == 0
    assert_user_error(dualpath("init", str(tmp_path / "c.toml")), "pass --force")
    # the example names no file that is not there but its launch models (on the GPU host)
    from tests.test_identity_engines import example_with_models
    r = dualpath("check", "--config", str(tmp_path / "c.toml"))
    assert r.returncode == 2 and "paths.main.launch: the model file /models/" in r.stderr
    assert dualpath("check", "--config", str(example_with_models(tmp_path))).returncode == 0


def test_messages_with_brackets_print_literally(tmp_path):
    """rich would read '[paths.main]' as markup and drop it from the message."""
    bad = tmp_path / "bad.toml"
    bad.write_text('[experiment]\nuniverse = ["A", "B"]\n[paths]\n')
    assert_user_error(dualpath("check", "--config", str(bad)), "e.g. [paths.main]")


def test_a_night_that_is_no_session_is_refused_naming_the_sessions_around_it(tmp_path):
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    r = dualpath("nightly", "--config", str(cfg_path), "--date", "2027-05-01")   # a Saturday
    assert_user_error(r, "2027-05-01 is not a session")
    assert r.returncode == 2 and "2027-04-30" in r.stderr and "2027-05-03" in r.stderr


def test_version_suggestions_export_and_an_offline_check(tmp_path):
    from typer.testing import CliRunner

    from dualpath.cli import app
    run = CliRunner().invoke
    assert run(app, ["--version"]).output.startswith("dualpath ")
    bad = tmp_path / "bad.toml"
    bad.write_text('[experiment]\nuniverse = ["A", "B"]\n[sampling]\ntempreature = 0.5\n'
                   '[paths.x]\nengine = "sim"\nmodel = "m"\nslotz = 3\n')
    r = dualpath("check", "--config", str(bad))
    assert "sampling.tempreature: unknown setting; did you mean 'temperature'?" in r.stderr
    assert "paths.x.slotz: unknown setting; did you mean 'slots'?" in r.stderr
    cfg_path, cfg, _ = make_project(tmp_path, tickers=5, draws=1, nights=1)
    ok = run(app, ["check", "-c", str(cfg_path)])
    assert ok.exit_code == 0 and "offline check" in ok.output
    r = run(app, ["export", "-c", str(cfg_path), "--out", str(tmp_path / "x"), "-f", "csv"])
    assert r.exit_code == 0 and (tmp_path / "x" / "prices.csv").read_text().startswith("ticker,")
    r = dualpath("sql", "--config", str(cfg_path), "SELECT tickr FROM prices")
    assert 'Candidate bindings: "ticker"' in r.stderr         # DuckDB's whole message


def test_a_failed_query_is_one_line_with_duckdbs_hint(tmp_path):
    """DuckDB's message spans lines (its hint, the query echoed, a caret): one line here."""
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    r = dualpath("sql", "--config", str(cfg_path), "SELECT tickr FROM prices")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == ('error: query failed: Binder Error: Referenced column "tickr" not found '
                        'in FROM clause! (Candidate bindings: "ticker"); `dualpath schema` '
                        'lists every table, view and column\n')
    r = dualpath("sql", "--config", str(cfg_path), "SELEC 1")
    assert r.stderr == 'error: query failed: Parser Error: syntax error at or near "SELEC"\n'
