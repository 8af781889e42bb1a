"""Start simulated servers, each in its own process, and stop them after.

`sim_process` starts one path's server; `SimFleet` starts every simulated path of a config
(the demo and tests keep them up across nights). The processes die with their parent even
when it is killed with SIGKILL (`dualpath.procs.die_with_parent`).

Each runs in its own session, as a launched server does (`dualpath.launcher`) and as the
server it stands in for, on its own machine, would: where the kernel groups processes by
session for scheduling (Linux's autogroup, on by default on desktop distributions), a
simulator then keeps its own share of the CPU instead of splitting the terminal's with
whatever else the user runs there. Measured on 2 cores with 8 busy processes in the demo's
session on top of other work (a load of 10-14; 5 nights, --clock 2.5, 2 rounds A/B): the nights took 163 and 123 s with 7 and 2 of
10 runs starved when the simulators shared it, 88 and 65 s with none starved in their own.
The harness itself stays in the terminal's session (Ctrl-C reaches it; it stops them).
"""

from __future__ import annotations

import contextlib
import select
import subprocess
import sys
import time
from typing import Iterator

from dualpath.config import Config
from dualpath.errors import ServerStartError
from dualpath.procs import spawn, stop_process


def _command(cfg: Config, name: str) -> list[str]:
    sp = cfg.paths[name]
    return [sys.executable, "-m", "dualpath.sim", "--slots", str(sp.slots),
            "--market-start", cfg.market.synthetic_start.isoformat(),
            "--profile", sp.sim.model_dump_json()]


def wait_ready(name: str, proc: subprocess.Popen, timeout_s: float) -> str:
    """The base URL a simulated server process prints once it listens."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("listening on "):
                return line.split()[-1]
        if proc.poll() is not None:
            break
    raise ServerStartError(f"simulated server for path '{name}' did not start "
                           f"(exit code {proc.poll()})")


@contextlib.contextmanager
def sim_process(cfg: Config, name: str, startup_timeout_s: float = 30.0) -> Iterator[str]:
    """One path's simulated server in a child process; yields its base URL."""
    proc = spawn(_command(cfg, name), stdout=subprocess.PIPE, text=True,
                 start_new_session=True)
    try:
        yield wait_ready(name, proc, startup_timeout_s)
    finally:
        stop_process(proc)


class SimFleet:
    """Context manager: one simulated server per 'sim' path without a base_url. `spawn()`
    starts their processes without waiting, so they import and bind side by side (and while
    the caller does other work); entering waits until each listens."""

    def __init__(self, cfg: Config, startup_timeout_s: float = 30.0):
        self.cfg = cfg
        self.timeout = startup_timeout_s
        self.urls: dict[str, str] = {}
        self._procs: dict[str, subprocess.Popen] = {}
        self._stack = contextlib.ExitStack()

    def spawn(self) -> "SimFleet":
        """Start every simulated server's process (once); returns the fleet."""
        if self._procs:
            return self
        try:
            for name, sp in self.cfg.paths.items():
                if sp.engine == "sim" and sp.base_url is None:
                    proc = spawn(_command(self.cfg, name), stdout=subprocess.PIPE, text=True,
                                 start_new_session=True)
                    self._stack.callback(stop_process, proc)
                    self._procs[name] = proc
        except BaseException:
            self.close()
            raise
        return self

    def __enter__(self) -> "SimFleet":
        try:
            self.spawn()
            for name, proc in self._procs.items():
                self.urls[name] = wait_ready(name, proc, self.timeout)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        self._stack.close()

    def __exit__(self, *exc) -> None:
        self.close()
