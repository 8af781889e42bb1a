"""The scoring pipeline: the public interface and the built-in 17-call multi-agent pipeline.

A pipeline is an async function `pipeline(unit: UnitInput, llm: LLM) -> str`. It makes its LLM
calls only through `llm` (so the harness records, times, seeds and schedules every one of
them) and returns the answer text that carries the final grade; the harness parses that text
with the strict parser in `dualpath.grades`. A user pipeline is configured as
`[pipeline] name = "package.module:function"`.

The built-in pipeline is a DAG modelled on the user's pipeline and on TradingAgents' roles:

    data_summary
      -> technical | fundamental | news_sentiment | sector_macro     (parallel)
      -> bull_1 | bear_1  -> bull_2 | bear_2                          (two debate rounds)
      -> research_manager -> trader
      -> risk_aggressive | risk_neutral | risk_conservative           (parallel)
      -> risk_judge -> portfolio_manager (final grade) -> consistency_check

17 calls, 10 sequential stages. Every prompt opens with the same system message and the unit's
ticker context (header, prices, documents), then what differs (earlier outputs, the role and
its task), so a server's prompt cache can serve the shared part (see `ticker_context`).
"""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Awaitable, Callable, Protocol

from dualpath.errors import ConfigError
from dualpath.grades import GRADE_INSTRUCTION, GRADE_SCHEMA


@dataclass(frozen=True, slots=True)
class UnitInput:
    """What one unit (ticker x draw on one night) is scored from."""

    ticker: str
    draw: int
    night: date
    closes: tuple[tuple[date, float], ...]   # (trading day, adjusted close), oldest first, <= night
    documents: str | None = None


class LLM(Protocol):
    """The call interface the harness hands a pipeline."""

    json_grades: bool
    """True when the path constrains the final-grade call to JSON (`grade_format = "json"`)."""

    async def __call__(self, agent: str, messages: list[dict[str, str]], *,
                       json_schema: dict[str, Any] | None = None) -> str:
        """Make one call as `agent`; returns the answer text or raises `CallFailed`. The
        answer only: a thinking model's thinking is kept apart by the harness, so quoting
        an answer into a later prompt never quotes the thinking."""
        ...


Pipeline = Callable[[UnitInput, LLM], Awaitable[str]]

AGENTS = ("data_summary", "technical", "fundamental", "news_sentiment", "sector_macro",
          "bull_1", "bear_1", "bull_2", "bear_2", "research_manager", "trader",
          "risk_aggressive", "risk_neutral", "risk_conservative", "risk_judge",
          "portfolio_manager", "consistency_check")

_ROLES = {
    "data_summary": "You summarise a stock's recent price history for an investment committee.",
    "technical": "You are a technical analyst: trend, momentum, volatility, support/resistance.",
    "fundamental": "You are a fundamental analyst: valuation, quality and earnings trajectory.",
    "news_sentiment": "You are a news and sentiment analyst.",
    "sector_macro": "You are a sector and macro strategist.",
    "bull": "You are the bull researcher: make the strongest evidence-based case to buy.",
    "bear": "You are the bear researcher: make the strongest evidence-based case to sell.",
    "research_manager": "You are the research manager: weigh the debate and state a view.",
    "trader": "You are the trader: turn the research view into a concrete position plan.",
    "risk_aggressive": "You are the aggressive risk analyst: argue for taking more risk.",
    "risk_neutral": "You are the neutral risk analyst: balance risk and reward.",
    "risk_conservative": "You are the conservative risk analyst: argue for protecting capital.",
    "risk_judge": "You are the risk judge: settle the risk debate into a sized decision.",
    "portfolio_manager": "You are the portfolio manager and give the final grade on the scale "
                         "1 STRONG SELL, 2 SELL, 3 HOLD, 4 BUY, 5 STRONG BUY.",
    "consistency_check": "You check that a final grade follows from its own rationale.",
}


COMMITTEE = ("You are one member of an investment committee scoring a stock. The stock's data "
             "comes first; your role and task follow it.")


def header(unit: UnitInput) -> str:
    """The first line of every prompt; it names the ticker and the night."""
    return f"TICKER: {unit.ticker} | AS OF: {unit.night.isoformat()}"


def price_table(unit: UnitInput) -> str:
    """The adjusted closes as compact text, oldest first."""
    return "\n".join(f"{d.isoformat()},{c:.2f}" for d, c in unit.closes)


