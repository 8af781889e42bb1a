"""Text wrapped under a hanging indent, for the terminal's tables, notes and headline.

No pandas or numpy here: `dualpath --help` and the CLI's modules import this at start.
"""

from __future__ import annotations

import re
import textwrap

_GLUE = "\u00a0"      # textwrap breaks at ASCII whitespace only: a no-break space holds


def hang(text: str, width: int, first: str = "", rest: str = "  ",
         keep: tuple[str, ...] = ()) -> list[str]:
    """``text`` wrapped at ``width`` under a hanging indent (``first`` before its first
    line, ``rest`` before the others), no word cut or broken at a hyphen; each substring of
    ``keep`` that fits a line stays on one (a closing '(… nights)' never leaves 'nights)'
    alone on the last line)."""
    room = width - max(len(first), len(rest))
    for part in keep:
        if part in text and len(part) <= room:
            text = text.replace(part, part.replace(" ", _GLUE))
    lines = textwrap.wrap(text, width, initial_indent=first, subsequent_indent=rest,
                          break_on_hyphens=False, break_long_words=False)
    return [ln.replace(_GLUE, " ") for ln in lines]


def parentheticals(text: str, longest: int = 60) -> tuple[str, ...]:
    """The parenthesised asides of ``text`` no longer than ``longest`` (to `hang` whole)."""
    return tuple(m for m in re.findall(r"\([^()]*\)", text) if len(m) <= longest)


class Detail(str):
    """A headline line that `dualpath metrics` prints only with --verbose (the report always
    shows it): a detail beside the answer, never the answer or its caveat. A plain `str`
    everywhere else, so every reader that joins or compares lines is unchanged."""


def like(line: str, parts: list[str]) -> list[str]:
    """``parts`` (a wrapped ``line``) marked as details where ``line`` was one."""
    return [Detail(p) for p in parts] if isinstance(line, Detail) else parts
