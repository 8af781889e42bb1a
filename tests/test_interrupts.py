"""Labels true after every interruption: Ctrl-C and SIGTERM end a night the same way, on
Prefect's temporary server too, and `dualpath runs` never shows a night nobody scores as
`running`."""

from __future__ import annotations

import signal
import subprocess

import pytest

from tests.test_cli_nightly import DUALPATH, _wait_for_calls, demo_project, env_for, run


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_on_the_temporary_server_exits_130_quietly(tmp_path, sig):
    cfg = demo_project(tmp_path, tickers=6, backup_scale="0.02")
    env = env_for(None, tmp_path)                # no PREFECT_API_URL: a temporary server
    proc = subprocess.Popen([DUALPATH, "nightly", "-c", str(cfg), "--date", "2027-05-03"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_calls(cfg, proc, timeout=180)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted; rerun the night to resume" in err
    for noise in ("Traceback", "ConnectError", "TerminationSignal"):
        assert noise not in out + err, err[-3000:]
    listed = run("runs", "-c", str(cfg), "-f", "csv", env=env)
    rows = [ln for ln in listed.stdout.splitlines() if ln.startswith("2027-05-03")]
    assert rows and not any(",running," in ln for ln in rows), listed.stdout


# a cross join of minutes on two cores; its first rows come only at the end
LONG_SQL = "SELECT count(*) FROM range(300000) a, range(300000) b WHERE a.range + b.range = 5"


@pytest.mark.parametrize("query", [LONG_SQL])
def test_ctrl_c_on_sql_exits_130_without_an_internal_error(tmp_path, query):
    """DuckDB turns SIGINT into its own interruption: while the query runs (here on the
    snapshot, past the read lock's 5 s) or while its rows are fetched, where it once read
    `internal error: RuntimeError: Query interrupted`, exit 1. Now: exit 130, one line. (The
    timer-or-person logic under the lock is the next test's.)"""
    import time

    from dualpath.warehouse.db import writer
    with writer(tmp_path / "wh.duckdb"):
        pass
    # a timeout far past the test's own waits: under a loaded suite the query's default 60 s
    # once ran out first ("query stopped after 60 s", exit 2) and no Ctrl-C was tested
    cmd = [DUALPATH, "sql", "--db", str(tmp_path / "wh.duckdb"), "-f", "csv", "--timeout", "900"]
    proc = subprocess.Popen([*cmd, query], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    # past the read lock: the query's snapshot copy is there (its folder beside the
    # warehouse), so the CLI has started and DuckDB is running the query again on it
    from dualpath.warehouse.snapshots import PREFIX
    deadline = time.monotonic() + 120
    while not any(d.is_dir() and any(d.iterdir()) for d in tmp_path.glob(PREFIX + "*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.2)
    time.sleep(1.5)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (130, "interrupted\n")


def test_a_query_the_timer_stops_is_a_timeout_and_a_fetch_interrupted_by_a_person_is_not():
    """`_within` tells the two apart by whether its timer fired."""
    import duckdb

    from dualpath.warehouse.db import _within

    con = duckdb.connect()

    def fetch_cut(_con):
        raise RuntimeError("Query interrupted")

    with pytest.raises(KeyboardInterrupt):
        _within(con, fetch_cut, 60.0)
    with pytest.raises(duckdb.InterruptException):
        _within(con, lambda c: c.execute(LONG_SQL).fetchall(), 0.2)
    with pytest.raises(RuntimeError, match="other"):
        _within(con, lambda c: (_ for _ in ()).throw(RuntimeError("other")), 60.0)
