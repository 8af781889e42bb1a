"""A simulated server on a loopback port, run in a background thread (tests, in-process
demo)."""

from __future__ import annotations

import threading
import time

import uvicorn

from typing import TYPE_CHECKING

from dualpath.config import SimProfile

if TYPE_CHECKING:
    from dualpath.sim.server import SimServer


class RunningServer:
    """A uvicorn server on a loopback port, run in a background thread (tests, in-process demo)."""

    def __init__(self, sim: SimServer, host: str = "127.0.0.1", port: int = 0):
        from dualpath.sim.server import build_app

        self.sim = sim
        cfg = uvicorn.Config(build_app(sim), host=host, port=port, log_level="warning",
                             access_log=False, lifespan="off")
        self._server = uvicorn.Server(cfg)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.url = ""

    def start(self, timeout: float = 10.0) -> "RunningServer":
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("simulated server did not start")
            time.sleep(0.01)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> "RunningServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve_in_thread(profile: SimProfile, slots: int = 4, **kw) -> RunningServer:
    """Start a simulated server in a thread; use as a context manager."""
    from dualpath.sim.server import SimServer

    return RunningServer(SimServer(profile, slots, **kw)).start()
