"""Thinking kept apart from the answer, in every shape the engines write it.

Where the thinking arrives (the shapes the simulated servers write, `dualpath.sim.dialect`):

- in its own field: llama-server's `reasoning_content` (`reasoning_format = "deepseek"`,
  which also knows a template that opened the block in the prompt: a reply cut while thinking
  is all `reasoning_content`, its answer empty), vLLM's `reasoning` with `--reasoning-parser`
  and thinking on (vllm/parser/qwen3.py, 0.33.0: the parser starts in its REASONING state,
  drops `<think>`, and `</think>` moves it to the answer);
- inline, vLLM without a reasoning parser: `<think>T</think>A` (Qwen3's templates), or
  `T</think>A` (Qwen3.5/3.6's templates open `<think>` in the prompt), and cut at max_tokens
  `<think>T`, or `T` with no tag at all: with thinking on, a cut reply without a tag is all
  thinking;
- inline with a parser and thinking off, from a model that thinks anyway: the qwen3 parser
  starts in its CONTENT state (qwen3_config(thinking=False)), keeps `<think>` as text and drops
  `</think>` (its CONTENT + THINK_END transition), so a streamed reply reads
  `<think>\\nT\\n\\n\\nA`: the three newlines are where `</think>` was (the template writes
  `\\n</think>\\n\\n`); a whole reply keeps both tags (`extract_reasoning` returns the output
  as is when thinking is off).
"""

from __future__ import annotations

from dualpath.records import RUNAWAY, CallRecord

_OPEN, _CLOSE = "<think>", "</think>"
_DROPPED_CLOSE = "\n\n\n"    # `\n</think>\n\n` with the tag dropped by vLLM's qwen3 parser


def split_thinking(text: str, *, thinking_on: bool = False,
                   finish_reason: str | None = None) -> tuple[str, str]:
    """(thinking, answer) of a text that may carry its thinking inline (see the module's
    shapes). `thinking_on`: the request asked the template to think; `finish_reason`: how the
    reply ended (`length`: cut at max_tokens)."""
    cut = finish_reason == RUNAWAY
    close = text.find(_CLOSE)
    if close >= 0:
        head, answer = text[:close], text[close + len(_CLOSE):]
        opened = head.find(_OPEN)
        before, thinking = ((head[:opened], head[opened + len(_OPEN):]) if opened >= 0
                            else ("", head))
        return thinking.strip(), (before + answer.lstrip()) if before.strip() else answer.lstrip()
    opened = text.find(_OPEN)
    if opened >= 0 and not text[:opened].strip():
        rest = text[opened + len(_OPEN):]
        gap = rest.find(_DROPPED_CLOSE, len(rest) - len(rest.lstrip("\n")))
        if gap >= 0 and not (thinking_on and cut):
            return rest[:gap].strip(), rest[gap:].lstrip()
        if not thinking_on and finish_reason == "stop":
            # thinking off, ended normally, no trace of the close: the answer is in there,
            # with thinking it cannot be told from; kept whole rather than lost
            return "", rest.lstrip()
        return rest.strip(), ""     # cut while thinking: no answer
    if thinking_on and cut and text.strip():
        # the template opened the block in the prompt and the reply never closed it
        return text.strip(), ""
    return "", text


def keep_thinking_apart(rec: CallRecord, thinking: str = "off") -> None:
    """Move inline thinking out of the answer and count the thinking's tokens: as the server
    reported them, else estimated from its share of the generated characters. `thinking`: the
    request's setting (`on` | `off`); where the thinking came apart in its own field, text
    without a tag is the answer."""
    inline, answer = split_thinking(rec.output_text,
                                    thinking_on=thinking == "on" and not rec.reasoning_text,
                                    finish_reason=rec.finish_reason)
    if inline:
        rec.output_text = answer
        rec.reasoning_text = f"{rec.reasoning_text}\n{inline}" if rec.reasoning_text else inline
    if rec.reasoning_text and rec.reasoning_tokens is None and rec.completion_tokens:
        chars = len(rec.reasoning_text) + len(rec.output_text)
        rec.reasoning_tokens = round(rec.completion_tokens * len(rec.reasoning_text) / chars)
        rec.reasoning_tokens_basis = "chars"
