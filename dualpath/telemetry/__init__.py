"""GPU telemetry per run: which GPUs a path uses, a sampler reading them while it scores,
and what it saw (joules, watts, the idle floor, the GPU's state and changes to it).

Modules: `settings` (config models), `readers` (NVML, amdgpu hwmon; `NoCounters`), `sim`
(a simulated path's power model), `attribution` (GPUs from launch argv/env), `sampler`
(the 10 Hz thread and its `Summary`). `source_for` picks the source for one path.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from dualpath.telemetry.attribution import path_gpus, path_vendor, shared_gpus
from dualpath.telemetry.readers import GpuInfo, GpuState, NoCounters, link_text, open_source
from dualpath.telemetry.sampler import Sampler, Summary
from dualpath.telemetry.sim import SimSource

__all__ = ["GpuInfo", "GpuState", "NoCounters", "Sampler", "SimSource", "Summary",
           "link_text", "path_gpus", "shared_gpus", "source_for", "unknown_text", "is_local"]

LOCAL = {"127.0.0.1", "localhost", "::1", "0.0.0.0", ""}


def is_local(url: str | None) -> bool:
    """Whether a server at `url` runs on this host (its GPUs can be read here)."""
    host = (urlsplit(url or "").hostname or "").lower()
    return host in LOCAL or host in {socket.gethostname().lower(), socket.getfqdn().lower()}


def source_for(sp, base_url: str | None, busy=None, drm_root=None):
    """The telemetry source of one path (`[paths.X]` settings `sp`), or raises `NoCounters`:
    a simulated GPU for engine 'sim', else the host's GPUs the path uses, read here only when
    its server runs on this host (a work pool's worker reads them on its own)."""
    if sp.engine == "sim":
        return SimSource(sp.power, sp.slots, busy or (lambda: 0), sp.sim.time_scale)
    if not is_local(base_url):
        raise NoCounters(f"the server at {urlsplit(base_url or '').hostname} is on another "
                         "host; score the path there (a work pool) to read its GPUs")
    return open_source(path_gpus(sp), path_vendor(sp), drm_root=drm_root)


def unknown_text(host: str, reason: str) -> str:
    """How a path with no readable GPU says so (never 0 J, never a guess)."""
    return f"energy unknown (no GPU counters on host {host}: {reason})"
