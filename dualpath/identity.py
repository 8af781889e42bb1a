"""Who is really behind a path's endpoint.

llama-server accepts any `model` name in single-model mode and echoes it back, so a client
attached to the wrong port gets answers from the wrong server without an error. Before a run
dualpath reads what the server says about itself (`/props`, `/v1/models`, vLLM's `/version`)
and compares it with the path's expectation.
"""

from __future__ import annotations

from typing import Any

import httpx

from dualpath.config import ExpectedIdentity
from dualpath.errors import DualpathError
from dualpath.records import ServerIdentity


class ServerUnreachable(DualpathError):
    """The server did not answer its identity endpoints."""


async def _get_json(http: httpx.AsyncClient, url: str) -> Any | None:
    try:
        r = await http.get(url, timeout=10.0)
    except httpx.HTTPError as e:
        raise ServerUnreachable(f"{url}: {type(e).__name__}: {e}") from None
    if r.status_code == 404:
        return None
    if r.status_code != 200:
        raise ServerUnreachable(f"{url}: HTTP {r.status_code}: {r.text[:200]}")
    try:
        return r.json()
    except ValueError:
        raise ServerUnreachable(f"{url}: not JSON: {r.text[:200]}") from None


async def read_identity(http: httpx.AsyncClient, base_url: str, engine: str) -> ServerIdentity:
    """Read a server's identity from its own endpoints."""
    ident = ServerIdentity(base_url=base_url, engine=engine)
    models = await _get_json(http, f"{base_url}/v1/models")
    if models and models.get("data"):
        ident.model = models["data"][0].get("id")
        ident.raw["models"] = models
    if engine in ("llama.cpp", "sim"):
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
        spec = gen.get("speculative")
        if spec is None:
            spec = (params.get("speculative.n_max") or 0) > 0
        ident.speculative = bool(spec)
    elif engine == "vllm":
        version = await _get_json(http, f"{base_url}/version")
        if version:
            ident.build = f"vllm-{version.get('version')}"
            ident.raw["version"] = version
    return ident


def differences(seen: ServerIdentity, expected: ExpectedIdentity) -> list[str]:
    """Each way the server differs from what the path expects (empty = it is the right one)."""
    out = []

    def check(name: str, want, got) -> None:
        if want is not None and want != got:
            out.append(f"{name}: expected {want!r}, server reports {got!r}")

    check("model", expected.model, seen.model)
    if expected.model_path_contains is not None and (
            not seen.model_path or expected.model_path_contains not in seen.model_path):
        out.append(f"model_path: expected to contain {expected.model_path_contains!r}, "
                   f"server reports {seen.model_path!r}")
    check("slots", expected.slots, seen.slots)
    check("n_ctx_per_slot", expected.n_ctx_per_slot, seen.n_ctx_per_slot)
    check("build", expected.build, seen.build)
    check("speculative", expected.speculative, seen.speculative)
    return out
