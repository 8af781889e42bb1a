"""Each serving engine's fixed facts, as one record per engine (`EngineFacts`).

A leaf: it imports nothing of dualpath, so the config, the warehouse's counter SQL and the
sweep read an engine's facts without its client code. Each engine module
(`dualpath.engines.llama_cpp`, ...) holds its own record, written from that engine's source.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# What a counter means, the keys of `EngineFacts.counters`: prompt tokens the server
# prefilled (or, where `prompt_counts_cached`, every prompt token), tokens it generated, the
# seconds it spent on each, and the prompt tokens it took from its cache.
COUNTER_MEANINGS = {
    "prompt_tokens": "prompt tokens processed (prefill)",
    "predicted_tokens": "tokens generated (decode)",
    "prompt_seconds": "seconds spent on prefill, summed over requests or slots",
    "predicted_seconds": "seconds spent on decode, summed over requests or slots",
    "cached_tokens": "prompt tokens served from the prefix cache",
}


@dataclass(frozen=True)
class EngineFacts:
    """What one engine is and says, independent of any path's settings."""

    name: str = field(metadata={"doc": "The config's `engine` value."})
    label: str = field(metadata={"doc": "The server's name in messages (llama-server)."})
    reports: frozenset[str] = field(metadata={"doc": "The `expect` pins its endpoints can "
                                              "confirm."})
    cannot_report: dict[str, str] = field(default_factory=dict, metadata={
        "doc": "Why a pin it cannot confirm is refused, by pin."})
    sampling_fields: tuple[str, ...] = field(default=(), metadata={
        "doc": "Request fields beyond OpenAI's that dualpath sends to make sampling alike."})
    sampler_order: tuple[str, ...] | None = field(default=None, metadata={
        "doc": "The order it applies samplers in, in llama-server's names (None: unknown)."})
    penalty_window: str | None = field(default=None, metadata={
        "doc": "Which tokens presence/frequency penalties count: 'output', or 'prompt and "
               "output' (None: unknown)."})
    reasoning_field: str | None = field(default=None, metadata={
        "doc": "The message/delta field that holds the thinking, when returned apart."})
    default_queue_depth: int = field(default=0, metadata={
        "doc": "Requests kept queued beyond the slots when the path does not say."})
    pins_slots: bool = field(default=False, metadata={
        "doc": "Whether prefix affinity pins each unit to one server slot (`id_slot`)."})
    reports_applied_sampling: bool = field(default=False, metadata={
        "doc": "Whether the server reports the sampling it applied (llama-server /slots)."})
    counters: dict[str, str] = field(default_factory=dict, metadata={
        "doc": "Its /metrics counter for each of `COUNTER_MEANINGS`."})
    prompt_counts_cached: bool = field(default=False, metadata={
        "doc": "Whether its prompt-token counter counts cache hits too (prefill = the rest)."})
    slot_seconds: bool = field(default=False, metadata={
        "doc": "Whether its seconds counters are busy seconds of a slot (tokens / them = one "
               "slot's speed), not per-request times that overlap under batching."})
    overflow_markers: tuple[str, ...] = field(default=(), metadata={
        "doc": "Text of its error body for a prompt longer than the context."})
    identity_unsure: frozenset[str] = field(default=frozenset(), metadata={
        "doc": "Identity fields one read may miss (None) without the server having changed."})
    simulated: bool = field(default=False, metadata={
        "doc": "Whether the simulated server speaks this engine's dialect."})
    applied_sampling_off: tuple[str, str] = field(default=("", ""), metadata={
        "doc": "Where it reports the sampling it applied is off, and how to turn it on "
               "(for an engine that `reports_applied_sampling`)."})
    metrics_fix: str = field(default="", metadata={
        "doc": "How its server is made to serve /metrics counters, for a message that "
               "finds none (empty: it has none to turn on)."})
    context_fix: str = field(default="use a server or model with a longer context", metadata={
        "doc": "How its server's context per request is raised, for a message that finds "
               "it too short."})
    recognised_by: str = field(default="", metadata={
        "doc": "What its server answers that no other engine's does, for a message saying "
               "a server lacks it (`Engine.recognise` reads it)."})
    any_server: bool = field(default=False, metadata={
        "doc": "Whether any OpenAI-compatible server is one (a hosted API, a proxy): "
               "a path of this engine is never refused for what its server answers as."})
