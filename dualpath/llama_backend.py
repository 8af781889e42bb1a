"""Where a llama-server runs: its backend (Vulkan, CUDA, ROCm, CPU) and its devices.

llama-server's `/props` and `/v1/models` name neither (llama.cpp build 11434,
`tools/server/server-context.cpp`, `get_res_props`, `get_res_model_info`), and at its default
verbosity its start log does not either: the `using device NAME (DESCRIPTION) (ID) - N MiB
free` lines (`src/llama.cpp`) appear only at `-lv 4` (measured on the H100: the Vulkan and the
CUDA builds alike). So, for the process behind the port, on this host:

- the backend is the ggml backend library it mapped (`libggml-vulkan.so`, `libggml-cuda.so`,
  `libggml-hip.so`: /proc/PID/maps; a shared build, llama.cpp's default), else the devices'
  names;
- its devices are those its own binary lists (`llama-server --list-devices`, run once per
  server process with the server's environment, so `GGML_VK_VISIBLE_DEVICES` and
  `CUDA_VISIBLE_DEVICES` narrow it as they narrow the server), of them the `--device` ones
  where the argv names some; or the start log's `using device` lines where it has them
  (`-lv 4`, its stderr a file: dualpath's launches write there).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

# ggml's backend libraries and the names its devices carry (`ggml_backend_reg_name`)
_LIBS = {"vulkan": "Vulkan", "cuda": "CUDA", "hip": "ROCm", "metal": "Metal", "sycl": "SYCL",
         "opencl": "OpenCL", "musa": "MUSA", "cann": "CANN", "rpc": "RPC"}
_LIB = re.compile(r"/libggml-([a-z]+)\.so")
_LOG_DEVICE = re.compile(r"using device (\S+) \((.*)\) \(([^()]*)\) - \d+ MiB free")
_LISTED = re.compile(r"^\s+(\S+): (.*) \((\d+) MiB, (\d+) MiB free\)\s*$")
_OFFLOAD = re.compile(r"offloaded (\d+/\d+) layers to GPU")
_START = "llama_model_loader: loaded meta data"     # once per start, before its devices
_LOG_LIMIT = 16 << 20         # a start's lines come first: no need to read a night's log
_ENV = ("GGML_VK_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES", "VK_DRIVER_FILES", "VK_ICD_FILENAMES", "LD_LIBRARY_PATH")


@dataclass(frozen=True, slots=True)
class Backend:
    """What the server runs on: `backend` ("Vulkan"), `device` ("Vulkan0 (NVIDIA H100 80GB
    HBM3)"; devices joined by '; ', "CPU" when none), and where each was read."""

    backend: str
    device: str
    how: str
    offloaded: str | None = None

    def raw(self) -> dict:
        """For the stored identity (`ServerIdentity.raw['backend']`)."""
        return {"backend": self.backend, "device": self.device, "how": self.how,
                "offloaded": self.offloaded}


def mapped_backends(maps: str) -> list[str]:
    """The ggml backends whose libraries a /proc/PID/maps text shows (CPU ones left out)."""
    return sorted({_LIBS[m[1]] for m in _LIB.finditer(maps) if m[1] in _LIBS})


def listed_devices(text: str) -> list[str]:
    """`llama-server --list-devices` output as 'NAME (DESCRIPTION)' per device."""
    return [f"{m[1]} ({m[2]})" for line in text.splitlines() if (m := _LISTED.match(line))]


def log_devices(text: str) -> tuple[list[str], str | None] | None:
    """The last start's `using device` lines in a (`-lv 4`) start log as 'NAME (DESCRIPTION)',
    and its offloaded layers (None: the log names no device)."""
    last = text.rsplit(_START, 1)[-1]
    devices = [f"{m[1]} ({m[2]})" for m in _LOG_DEVICE.finditer(last)]
    off = _OFFLOAD.search(last)
    return (devices, off[1] if off else None) if devices else None


def chosen(argv: list[str], env: dict[str, str]) -> list[str] | None:
    """The devices `--device`/`-dev` (or LLAMA_ARG_DEVICE) names (None: all, the default)."""
    value = env.get("LLAMA_ARG_DEVICE")
    for i, a in enumerate(argv[:-1]):
        if a in ("--device", "-dev"):
            value = argv[i + 1]
    for a in argv:
        if a.startswith("--device="):
            value = a.split("=", 1)[1]
    return [d.strip() for d in value.split(",") if d.strip()] if value else None


def describe(maps: str, listed: str | None, argv: list[str], env: dict[str, str],
             log: str | None) -> Backend | None:
    """The backend from what was read of one server process (None: nothing says)."""
    from_log = log_devices(log) if log else None
    if from_log is not None:
        devices, how, offloaded = from_log[0], "start log", from_log[1]
    elif listed is not None:
        want = chosen(argv, env)
        devices = [d for d in listed_devices(listed)
                   if want is None or d.split(" ", 1)[0] in want]
        if want and "none" in want:
            devices = []
        how, offloaded = "--list-devices" + (" and --device" if want else ""), None
    else:
        devices, how, offloaded = [], "", None
    libs = mapped_backends(maps)
    names = sorted({re.sub(r"\d+$", "", d.split(" ", 1)[0]) for d in devices})
    backend = "+".join(names or libs) or ("CPU" if maps or listed is not None else "")
    if not backend:
        return None
    how = "; ".join(h for h in ("mapped libraries" if libs else "", how) if h)
    return Backend(backend, "; ".join(devices) or "CPU", how, offloaded)


_cache: dict[tuple, Backend | None] = {}


def read(pid: int, argv: list[str]) -> Backend | None:
    """The backend and devices of the llama-server `pid` (started with `argv`), read once per
    process (None: its files cannot be read from here)."""
    try:
        key = (pid, os.stat(f"/proc/{pid}").st_ctime_ns)
        maps = open(f"/proc/{pid}/maps").read()
    except OSError:
        return None
    if key not in _cache:
        env = _environ(pid)
        _cache[key] = describe(maps, _list_devices(pid, argv, env), argv, env, _start_log(pid))
    return _cache[key]


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0"))
    return {k: v for k, _, v in pairs if k in (*_ENV, "LLAMA_ARG_DEVICE")}


def _list_devices(pid: int, argv: list[str], env: dict[str, str]) -> str | None:
    """The server's own binary asked which devices it sees, under the server's environment:
    the program its argv names (relative to its working directory), else its executable.
    It initialises the backend once (~1 s; CUDA takes a context on each device for that
    moment): a GPU too full for that leaves the devices unread (None), not the backend."""
    try:
        prog = os.path.join(os.readlink(f"/proc/{pid}/cwd"), argv[0]) if argv else ""
        if not (os.path.isfile(prog) and os.access(prog, os.X_OK)):
            prog = os.readlink(f"/proc/{pid}/exe").removesuffix(" (deleted)")
        r = subprocess.run([prog, "--list-devices"], capture_output=True, text=True, timeout=30,
                           env={**{k: v for k, v in os.environ.items() if k not in _ENV}, **env})
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout + r.stderr if r.returncode == 0 else None


def _start_log(pid: int) -> str | None:
    """The start of the file the server writes its stderr (else stdout) to, if one."""
    for fd in (2, 1):
        try:
            path = os.readlink(f"/proc/{pid}/fd/{fd}")
            if path.startswith("/") and os.path.isfile(path):
                with open(path, "rb") as f:
                    return f.read(_LOG_LIMIT).decode(errors="replace")
        except OSError:
            continue
    return None
