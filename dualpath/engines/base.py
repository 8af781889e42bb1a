"""`Engine`: what dualpath does differently per serving engine, behind one interface.

The defaults are a plain OpenAI-compatible server's (the `openai` engine): OpenAI's request
fields only, identity from /v1/models, nothing reported about slots or applied sampling.
An engine module subclasses it, overrides what its server does otherwise, and holds its
`EngineFacts` (`dualpath.engines.catalog`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from dualpath.engines.argv import Derived
from dualpath.engines.catalog import EngineFacts
from dualpath.engines.http import get_json
from dualpath.records import ServerIdentity

if TYPE_CHECKING:      # the config imports the registry: its types only, never at run time
    import httpx

    from dualpath.config_paths import ServingPath
    from dualpath.engines.proof import ServerReplies



class Engine(ABC):
    """One serving engine's behaviour; `facts` says what it is.

    Every engine answers the abstract methods itself (how its server is recognised, how
    thinking is switched, what its own endpoints report): an engine module that forgets one
    cannot be instantiated, so the registry fails on loading it."""

    facts: EngineFacts

    @property
    def name(self) -> str:
        return self.facts.name

    # ------------------------------------------------------------------ requests

    @abstractmethod
    def thinking_body(self, thinking: str) -> dict[str, Any]:
        """The request fields that switch the model's thinking on or off ({}: the
        server's chat template decides)."""

    def sampling_body(self, s: Any) -> dict[str, Any]:
        """The engine's own sampling fields for `Sampling` `s`, beyond OpenAI's."""
        return {}

    def request_sampling(self, s: Any, seed: int | None) -> dict[str, Any]:
        """The sampling fields of a request body (thinking included): OpenAI's, then the
        engine's own."""
        body: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p,
                                "presence_penalty": s.presence_penalty,
                                "frequency_penalty": 0.0, "max_tokens": s.max_tokens}
        body.update(self.sampling_body(s))
        body.update(self.thinking_body(s.thinking))
        if seed is not None:
            body["seed"] = seed
        return body

    def schema_body(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Constrained-output fields for a JSON schema (OpenAI's response_format)."""
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "answer", "schema": schema}}}

    def slot_body(self, id_slot: int) -> dict[str, Any]:
        """The fields that run a request on one slot (none: the engine has no slots)."""
        return {}

    def probe_body(self) -> dict[str, Any]:
        """The verify probe's extra fields: generate exactly max_tokens, uncached."""
        return {}

    def sent_sampling(self, s: Any) -> dict[str, Any] | None:
        """The sampling the server applies, known from what it is sent, for an engine that
        takes every field and reports none (None: not known this way)."""
        return None

    # ------------------------------------------------------------------ the server

    async def read_identity(self, http: httpx.AsyncClient, base_url: str) -> ServerIdentity:
        """What the server says about itself: /v1/models, then the engine's own endpoints."""
        ident = ServerIdentity(base_url=base_url, engine=self.name)
        models = await get_json(http, f"{base_url}/v1/models")
        first = (models.get("data") or [{}])[0] if isinstance(models, dict) else {}
        if first:
            ident.model = first.get("id")
            ident.raw["models"] = models
        await self.read_details(http, base_url, ident, first)
        return ident

    @abstractmethod
    async def read_details(self, http: httpx.AsyncClient, base_url: str,
                           ident: ServerIdentity, model: dict) -> None:
        """Fill in what the engine's own endpoints report (`model`: /v1/models' first)."""

    @abstractmethod
    async def recognise(self, replies: ServerReplies) -> str | None:
        """Evidence, in words ("its /props reports build_info ..."), that the server
        behind `replies` is this engine's; None when its replies do not show it
        (`dualpath.engines.proof`)."""

    async def busy_slots(self, http: httpx.AsyncClient, base_url: str) -> int | None:
        """Requests the server is processing now (None: it does not say)."""
        return None

    async def applied_sampling(self, http: httpx.AsyncClient, base_url: str,
                               s: Any) -> dict[str, Any] | None:
        """The sampling the server applied to its latest request, in llama-server's keys."""
        return self.sent_sampling(s)

    def build_matches(self, want: str, got: str | None) -> bool:
        """Whether a build read before any call satisfies the pinned build."""
        return want == got

    def fingerprint_pin(self, build: str | None,
                        fingerprint: str | None) -> tuple[str | None, str | None]:
        """(the system_fingerprint every response must carry, the build a fingerprint
        taken from the first response must be of): neither for an engine whose replies
        carry no build."""
        return None, None

    def counter_deltas(self, before: dict | None, after: dict | None,
                       slot_seconds_only: bool = False) -> dict[str, float]:
        """Its /metrics counters' growth by meaning (prompt_tokens is the prefill done);
        with `slot_seconds_only`, seconds only where they are a slot's busy seconds."""
        if not before or not after:
            return {}
        out = {meaning: after[k] - before[k] for meaning, k in self.facts.counters.items()
               if k in before and k in after}
        cached = out.pop("cached_tokens", None)
        if self.facts.prompt_counts_cached and cached is not None and "prompt_tokens" in out:
            out["prompt_tokens"] -= cached
        if slot_seconds_only and not self.facts.slot_seconds:
            out.pop("prompt_seconds", None)
            out.pop("predicted_seconds", None)
        return out

    # ------------------------------------------------------------------ launching

    def derive_launch(self, argv: list[str], env: dict[str, str],
                      base_url: str | None) -> tuple[dict[str, Derived], list[str]]:
        """The identity fields a launch argv determines, and contradictions within it."""
        return {}, []

    def launch_warnings(self, argv: list[str]) -> list[str]:
        """What a launch does that is allowed but probably not meant."""
        return []

    def pinned_advice(self, argv: list[str] | None, env: dict[str, str], pinned: bool,
                      seen: ServerIdentity | None = None) -> list[str]:
        """What a server does that costs a night whose units are pinned to its slots
        (`pinned`): started with the launch `argv`, or (argv None) running as `seen` read
        it from its process on this host."""
        return []

    def pinned_queue_depth(self, argv: list[str] | None, env: dict[str, str] | None) -> int:
        """Requests kept queued beyond the slots when units are pinned to them and the path
        sets none, for a server started with the launch `argv` (None: attached)."""
        return 0

    def thinking_caveat(self, name: str, path: ServingPath) -> str | None:
        """How a path keeps thinking apart where the engine does not (None: it does)."""
        return None


