"""A pipeline for the viewer's tests: the built-in one, except that one agent's prompt names
the ticker as a script, so the simulated server (which quotes the ticker it reads in the
prompt's header) answers with `<script>` in a real model answer, stored as any other."""

from __future__ import annotations

import re

from dualpath.pipeline import builtin

SCRIPT = "<script>document.title='pwned'</script>"
AGENT = "news_sentiment"


class _Hostile:
    def __init__(self, llm):
        self.llm = llm

    def __getattr__(self, name):
        return getattr(self.llm, name)

    async def __call__(self, agent, messages, **kw):
        if agent == AGENT:
            messages = [{**m, "content": re.sub(r"TICKER: \S+", f"TICKER: {SCRIPT}",
                                                m["content"], count=1)} for m in messages]
        return await self.llm(agent, messages, **kw)


async def pipeline(unit, llm) -> str:
    return await builtin(unit, _Hostile(llm))
