"""Where each path's server is tonight: given, simulated, launched or attached, and locked.

`connect` is an async context manager for one path: it obtains the endpoint, takes the
machine-wide endpoint lock, launches the server if the path says how (in a worker thread:
a launch waits minutes for /health and must not stall the other path), and yields an
`Endpoint` describing what it did. Anything that prevents it raises a `PathUnavailable` or
`EndpointBusy`, which the caller records as that path's failure; other paths go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator
from urllib.parse import urlsplit

from dualpath.config import Config
from dualpath.launcher import LaunchedServer, expand_argv, gpu_state, redact_argv, redact_env
from dualpath.errors import EndpointBusy
from dualpath.locks import endpoint_holder, endpoint_lock
from dualpath.sim.fleet import sim_process


@dataclass(frozen=True)
class Endpoint:
    """A live server for one path tonight, and how dualpath obtained it."""

    base_url: str
    how: str                         # attached | launched | simulated
    command: str | None = None       # launch argv, secrets redacted
    env: dict[str, str] | None = None  # launch environment overrides, secrets redacted
    log_path: str | None = None
    launched_wall: float | None = None
    gpu_state: str | None = None


@contextlib.asynccontextmanager
async def connect(cfg: Config, path: str, run_id: str, log_dir: Path,
                  override_url: str | None = None) -> AsyncIterator[Endpoint]:
    """The path's endpoint, locked (and launched or simulated) for as long as the block runs."""
    sp = cfg.paths[path]
    async with contextlib.AsyncExitStack() as stack:
        if override_url:
            url, how = override_url, "simulated" if sp.engine == "sim" else "attached"
        elif sp.engine == "sim" and sp.base_url is None:
            sim = sim_process(cfg, path)
            url = await asyncio.to_thread(sim.__enter__)
            stack.push(sim.__exit__)
            how = "simulated"
        else:
            url, how = sp.base_url, "attached"
        stack.enter_context(endpoint_lock(url, run_id))
        launch: dict = {}
        if sp.launch and not override_url:
            argv = await asyncio.to_thread(expand_argv, sp.launch,
                                           cfg.resolve(Path(".dualpath/models")))
            server = LaunchedServer(argv, url, log_dir / "server.log", dict(sp.launch_env),
                                    sp.ready_timeout_s)
            await asyncio.to_thread(server.__enter__)
            stack.push(server.__exit__)
            how = "launched"
            launch = {"command": " ".join(redact_argv(argv)),
                      "env": redact_env(dict(sp.launch_env)),
                      "log_path": str(server.log_path), "launched_wall": server.started_wall}
        yield Endpoint(base_url=url, how=how, gpu_state=await asyncio.to_thread(gpu_state),
                       **launch)


def refuse_busy_servers(cfg: Config, endpoints: dict[str, str] | None,
                        paths: list[str] | None) -> None:
    """Raise `EndpointBusy` when a server a path attaches to is held by another dualpath run,
    before the night writes anything: a refused start once left failed runs and a deviation
    in the frozen study, its reason printed once per path and segment."""
    for name in paths or list(cfg.paths):
        url = (endpoints or {}).get(name) or cfg.paths[name].base_url
        if url and (holder := endpoint_holder(url)) is not None:
            u = urlsplit(url)
            raise EndpointBusy(f"path {name}'s server {u.hostname}:{u.port} is in use by "
                               f"{holder}; nothing was recorded: start this night when that "
                               "run has ended, or give the path another server")


def _free_ports(avoid: set[int], n: int = 8) -> list[int]:
    """Ports the kernel hands out now (its ephemeral range), none of them in `avoid`."""
    out = []
    for _ in range(4 * n):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid and port not in out:
            out.append(port)
        if len(out) == n:
            break
    return out


def keep_prefect_off_paths(cfg: Config) -> None:
    """Prefect's temporary API server (started by a flow when no PREFECT_API_URL is set)
    takes a random free port in 8000-8999 (prefect/server/api/server.py, `_port_range`), where
    vLLM (8000) and llama-server (8080) listen by default, and dualpath launches the paths'
    servers after it. Prefect has no setting for that port: hand it, as its own test harness
    does, a server instance on ports the kernel picks, away from that range and every path's."""
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value() or SubprocessASGIServer._instances.get(None) is not None:
        return
    avoid = {urlsplit(p.base_url).port for p in cfg.paths.values() if p.base_url}
    avoid |= set(range(8000, 9000))
    ports = _free_ports(avoid)
    if not ports:
        return
    server = SubprocessASGIServer(port=ports[0])
    server._port_range = ports       # a retry (port taken meanwhile) stays among these
    SubprocessASGIServer._instances[None] = server
