"""A word diff of two answers (the two paths' final answers of one ticker × draw), by
Python's `difflib`: its `SequenceMatcher` finds the longest matching runs, as `diff -w` does
line by line, here word by word.

Words are compared without the whitespace after them (a reflowed paragraph is no change) and
shown with the second answer's (keeping a line break either answer has), so the diff reads
as the answers do. The segments are plain text: the page
escapes them as it escapes every answer.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_WORD = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class WordDiff:
    """`segments`: (kind, text) in reading order, kind "same", "del" (only in the first
    answer) or "ins" (only in the second)."""

    segments: tuple[tuple[str, str], ...]
    same: int                     # words in both
    removed: int                  # words only in the first
    added: int                    # words only in the second

    @property
    def identical(self) -> bool:
        return not (self.removed or self.added)


def _spaced(a: str, b: str) -> str:
    """A word both answers have, with the second's whitespace after it, or the first's where
    only the first breaks the line there (a removed line that followed would otherwise run
    on)."""
    wa, wb = a[len(a.rstrip()):], b[len(b.rstrip()):]
    return b if "\n" in wb or "\n" not in wa else b.rstrip() + wa


def word_diff(a: str, b: str) -> WordDiff:
    """The words of `b` against those of `a`."""
    wa, wb = _WORD.findall(a), _WORD.findall(b)
    # autojunk off: in a long answer, frequent words ("the", "grade") would otherwise be
    # treated as junk and never matched, and the diff would show them removed and added
    sm = difflib.SequenceMatcher(None, [w.strip() for w in wa], [w.strip() for w in wb],
                                 autojunk=False)
    segs: list[tuple[str, str]] = []
    counts = {"same": 0, "del": 0, "ins": 0}

    def add(kind: str, words: list[str]) -> None:
        n = sum(1 for w in words if w.strip())
        if not words or not n and kind != "same":
            return
        counts[kind] += n
        if segs and segs[-1][0] == kind:
            segs[-1] = (kind, segs[-1][1] + "".join(words))
        else:
            segs.append((kind, "".join(words)))

    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            add("same", [_spaced(x, y) for x, y in zip(wa[i1:i2], wb[j1:j2])])
        else:
            add("del", wa[i1:i2])
            add("ins", wb[j1:j2])
    return WordDiff(tuple(segs), counts["same"], counts["del"], counts["ins"])
