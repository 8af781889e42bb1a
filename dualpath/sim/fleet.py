"""Start the simulated servers of a config, each in its own process, and stop them after."""

from __future__ import annotations

import select
import subprocess
import sys
import time
from datetime import date

from dualpath.config import Config
from dualpath.errors import DualpathError


class SimFleet:
    """Context manager: one `python -m dualpath.sim` process per 'sim' path without a base_url."""

    def __init__(self, cfg: Config, startup_timeout_s: float = 30.0):
        self.cfg = cfg
        self.timeout = startup_timeout_s
        self.procs: dict[str, subprocess.Popen] = {}
        self.urls: dict[str, str] = {}

    def __enter__(self) -> "SimFleet":
        start: date = self.cfg.market.synthetic_start
        try:
            for name, sp in self.cfg.paths.items():
                if sp.engine == "sim" and sp.base_url is None:
                    self.procs[name] = subprocess.Popen(
                        [sys.executable, "-m", "dualpath.sim", "--slots", str(sp.slots),
                         "--market-start", start.isoformat(), "--profile", sp.sim.model_dump_json()],
                        stdout=subprocess.PIPE, text=True)
            for name, proc in self.procs.items():
                self.urls[name] = self._wait_ready(name, proc)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_ready(self, name: str, proc: subprocess.Popen) -> str:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 0.1)
            if ready:
                line = proc.stdout.readline()
                if line.startswith("listening on "):
                    return line.split()[-1]
            if proc.poll() is not None:
                break
        raise DualpathError(f"simulated server for path '{name}' did not start "
                            f"(exit code {proc.poll()})")

    def __exit__(self, *exc) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
