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


# A final answer that tries to close the diff's <pre> and its <del>/<ins> and open a script:
# planted by `plant_final` in a copy of a scored warehouse (the pipeline above leaves final
# answers alone, so the other pages' counts hold).
FINAL = ("FINAL GRADE: 1 (SELL)\n</ins></del></pre><script>document.title='pwned'</script>"
         "<img src=x onerror=alert(1)> & so on")


def plant_final(con, night, ticker: str, path: str, draw: int, text: str = FINAL) -> None:
    """Store `text` as the final answer of that unit's final attempt."""
    con.execute("INSERT INTO texts SELECT hash(?), ?", [text, text])
    con.execute("""UPDATE units SET final_hash = hash(?)
                   WHERE night = ? AND ticker = ? AND path = ? AND draw = ? AND unit_attempt =
                         (SELECT max(unit_attempt) FROM units WHERE night = ? AND ticker = ?
                          AND path = ? AND draw = ?)""",
                [text, night, ticker, path, draw, night, ticker, path, draw])
