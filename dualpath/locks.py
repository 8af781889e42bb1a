"""One experiment per server: an exclusive, machine-wide lock per endpoint (host:port).

Two dualpath runs on one server would each measure the other's load (the 6-slot client that
attached to the 8-slot server as a ninth client). The lock is an flock on a file named after
the endpoint, released by the kernel if the process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from dualpath.errors import EndpointBusy


def lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / "dualpath-locks"


@contextlib.contextmanager
def endpoint_lock(base_url: str, owner: str) -> Iterator[Path]:
    """Hold the endpoint for this run; raises `EndpointBusy` naming the holder."""
    u = urlsplit(base_url)
    name = f"{u.hostname}_{u.port or (443 if u.scheme == 'https' else 80)}.lock"
    d = lock_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / name
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = path.read_text(errors="replace").strip() or "another process"
            raise EndpointBusy(f"{u.hostname}:{u.port} is in use by {holder}; two experiments "
                               "must never share a server (each would measure the other's "
                               "load); wait for that run to end or give this path another "
                               "server") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"dualpath pid {os.getpid()} ({owner})".encode())
        yield path
    finally:
        os.close(fd)   # closing the descriptor releases the flock
