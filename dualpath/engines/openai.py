"""A plain OpenAI-compatible endpoint (a hosted API, a proxy): OpenAI's request fields only,
its model from /v1/models, nothing else reported. `Engine`'s defaults are its behaviour."""

from __future__ import annotations

from typing import Any

from dualpath.engines.base import Engine
from dualpath.engines.catalog import EngineFacts

FACTS = EngineFacts(name="openai", label="the OpenAI-compatible server",
                    reports=frozenset({"model"}),
                    overflow_markers=("context length exceeded", "context_length_exceeded"),
                    recognised_by="/v1/models", any_server=True)


class OpenAI(Engine):
    facts = FACTS

    def thinking_body(self, thinking: str) -> dict[str, Any]:
        return {}          # OpenAI's chat API has no such field: the server decides

    async def read_details(self, http, base_url, ident, model) -> None:
        """Nothing beyond /v1/models is OpenAI's."""

    async def recognise(self, replies) -> str | None:
        return "any server answering OpenAI's API is one"


ENGINE = OpenAI()
