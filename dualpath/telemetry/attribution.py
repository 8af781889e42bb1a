"""Which GPUs a path's server uses, from its launch argv and environment, or as
`[paths.X] gpus` names them; and which paths share one.

Indices are the host's (NVML's / amdgpu's order). A visibility variable
(`CUDA_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`,
`GGML_VK_VISIBLE_DEVICES`) renumbers what the server sees, so the server's own device
numbers (llama.cpp `--device CUDA1`, `-mg 1`) are mapped back through it. llama.cpp uses
every visible GPU unless `--device` names some, `-ts` gives one a zero share, or
`-sm none` keeps the model on `-mg`; vLLM uses the first tensor × pipeline-parallel size of
them. None means "every GPU on the host" (nothing narrows it).
"""

from __future__ import annotations

import re

VISIBILITY = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
              "GGML_VK_VISIBLE_DEVICES")


def _flag(argv: list[str], *names: str) -> str | None:
    """The value of the last of `names` in argv (`-x V` or `--x=V`)."""
    val = None
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                val = argv[i + 1]
            elif a.startswith(n + "="):
                val = a.split("=", 1)[1]
    return val


def _visible(env: dict[str, str]) -> list[int] | None:
    for var in VISIBILITY:
        if var in env and env[var].strip():
            ids = [x.strip() for x in env[var].split(",") if x.strip()]
            if all(x.isdigit() for x in ids):
                return [int(x) for x in ids]
    return None


def gpus_from_launch(argv: list[str] | None, env: dict[str, str] | None,
                     host_count: int | None = None) -> list[int] | None:
    """The host GPU indices a launched server uses (None: all of the host's)."""
    argv, env = list(argv or []), dict(env or {})
    visible = _visible(env)
    local: list[int] | None = None            # in the server's own numbering
    dev = _flag(argv, "--device", "-dev")
    if dev and dev.lower() != "none":
        local = [int(m) for m in re.findall(r"[A-Za-z]+(\d+)", dev)]
    ts = _flag(argv, "--tensor-split", "-ts")
    if ts:
        shares = [float(x) for x in re.split(r"[,/]", ts) if x.strip()]
        local = [i for i in (local or range(len(shares))) if i < len(shares) and shares[i] > 0]
    if (_flag(argv, "--split-mode", "-sm") or "").lower() == "none":
        local = [int(_flag(argv, "--main-gpu", "-mg") or 0)]
    tp = _flag(argv, "--tensor-parallel-size", "-tp")
    if tp:
        n = int(tp) * int(_flag(argv, "--pipeline-parallel-size", "-pp") or 1)
        local = list(range(n))
    if local is None:
        return visible
    if visible is not None:
        return [visible[i] for i in local if i < len(visible)]
    return local


# what names a vendor's driver without doubt (Vulkan's names any vendor's card)
_VENDOR_ENV = {"CUDA_VISIBLE_DEVICES": "nvidia", "HIP_VISIBLE_DEVICES": "amd",
               "ROCR_VISIBLE_DEVICES": "amd"}
_VENDOR_DEVICE = {"cuda": "nvidia", "rocm": "amd", "hip": "amd"}


def path_vendor(sp) -> str | None:
    """Whose driver reads a path's GPUs: `[paths.X] gpu_vendor` if set, else what its launch
    says without doubt (a CUDA or ROCm device, a CUDA/HIP visibility variable); None when
    nothing does (a Vulkan build runs on any vendor's card)."""
    if getattr(sp, "gpu_vendor", None):
        return sp.gpu_vendor
    dev = _flag(list(sp.launch or []), "--device", "-dev") or ""
    named = {_VENDOR_DEVICE[m.lower()] for m in re.findall(r"([A-Za-z]+)\d+", dev)
             if m.lower() in _VENDOR_DEVICE}
    named |= {v for k, v in _VENDOR_ENV.items() if (sp.launch_env or {}).get(k, "").strip()}
    return named.pop() if len(named) == 1 else None


def path_gpus(sp) -> list[int] | None:
    """A path's GPUs: `[paths.X] gpus` if set, else read from its launch argv and env."""
    if sp.gpus is not None:
        return list(sp.gpus)
    if sp.launch:
        return gpus_from_launch(sp.launch, sp.launch_env)
    return None


def shared_gpus(paths: dict, host_of) -> dict[str, list[str]]:
    """Per path, the other paths on the same host that use one of its GPUs (None: all the
    host's GPUs, which overlaps any). `host_of(name)` is the host a path's server runs on;
    simulated paths each have a GPU of their own."""
    out: dict[str, list[str]] = {}
    names = [n for n, sp in paths.items() if sp.engine != "sim"]
    for a in names:
        for b in names:
            if a == b or host_of(a) != host_of(b):
                continue
            ga, gb = path_gpus(paths[a]), path_gpus(paths[b])
            if ga is None or gb is None or set(ga) & set(gb):
                out.setdefault(a, []).append(b)
    return out
