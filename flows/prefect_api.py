"""A temporary Prefect API for one `dualpath nightly` without a server, in its own session.

Without `PREFECT_API_URL` a flow starts Prefect's temporary server as a child in dualpath's
process group, so Ctrl-C in the terminal reached it too: it died at once, and the flow spent
161 s reporting its crash to a server that was gone (pages of `httpx.ConnectError`
tracebacks, exit 1, the night left `running`). Against a dedicated server the same Ctrl-C
took ~1 s and exited 130. So the CLI starts the same server (Prefect's own uvicorn command)
in a session of its own, where the terminal's signals do not reach, on a port the kernel
picks away from 8000-8999 and the paths' ports (Prefect's pick is random in 8000-8999, where
vLLM and llama-server listen), and points the flow at it; it still dies with dualpath
(`dualpath.procs.spawn`), even on SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

import httpx

from dualpath.config import Config
from dualpath.errors import HarnessError
from dualpath.procs import spawn, stop_process


def _free_port(avoid: set[int]) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port
    raise HarnessError("no free port for Prefect's temporary server")


def _wait_healthy(url: str, proc, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise HarnessError(f"Prefect's temporary server exited ({proc.returncode}) "
                                   f"while starting (its log: {log}); set PREFECT_API_URL "
                                   "to a running server")
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    raise HarnessError(f"Prefect's temporary server did not start in {timeout_s:.0f} s; "
                       "start one (`prefect server start`) and set PREFECT_API_URL")


@contextlib.contextmanager
def temporary_api(cfg: Config) -> Iterator[str | None]:
    """Prefect's API for the block: the configured one, else a temporary server detached
    from the terminal's signals (yields its URL; None when one is configured)."""
    import prefect
    from prefect.settings import (PREFECT_API_URL, PREFECT_HOME,
                                  PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
                                  get_current_settings, temporary_settings)

    if PREFECT_API_URL.value():
        yield None
        return
    avoid = {urlsplit(p.base_url).port for p in cfg.paths.values() if p.base_url}
    port = _free_port(avoid | set(range(8000, 9000)))
    argv = [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
            "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "error", "--lifespan", "on"]
    env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
           "PREFECT__SERVER_FINAL": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           **get_current_settings().to_environment_variables(exclude_unset=True)}
    # the server's own errors (a telemetry heartbeat's "database is locked" traceback was one)
    # go to its log, not to the terminal of the person who ran the night
    log = Path(PREFECT_HOME.value()) / "temporary-server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = spawn(argv, env=env, start_new_session=True, stdout=out, stderr=out)
    try:
        url = f"http://127.0.0.1:{port}/api"
        _wait_healthy(url, proc, float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()), log)
        with temporary_settings({PREFECT_API_URL: url}):
            try:
                yield url
            finally:
                _drain_logs()
    finally:
        stop_process(proc, timeout_s=5.0)


class EarlyAPI:
    """Prefect's temporary server, started before Prefect is imported (the demo): its start
    (importing Prefect's server, ~9 s of CPU) runs beside the caller's own imports and set-up
    instead of after them, where the first flow started it. The same server `temporary_api`
    starts (Prefect's uvicorn command, its own session, dies with dualpath). Entered: the
    flows' API is it; `ready()` waits until it answers (before the first flow); left: it
    stops. A configured PREFECT_API_URL is used as it is, and nothing is started."""

    def __init__(self):
        import importlib.util

        self.url = self.proc = None
        self._settings = contextlib.ExitStack()
        self._env = os.environ.get("PREFECT_API_URL")
        if self._env:
            return
        spec = importlib.util.find_spec("prefect")
        app_dir = Path(list(spec.submodule_search_locations)[0]).parent
        port = _free_port(set(range(8000, 9000)))
        argv = [sys.executable, "-m", "uvicorn", "--app-dir", str(app_dir), "--factory",
                "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port",
                str(port), "--log-level", "error", "--lifespan", "on"]
        # Prefect's settings are the environment here (it is not imported yet): PREFECT_HOME
        # and the lean services `prefect_env` set reach the server as they did
        env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
               "PREFECT__SERVER_FINAL": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        self.log = Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect")) / \
            "temporary-server.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = spawn(argv, env=env, start_new_session=True, stdout=out, stderr=out)
        self.url = f"http://127.0.0.1:{port}/api"
        os.environ["PREFECT_API_URL"] = self.url     # read when Prefect is imported
        self._waited = False

    def ready(self) -> None:
        if self.proc is not None and not self._waited:
            timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS")
                            or 240)
            _wait_healthy(self.url, self.proc, timeout, self.log)
            self._waited = True

    def __enter__(self):
        if self.proc is not None:      # Prefect imported earlier (tests) read its settings then
            from prefect.settings import PREFECT_API_URL, temporary_settings
            self._settings.enter_context(temporary_settings({PREFECT_API_URL: self.url}))
        return self.ready

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        try:
            if self._waited:
                _drain_logs()
            self._settings.close()
        finally:
            os.environ.pop("PREFECT_API_URL", None)
            stop_process(self.proc, timeout_s=5.0)


def _drain_logs() -> None:
    """Send the flow's queued log lines while the server still listens: Prefect drains them
    at exit, after the server is gone, and printed "--- Error logging to API --- All
    connection attempts failed" at the end of every night."""
    from prefect.logging.handlers import APILogWorker

    with contextlib.suppress(Exception):       # logs are a convenience, never the night's
        APILogWorker.drain_all(timeout=5)


def database_current(home: Path) -> bool:
    """Whether Prefect's default database under `home` is already at the installed Prefect's
    newest migration (read with sqlite3 and the migration files' names; Prefect itself is not
    imported). A server that starts on it can skip migrating: alembic's upgrade check loads
    every migration script, ~5 s of the temporary server's CPU at each start on 2 busy cores.
    Any doubt (no database, another database configured, a newer or older schema) reads
    False, and the server migrates as it always did."""
    import importlib.util
    import re
    import sqlite3

    db = home / "prefect.db"
    spec = importlib.util.find_spec("prefect")
    if (os.environ.get("PREFECT_API_DATABASE_CONNECTION_URL") or not db.is_file()
            or spec is None or not spec.submodule_search_locations):
        return False
    versions = (Path(list(spec.submodule_search_locations)[0])
                / "server" / "database" / "_migrations" / "versions" / "sqlite")
    revisions: set[str] = set()
    downs: set[str] = set()
    for script in versions.glob("*.py"):
        text = script.read_text()
        revisions.update(re.findall(r'^revision = "(\w+)"', text, re.M))
        downs.update(re.findall(r'^down_revision = "(\w+)"', text, re.M))
    heads = revisions - downs
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True,
                                                timeout=1.0)) as con:
            rows = con.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        return False
    return len(heads) == 1 and {r[0] for r in rows} == heads