class SentSampling(Engine):
    """An engine that takes vLLM's sampling fields beyond OpenAI's (top_k, min_p,
    repetition_penalty) and reports none back: what it applies is what it was sent, in its
    own sampler order and penalty window (its facts)."""

    def sampling_body(self, s: Any) -> dict[str, Any]:
        return dict(top_k=s.top_k, min_p=s.min_p, repetition_penalty=1.0)

    def sent_sampling(self, s: Any) -> dict[str, Any] | None:
        return sent_as_applied(self.request_sampling(s, None), self.facts)


def sent_as_applied(body: dict[str, Any], facts: EngineFacts) -> dict[str, Any]:
    """The sampling an engine that takes every field it is sent (unsent ones from the
    model's generation_config, which dualpath never leaves unsent) applies to a request
    `body`, in the keys llama-server's /slots reports: the request is the record. Its order
    and window are the engine's own (`facts`), written as llama-server would name them."""
    out = {k: body[k] for k in ("temperature", "top_p", "top_k", "min_p", "presence_penalty",
                                "frequency_penalty") if k in body}
    if "repetition_penalty" in body:
        out["repeat_penalty"] = body["repetition_penalty"]
    if facts.sampler_order is not None:
        out["samplers"] = list(facts.sampler_order)
    if facts.penalty_window is not None:
        out["penalty_window"] = facts.penalty_window
    return out
