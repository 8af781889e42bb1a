"""One home per serving engine.

- `catalog`: `EngineFacts`, each engine's fixed facts (what it reports, which sampling fields
  it takes, default queue depth, whether it pins slots, its counters and what they mean);
- `base`: `Engine`, the interface (request fields, identity reading, busy slots, applied
  sampling, launch-argv derivation and checks, counters, thinking), with a plain
  OpenAI-compatible server's behaviour as its defaults;
- one module per engine (`llama_cpp`, `vllm`, `sglang`, `openai`, `sim`), registered in
  `registry`, each declaring how its server is recognised (`proof`) and how it is launched
  (its argv read with `argv`).

Everything that differs by engine is asked of it here; no other module compares engine names.
"""

from __future__ import annotations

from dualpath.engines.base import Engine
from dualpath.engines.catalog import COUNTER_MEANINGS, EngineFacts
from dualpath.engines.registry import engine, names
from dualpath.engines.sim import FILE_PINS

__all__ = ["COUNTER_MEANINGS", "Engine", "EngineFacts", "cached_counter_names", "counter_names", "engine",
           "engine_for", "names", "overflow_markers", "reasoning_fields", "reports",
           "simulated_dialects"]


def engine_for(path) -> Engine:
    """The engine a `ServingPath` speaks on the wire (a simulated path: its dialect's)."""
    return engine(path.dialect)


def simulated_dialects() -> tuple[str, ...]:
    """The engines the simulated server can speak like."""
    return tuple(n for n in names() if engine(n).facts.simulated)


def reports(name: str, sim_dialect: str) -> frozenset[str]:
    """The `expect` pins a path of engine `name` can have confirmed."""
    if name == engine("sim").name:
        return engine(sim_dialect).facts.reports - FILE_PINS
    return engine(name).facts.reports


def counter_names(meaning: str) -> tuple[str, ...]:
    """Every registered engine's /metrics counter with this meaning (`COUNTER_MEANINGS`)."""
    return tuple(c for n in names() if (c := engine(n).facts.counters.get(meaning)))


def cached_counter_names() -> tuple[str, ...]:
    """The cache-hit counters of engines whose prompt counter counts the hits too (their
    prefill is the prompt counter less this one)."""
    return tuple(f.counters["cached_tokens"] for n in names()
                 if (f := engine(n).facts).prompt_counts_cached and "cached_tokens" in f.counters)


def reasoning_fields(name: str) -> tuple[str, ...]:
    """The message/delta fields that may hold the thinking on a path of engine `name`: its
    own first, then every other engine's (a generic OpenAI-compatible server, or a proxy in
    front of one of them, may write any)."""
    fields = [engine(name).facts.reasoning_field, *(engine(n).facts.reasoning_field
                                                    for n in names())]
    return tuple(dict.fromkeys(f for f in fields if f))


def overflow_markers() -> tuple[str, ...]:
    """Text by which any engine's error body says a prompt was longer than its context."""
    return tuple(m for n in names() for m in engine(n).facts.overflow_markers)
