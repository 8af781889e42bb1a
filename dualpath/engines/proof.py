"""Which engine a server is, from its own replies.

A server accepts any `engine = ...` the config gives its path: llama-server, vLLM and SGLang
all answer OpenAI's chat requests, so a path pointed at the wrong one scores a whole night
recorded as the wrong engine (its request fields half ignored, its counters unread). Each
engine says how its server is known (`Engine.recognise`) from what any of them serves:
`/v1/models` (each writes its own `owned_by`), `/metrics` (each prefixes its names), and the
engine's own endpoints (llama-server's /props, vLLM's /version, SGLang's /server_info).
`ServerReplies` reads each endpoint once, when an engine first asks for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dualpath.engines.http import get_json, read_metrics
from dualpath.engines.registry import engine, names
from dualpath.errors import ServerUnreachable

if TYPE_CHECKING:
    import httpx

_MISSING = object()


class ServerReplies:
    """A server's answers at the endpoints engines are told apart by, each read once (an
    endpoint that is absent, refused or not JSON reads as None)."""

    def __init__(self, http: httpx.AsyncClient, base_url: str):
        self.http, self.base_url = http, base_url.rstrip("/")
        self._json: dict[str, Any] = {}
        self._metrics: Any = _MISSING

    async def json(self, endpoint: str) -> Any | None:
        """The JSON the server answers at `endpoint` ("/props"), or None."""
        if endpoint not in self._json:
            try:
                self._json[endpoint] = await get_json(self.http, self.base_url + endpoint)
            except ServerUnreachable:      # 401/403/500 at an endpoint it lacks: not proof
                self._json[endpoint] = None
        return self._json[endpoint]

    async def metric_names(self) -> frozenset[str]:
        """The series names of its /metrics (empty: off or absent)."""
        if self._metrics is _MISSING:
            self._metrics = frozenset(await read_metrics(self.http, self.base_url) or ())
        return self._metrics

    async def owned_by(self) -> str | None:
        """`owned_by` of /v1/models' first model: each engine writes its own name there."""
        models = await self.json("/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
        owner = first.get("owned_by")
        return owner if isinstance(owner, str) else None

    async def named(self, owner: str, prefix: str) -> str | None:
        """Evidence that the server is the engine writing `owned_by = owner` in /v1/models
        and `prefix` before its /metrics names (None: neither)."""
        if await self.owned_by() == owner:
            return f'its /v1/models says owned_by "{owner}"'
        if any(n.startswith(prefix) for n in await self.metric_names()):
            return f"its /metrics names {prefix}* series"
        return None


async def answers_as(replies: ServerReplies, skip: str | None = None
                     ) -> tuple[str, str] | None:
    """(engine name, evidence) of the first registered engine that knows the server as its
    own, leaving out `skip` and engines that take any server."""
    for name in names():
        eng = engine(name)
        if name == skip or eng.facts.any_server:
            continue
        if (why := await eng.recognise(replies)) is not None:
            return name, why
    return None


async def engine_mismatch(http: httpx.AsyncClient, base_url: str, configured: str,
                          replies: ServerReplies | None = None) -> str | None:
    """Why the server at `base_url` is not of the path's engine `configured`, in one line
    naming both and the fix (None: it is, by its own replies, or it answered nothing to
    judge by); the caller names the path. `replies`: the server's, if already read."""
    replies = replies or ServerReplies(http, base_url)
    own = engine(configured)
    if await own.recognise(replies) is not None:
        return None
    found = await answers_as(replies, skip=configured)
    if found is None and await replies.json("/v1/models") is None:
        return None     # nothing answered to judge by: unreachable is said where it is read
    head = f"config says engine {configured}, "
    if found is not None:
        other, why = found
        return head + (f"the server answers as {other} ({why}); fix engine = \"{other}\" "
                       "or the url")
    generic = [n for n in names() if engine(n).facts.any_server]
    fix = f'engine = "{generic[0]}" (any OpenAI-compatible server)' if generic else "engine"
    return head + (f"the server does not answer as {own.facts.label} (no "
                   f"{own.facts.recognised_by}); fix {fix} or the url")
