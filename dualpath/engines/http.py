"""Reading a server's own JSON endpoints and its Prometheus /metrics, for every engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dualpath.errors import ServerUnreachable

if TYPE_CHECKING:   # httpx (~30 ms to import) only when a server is read, not at every command's start
    import httpx


async def get_json(http: httpx.AsyncClient, url: str) -> Any | None:
    """The endpoint's JSON; None when it is absent or disabled (404, 501: /slots without
    --slots); `ServerUnreachable` for anything else that is not a JSON 200."""
    import httpx

    try:
        r = await http.get(url, timeout=10.0)
    except httpx.HTTPError as e:
        raise ServerUnreachable(f"{url}: {type(e).__name__}: {e}") from None
    if r.status_code in (404, 501):
        return None
    if r.status_code != 200:
        raise ServerUnreachable(f"{url}: HTTP {r.status_code}: {r.text[:200]}")
    try:
        return r.json()
    except ValueError:
        raise ServerUnreachable(f"{url}: not JSON: {r.text[:200]}") from None


async def read_metrics(http: httpx.AsyncClient, base_url: str) -> dict[str, float] | None:
    """Prometheus counters of /metrics as {name: value}; None when the endpoint is off."""
    import httpx

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
