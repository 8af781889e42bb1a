"""Shared fixtures: every test runs in its own folder with a scrubbed environment."""

from __future__ import annotations

import os

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
def prefect_harness(tmp_path_factory):
    """One temporary Prefect API for the session's flow tests."""
    os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "90"
    os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    from prefect.testing.utilities import prefect_test_harness
    with prefect_test_harness(server_startup_timeout=90):
        yield
