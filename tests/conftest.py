"""Shared fixtures: every test runs in its own folder with a scrubbed environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

import pytest

from dualpath.config import SimProfile
from dualpath.sim.server import RunningServer, SimServer


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """A temp working directory, no inherited dualpath/Prefect settings."""
    for key in list(os.environ):
        if key.startswith(("DUALPATH_", "PREFECT_API_")):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    yield


@pytest.fixture
def sim_server():
    """Factory: a simulated llama-server on a loopback port, stopped after the test."""
    started: list[RunningServer] = []

    def make(slots: int = 4, time_scale: float = 1e-4, **profile) -> RunningServer:
        srv = RunningServer(SimServer(SimProfile(time_scale=time_scale, **profile), slots))
        started.append(srv.start())
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture(scope="session")
def gemma(tmp_path_factory) -> str:
    """The real llama-server's model (Gemma 3 270M GGUF), assembled once for the run: under
    pytest-xdist in the folder all workers' temporary folders share (`gemma_model` assembles
    under a lock and renames into place); the test skips with the reason when the real server
    is not built (tests/realserver.py)."""
    from dualpath.launcher import gemma_model
    from tests.realserver import require_server
    require_server()
    base = tmp_path_factory.getbasetemp()
    return gemma_model((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
                       / "models")


# The developer's loop (`make test-fast`, marker `fast`): whole files, or single tests as
# file::name, that between them reach every package (dualpath, flows, warehouse, evals,
# viewer) in a few minutes; `make test` runs everything.
FAST = {
    "test_evals.py", "test_stats.py", "test_grades.py", "test_calendar.py",      # evals, core
    "test_engines.py", "test_layers.py", "test_sampling.py", "test_prompt_parts.py",
    "test_quoting.py", "test_dictionary.py",                                      # warehouse
    "test_glance.py::test_metrics_opens_with_the_headline_whole_at_100_columns",  # the CLI
    "test_sweep.py::test_point_metrics_hand_worked",                              # flows
    "test_sweep.py::test_knee_is_the_fewest_slots_within_the_share_and_tentative_is_never_best",
    "test_doctor.py::test_the_demo_market_prices_pass_whatever_todays_date",
    "test_ui.py::test_pages_are_read_only_and_refuse_scripts",                    # viewer
}


# The longest files (junit per-file seconds, longest first), collected first: `make test` hands
# whole files to its pytest-xdist workers in collection order (`--dist loadfile
# --no-loadscope-reorder`), so none of these is left to run alone at the end.
LONGEST = ("test_labels.py", "test_outcomes.py", "test_multihost.py", "test_label_disclosure.py",
           "test_report.py", "test_stats.py", "test_sweep_real.py", "test_client.py",
           "test_faults.py", "test_deployment.py", "test_prereg_cli.py", "test_power.py",
           "test_verify_real.py", "test_ingest_shapes.py", "test_glance.py",
           "test_doctor_launch.py", "test_sweep.py")


def pytest_collection_modifyitems(items):
    for item in items:
        name = item.path.name
        if name in FAST or f"{name}::{getattr(item, 'originalname', item.name)}" in FAST:
            item.add_marker(pytest.mark.fast)
    rank = {name: i for i, name in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST)))    # stable


TERMINAL = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist's controller: the terminal settings of the run, for each worker."""
    node.workerinput["terminal"] = {k: os.environ.get(k) for k in TERMINAL}


def pytest_configure(config):
    """A pytest-xdist worker starts with COLUMNS=80 and LINES=24 set, where the run has them
    unset: the CLI's console would wrap at 80 instead of 160 (dualpath/cli/_common.py). The
    worker takes the run's settings, before any test module imports the CLI."""
    terminal = getattr(config, "workerinput", {}).get("terminal")
    for key, value in (terminal or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a real-server test that skips is a failure: CI has the build, and a
    skip there would hide that the integration tests did not run."""
    outcome = yield
    rep = outcome.get_result()
    if (rep.skipped and not hasattr(rep, "wasxfail") and os.environ.get("CI") == "true"
            and item.get_closest_marker("real_server") is not None):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"CI=true and a real-server test skipped: {reason}"


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory):
    """One temporary Prefect API for the session's flow tests."""
    os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "90"
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.testing.utilities import prefect_test_harness
    with prefect_test_harness(server_startup_timeout=90):
        yield


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory):
    """A real `prefect server start` on a loopback port, shared by this module's commands."""
    home = tmp_path_factory.mktemp("prefect-home")
    port = _free_port()
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_UI_ENABLED": "false"}
    env.pop("PREFECT_API_URL", None)
    proc = subprocess.Popen([str(Path(sys.executable).with_name("prefect")), "server", "start",
                             "--host", "127.0.0.1", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail("prefect server did not start")
        time.sleep(0.3)
    yield url
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
