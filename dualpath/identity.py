"""Who is really behind a path's endpoint.

llama-server accepts any `model` name in single-model mode and echoes it back, so a client
attached to the wrong port gets answers from the wrong server without an error. Before a run
dualpath reads what the server says about itself (`/props`, `/v1/models`, vLLM's `/version`)
and compares it with the path's expectation.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import httpx

from dualpath import binaries
from dualpath.config import ExpectedIdentity
from dualpath.errors import ServerUnreachable
from dualpath.records import ServerIdentity


async def _get_json(http: httpx.AsyncClient, url: str) -> Any | None:
    try:
        r = await http.get(url, timeout=10.0)
    except httpx.HTTPError as e:
        raise ServerUnreachable(f"{url}: {type(e).__name__}: {e}") from None
    if r.status_code in (404, 501):   # endpoint absent or disabled (e.g. /slots without --slots)
        return None
    if r.status_code != 200:
        raise ServerUnreachable(f"{url}: HTTP {r.status_code}: {r.text[:200]}")
    try:
        return r.json()
    except ValueError:
        raise ServerUnreachable(f"{url}: not JSON: {r.text[:200]}") from None


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The Authorization header a key-protected server needs on every endpoint."""
    return {"authorization": f"Bearer {api_key}"} if api_key else {}


async def read_identity(http: httpx.AsyncClient, base_url: str, dialect: str) -> ServerIdentity:
    """Read a server's identity from its own endpoints, in its dialect."""
    ident = ServerIdentity(base_url=base_url, engine=dialect)
    models = await _get_json(http, f"{base_url}/v1/models")
    first = (models.get("data") or [{}])[0] if isinstance(models, dict) else {}
    if first:
        ident.model = first.get("id")
        ident.raw["models"] = models
    if dialect == "llama.cpp":
        await _read_llama(http, base_url, ident)
    elif dialect == "vllm":
        ident.model_path = first.get("root")
        ident.n_ctx_per_slot = first.get("max_model_len")
        version = await _get_json(http, f"{base_url}/version")
        if version:
            ident.build = f"vllm-{version.get('version')}"
            ident.raw["version"] = version
        ident.speculative = vllm_speculative(await read_metrics(http, base_url))
    return ident


async def _read_llama(http: httpx.AsyncClient, base_url: str, ident: ServerIdentity) -> None:
    props = await _get_json(http, f"{base_url}/props") or {}
    ident.raw["props"] = props
    ident.slots = props.get("total_slots")
    ident.model_path = props.get("model_path")
    ident.model = props.get("model_alias") or ident.model
    ident.build = props.get("build_info")
    gen = props.get("default_generation_settings") or {}
    ident.n_ctx_per_slot = gen.get("n_ctx")
    params = gen.get("params") or {}
    ident.sampling = params
    slots = await _get_json(http, f"{base_url}/slots")   # 501 without --slots: None
    ident.raw["slots"] = slots
    ident.speculative = _speculative(params, slots)
    # build_info cannot tell two builds apart (b0-unknown): the bytes can, on this host
    url = urlsplit(base_url)
    pid = await asyncio.to_thread(binaries.listening_pid, url.hostname or "", url.port or 80)
    if pid is not None:
        ident.binary_sha256 = await asyncio.to_thread(binaries.binary_sha256, pid)
        ident.model_sha256 = await asyncio.to_thread(binaries.model_sha256, ident.model_path, pid)


def vllm_speculative(metrics: dict[str, float] | None) -> bool | None:
    """vLLM registers its vllm:spec_decode_* counters only when speculative decoding is on;
    None when /metrics shows no vllm: series at all (logging of stats off)."""
    if not metrics or not any(k.startswith("vllm:") for k in metrics):
        return None
    return any(k.startswith("vllm:spec_decode_") for k in metrics)


_IDENTITY_KEYS = ("model", "model_path", "slots", "n_ctx_per_slot", "build", "speculative",
                  "binary_sha256", "model_sha256")


def identity_drift(before: ServerIdentity, now: ServerIdentity) -> str | None:
    """What changed between two reads of one server's identity (None: the same server).
    What one read could not see (a hash, vLLM's counters: None) is no change."""
    unsure = {"binary_sha256", "model_sha256"} | ({"speculative"} if now.engine == "vllm" else set())
    diff = [f"{k} {getattr(before, k)!r} -> {getattr(now, k)!r}" for k in _IDENTITY_KEYS
            if getattr(before, k) != getattr(now, k)
            and not (k in unsure and None in (getattr(before, k), getattr(now, k)))]
    return "server identity changed during the run: " + ", ".join(diff) if diff else None


def _speculative(params: dict, slots: list | None) -> bool | None:
    """Speculative decoding (draft model or MTP) on? From /slots, else the default params."""
    if isinstance(slots, list) and slots and "speculative" in slots[0]:
        return bool(slots[0]["speculative"])
    if "speculative.types" in params:
        return params["speculative.types"] not in ("none", "", None)
    if "speculative.n_max" in params:
        return (params["speculative.n_max"] or 0) > 0
    return None


def build_matches(dialect: str, want: str, got: str | None) -> bool:
    """Whether a server's build read before any call satisfies the pin: vLLM's /version
    gives `vllm-<version>`, and a pinned whole system_fingerprint (`vllm-0.33.0-<hash>`)
    matches it by its version here, then response by response in full."""
    if dialect == "vllm" and got is not None and want.startswith(got + "-"):
        return True
    return want == got


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
    return out


async def read_metrics(http: httpx.AsyncClient, base_url: str) -> dict[str, float] | None:
    """Prometheus counters of /metrics as {name: value}; None when the endpoint is off."""
    try:
        r = await http.get(f"{base_url}/metrics", timeout=10.0)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        return None
    out: dict[str, float] = {}
    for line in r.text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            # vLLM labels every series ({model_name="..."}): one value per metric name
            name = name.strip().split("{", 1)[0]
            try:
                out[name] = out.get(name, 0.0) + float(value)
            except ValueError:
                continue
    return out


async def busy_slots(http: httpx.AsyncClient, base_url: str, dialect: str = "llama.cpp") -> int | None:
    """How many requests the server is processing now (None when it does not say):
    llama-server's /slots, vLLM's `vllm:num_requests_running`."""
    if dialect == "vllm":
        m = await read_metrics(http, base_url)
        running = (m or {}).get("vllm:num_requests_running")
        return None if running is None else int(running)
    try:
        slots = await _get_json(http, f"{base_url}/slots")
    except ServerUnreachable:
        return None
    if not isinstance(slots, list):
        return None
    return sum(bool(s.get("is_processing")) for s in slots)


async def effective_sampling(http: httpx.AsyncClient, base_url: str) -> dict | None:
    """The sampling parameters the server applied to its latest request: the /slots entry
    with the highest `id_task` (llama-server shows `params` only for a slot that ran one)."""
    try:
        slots = await _get_json(http, f"{base_url}/slots")
    except ServerUnreachable:
        return None
    ran = [s for s in slots or [] if isinstance(s, dict) and s.get("params")]
    if not ran:
        return None
    latest = max(ran, key=lambda s: s.get("id_task") if isinstance(s.get("id_task"), int) else -1)
    # the chain's order and the reasoning format too: compared and recorded
    return {k: latest["params"].get(k) for k in (*SAMPLING_KEYS, "samplers", "reasoning_format")
            if k in latest["params"]}


SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty",
                 "frequency_penalty", "repeat_penalty", "repeat_last_n")


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