def ticker_context(unit: UnitInput) -> str:
    """What every call of a unit shares, byte for byte: header, prices, documents.

    It opens every prompt (after one system message common to all roles), so a server's
    prompt cache can reuse it across the unit's 17 calls; what differs comes after it."""
    parts = [header(unit), f"Adjusted closes (date,close):\n{price_table(unit)}"]
    if unit.documents:
        parts.append(f"Documents:\n{unit.documents}")
    return "\n\n".join(parts)


def _msgs(role: str, context: str, *sections: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": COMMITTEE},
            {"role": "user", "content": "\n\n".join((context, *sections,
                                                      f"Your role: {_ROLES[role]}"))}]


def _reports(named: dict[str, str]) -> str:
    return "\n\n".join(f"## {k}\n{v}" for k, v in named.items())


async def builtin(unit: UnitInput, llm: LLM) -> str:
    """The built-in 17-call pipeline (see the module docstring); returns the PM's answer."""
    ctx = ticker_context(unit)
    summary = await llm("data_summary", _msgs("data_summary", ctx,
                        "Summarise the trend, volatility and notable moves in 5 bullet points."))
    base = f"Data summary:\n{summary}"
    desks = ("technical", "fundamental", "news_sentiment", "sector_macro")
    outs = await asyncio.gather(*(llm(d, _msgs(d, ctx, base, "Write your desk's report."))
                                  for d in desks))
    reports = _reports(dict(zip(desks, outs)))
    bull, bear = await asyncio.gather(
        llm("bull_1", _msgs("bull", ctx, reports, "Round 1: open the bull case.")),
        llm("bear_1", _msgs("bear", ctx, reports, "Round 1: open the bear case.")))
    bull2, bear2 = await asyncio.gather(
        llm("bull_2", _msgs("bull", ctx, reports, f"Bear said:\n{bear}", "Round 2: rebut.")),
        llm("bear_2", _msgs("bear", ctx, reports, f"Bull said:\n{bull}", "Round 2: rebut.")))
    debate = _reports({"bull_1": bull, "bear_1": bear, "bull_2": bull2, "bear_2": bear2})
    view = await llm("research_manager", _msgs("research_manager", ctx, reports, debate,
                                               "State the investment view and its reasons."))
    plan = await llm("trader", _msgs("trader", ctx, view, "Propose the position plan."))
    risk_roles = ("risk_aggressive", "risk_neutral", "risk_conservative")
    risks = await asyncio.gather(*(llm(r, _msgs(r, ctx, view, plan, "Assess the plan's risk."))
                                   for r in risk_roles))
    judged = await llm("risk_judge", _msgs("risk_judge", ctx, plan,
                                           _reports(dict(zip(risk_roles, risks))),
                                           "Decide the risk-adjusted plan."))
    final = await _final_grade(ctx, llm, view, judged)
    await llm("consistency_check", _msgs("consistency_check", ctx, f"Answer:\n{final}",
                                         "Reply CONSISTENT or INCONSISTENT with one reason."))
    return final


async def _final_grade(ctx: str, llm: LLM, view: str, judged: str) -> str:
    # The grade instruction must end the prompt (a base model continues from it), so the
    # role line goes before it here.
    role = f"Your role: {_ROLES['portfolio_manager']}"
    msgs = [{"role": "system", "content": COMMITTEE}]
    if llm.json_grades:
        ask = 'Answer with one JSON object: {"grade": <1-5>}.'
        msgs.append({"role": "user", "content": "\n\n".join((ctx, view, judged, role, ask))})
        return await llm("portfolio_manager", msgs, json_schema=GRADE_SCHEMA)
    msgs.append({"role": "user", "content": "\n\n".join(
        (ctx, view, judged, role, "Give the rationale in three sentences.", GRADE_INSTRUCTION))})
    return await llm("portfolio_manager", msgs)


def load_pipeline(name: str) -> Pipeline:
    """'builtin' or 'package.module:function' -> the pipeline function."""
    if name == "builtin":
        return builtin
    module, _, attr = name.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except ImportError as e:
        raise ConfigError(f"pipeline.name = {name!r}: cannot import module {module!r} ({e}); "
                          "make sure it is installed or on PYTHONPATH") from None
    except AttributeError:
        raise ConfigError(f"pipeline.name = {name!r}: module {module!r} has no {attr!r}") from None
    if not asyncio.iscoroutinefunction(fn):
        raise ConfigError(f"pipeline.name = {name!r}: must be an async function "
                          "`async def f(unit: UnitInput, llm: LLM) -> str`")
    return fn


def read_documents(folder: Path | None, ticker: str) -> str | None:
    """The optional user document for a ticker (`TICKER.md` in the documents folder)."""
    if folder is None:
        return None
    f = folder / f"{ticker}.md"
    return f.read_text(encoding="utf-8") if f.exists() else None
