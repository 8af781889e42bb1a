"""Who is really behind a path's endpoint.

llama-server accepts any `model` name in single-model mode and echoes it back, so a client
attached to the wrong port gets answers from the wrong server without an error. Before a run
dualpath reads what the server says about itself (`/props`, `/v1/models`, vLLM's `/version`)
and compares it with the path's expectation.
"""

from __future__ import annotations

import httpx

from dualpath.config import ExpectedIdentity
from dualpath.engines import engine
from dualpath.engines.http import read_metrics  # noqa: F401  (re-exported)
from dualpath.engines.llama_cpp import SAMPLING_KEYS, effective_sampling  # noqa: F401
from dualpath.engines.vllm import speculative as vllm_speculative  # noqa: F401
from dualpath.records import ServerIdentity


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The Authorization header a key-protected server needs on every endpoint."""
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


async def read_identity(http: httpx.AsyncClient, base_url: str, dialect: str) -> ServerIdentity:
    """Read a server's identity from its own endpoints, in its dialect."""
    return await engine(dialect).read_identity(http, base_url)


_IDENTITY_KEYS = ("model", "model_path", "slots", "n_ctx_per_slot", "build", "speculative",
                  "binary_sha256", "model_sha256", "backend", "device")


def identity_drift(before: ServerIdentity, now: ServerIdentity) -> str | None:
    """What changed between two reads of one server's identity (None: the same server).
    What one read could not see (a hash, vLLM's counters: None) is no change."""
    unsure = engine(now.engine).facts.identity_unsure
    diff = [f"{k} {getattr(before, k)!r} -> {getattr(now, k)!r}" for k in _IDENTITY_KEYS
            if getattr(before, k) != getattr(now, k)
            and not (k in unsure and None in (getattr(before, k), getattr(now, k)))]
    return "server identity changed during the run: " + ", ".join(diff) if diff else None


def build_matches(dialect: str, want: str, got: str | None) -> bool:
    """Whether a server's build read before any call satisfies the pin (the engine's rule:
    vLLM's `vllm-<version>` matches a pinned whole system_fingerprint by its version)."""
    return engine(dialect).build_matches(want, got)


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f'"{v}"' if isinstance(v, str) else repr(v)


def differences(seen: ServerIdentity, expected: ExpectedIdentity) -> list[str]:
    """Each way the server differs from what the path expects (empty = it is the right one),
    with the value to write when the server is the one meant."""
    out = []

    def check(name: str, want, got) -> None:
        if want is not None and want != got:
            fix = f"; if this server is the one meant, write {name} = {_toml(got)}" \
                if got is not None else ""
            out.append(f"{name}: expected {want!r}, server reports {got!r}{fix}")

    check("model", expected.model, seen.model)
    if expected.model_path_contains is not None and (
            not seen.model_path or expected.model_path_contains not in seen.model_path):
        out.append(f"model_path: expected to contain {expected.model_path_contains!r}, "
                   f"server reports {seen.model_path!r}")
    check("slots", expected.slots, seen.slots)
    check("n_ctx_per_slot", expected.n_ctx_per_slot, seen.n_ctx_per_slot)
    if expected.build is not None and not build_matches(seen.engine, expected.build, seen.build):
        check("build", expected.build, seen.build)
    check("speculative", expected.speculative, seen.speculative)
    for name in ("binary_sha256", "model_sha256"):
        want, got = getattr(expected, name), getattr(seen, name)
        if want is not None and got is None:
            out.append(f"{name}: pinned, but the server's files cannot be read from here "
                       "(not on this host, or not readable): remove the pin or score here")
        else:
            check(name, want, got)
    out += _backend_differences(seen, expected)
    return out


def _backend_differences(seen: ServerIdentity, expected: ExpectedIdentity) -> list[str]:
    """The backend and device pins against what the server's process showed
    (`dualpath.llama_backend`)."""
    if expected.backend is None and expected.device_contains is None:
        return []
    if seen.backend is None:
        return ["backend: pinned, but the server's backend cannot be read from here (not on "
                "this host, or its process is not readable): remove the pin or score here"]
    out = []
    if expected.backend is not None and expected.backend.lower() != seen.backend.lower():
        out.append(f"backend: expected {expected.backend!r}, server reports {seen.backend!r} "
                   f"on {seen.device}; if this server is the one meant, write backend = "
                   f"{_toml(seen.backend)}")
    want = expected.device_contains
    if want is not None and want not in (seen.device or ""):
        out.append(f"device: expected to contain {want!r}, server reports "
                   f"{seen.device!r}")
    return out


async def busy_slots(http: httpx.AsyncClient, base_url: str, dialect: str) -> int | None:
    """How many requests the server is processing now (None when it does not say)."""
    return await engine(dialect).busy_slots(http, base_url)


def sampling_differences(a: dict, b: dict, n_ctx: tuple[int | None, int | None] = (None, None)) -> list[str]:
    """Differences between two paths' effective sampling (float32 noise ignored)."""
    out = []
    for k in SAMPLING_KEYS:
        va, vb = a.get(k), b.get(k)
        if va is None or vb is None:
            continue
        if k == "repeat_last_n":
            # -1 means "whole context"; a server may report it resolved to its n_ctx
            whole = lambda v, n: v == -1 or (n is not None and v >= n)
            if whole(va, n_ctx[0]) and whole(vb, n_ctx[1]):
                continue
        if abs(float(va) - float(vb)) > 1e-6 * max(1.0, abs(float(va))):
            out.append(f"{k}: {va} vs {vb}")
    return out
