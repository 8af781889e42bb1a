"""A plain OpenAI-compatible endpoint (a hosted API, a proxy): OpenAI's request fields only,
its model from /v1/models, nothing else reported. `Engine`'s defaults are its behaviour."""

from __future__ import annotations

from dualpath.engines.base import Engine
from dualpath.engines.catalog import EngineFacts

FACTS = EngineFacts(name="openai", label="the OpenAI-compatible server",
                    reports=frozenset({"model"}),
                    overflow_markers=("context length exceeded", "context_length_exceeded"))


class OpenAI(Engine):
    facts = FACTS


ENGINE = OpenAI()
