"""The strict final-grade parser.

The grade is on a 5-level ordinal scale: 1 strong sell, 2 sell, 3 hold, 4 buy, 5 strong buy.
Documented answer formats, and only these, are accepted:

1. Text: exactly one line of the form (ASCII letters, any case, optionally wrapped in
   ``**``)::

       FINAL GRADE: 4
       FINAL GRADE: 4 (BUY)
       FINAL GRADE: BUY

   When both a number and a label are given they must agree.
2. JSON (constrained output): the whole answer is one JSON object with an integer ``grade``
   between 1 and 5, e.g. ``{"grade": 4, "rationale": "..."}``, no key given twice.

Anything else is a parse failure carrying the reason; a grade is never guessed or defaulted,
because a defaulted "3" would look like a real hold and bias every statistic toward the middle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

LABELS = {1: "STRONG SELL", 2: "SELL", 3: "HOLD", 4: "BUY", 5: "STRONG BUY"}
GRADE_BY_LABEL = {v: k for k, v in LABELS.items()}
SCALE = (1, 2, 3, 4, 5)
KEYWORD = "FINAL GRADE"
# The longest grade a line may carry after the keyword ("5 (STRONG BUY)" is 14): anything
# longer is unreadable without being looked at further.
MAX_BODY = 100
# Answers longer than this are parsed off the event loop (`parse_grade_async`): at ~25 MB/s
# for JSON, a few ms of work at most stays on it.
OFF_LOOP_CHARS = 100_000

# The parser is regex-free on purpose: `^\s*...FINAL GRADE\s*:\s*(?P<body>.*?)\s*...$`
# backtracked cubically (a grade line followed by 2,000 spaces and an 'x' took 13 s and
# stalled both paths' event loop), and re.IGNORECASE folds non-ASCII letters into ASCII ones
# (the long s in 'ſELL' matched 'SELL', the dotted 'İ' in 'FİNAL' matched 'I'). Each line is
# examined by a fixed number of linear str methods (strip, startswith, slicing, isascii,
# upper, split), so the work is linear in the answer; `work` counts the characters they
# are given, which is how the tests show it.


@dataclass(frozen=True, slots=True)
class ParsedGrade:
    """A grade, or why there is none."""

    grade: int | None
    failure: str | None = None


def _shown(value: object, limit: int = 60) -> str:
    """A piece of the answer for a failure message: repr, cut (an answer can be megabytes)."""
    r = repr(value[:limit] if isinstance(value, str) else value)
    return r if len(r) <= limit else r[:limit - 3] + "..."


class _Work:
    """Characters handed to the str methods (and to the JSON decoder): the parser's work."""

    __slots__ = ("chars",)

    def __init__(self) -> None:
        self.chars = 0

    def __call__(self, s: str) -> str:
        self.chars += len(s)
        return s


class _Duplicate(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Duplicate(twice)
    return obj


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _parse_json(text: str, work: _Work) -> ParsedGrade:
    try:
        # the standard decoder, strict: a key given twice is refused at any depth (which of
        # two grades would count?), NaN/Infinity are not JSON
        obj = json.loads(work(text), object_pairs_hook=_no_duplicates,
                         parse_constant=_refuse_constant)
    except _Duplicate as e:
        return ParsedGrade(None, f"JSON answer gives the key {_shown(str(e))} twice; each "
                           "key once")
    except (ValueError, RecursionError) as e:      # JSONDecodeError, a 5,000-digit number
        return ParsedGrade(None, "answer starts like JSON but is not valid JSON: "
                           f"{_shown(str(e), 120)[1:-1]}")
    if not isinstance(obj, dict) or "grade" not in obj:
        return ParsedGrade(None, "JSON answer has no 'grade' key")
    g = obj["grade"]
    if isinstance(g, bool) or not isinstance(g, int) or g not in SCALE:
        return ParsedGrade(None, f"JSON 'grade' must be an integer 1-5, got {_shown(g)}")
    return ParsedGrade(g)


def _after(s: str, prefix: str, work: _Work) -> str | None:
    """`s` without `prefix` and the whitespace after it, or None when it does not start so
    (ASCII case-insensitive: no Unicode case folding)."""
    head = s[:len(prefix)]
    if not (head.isascii() and head.upper() == prefix):
        return None
    return work(s[len(prefix):]).lstrip()


def _line_body(line: str, work: _Work) -> str | None:
    """What follows 'FINAL GRADE:' on a grade line (its ** and whitespace off), else None."""
    s = work(line).strip()
    if s.startswith("**"):
        s = work(s[2:]).lstrip()
    s = _after(s, KEYWORD, work)
    if s is None:
        return None
    s = _after(s, ":", work)
    if s is None:
        return None
    if s.startswith("**"):
        s = work(s[2:]).lstrip()
    s = s.rstrip()
    if s.endswith("**"):
        s = work(s[:-2]).rstrip()
    return s


def _is_label(text: str) -> bool:
    return text.isascii() and text.replace(" ", "").isalpha()


def _label(text: str) -> int | None:
    return GRADE_BY_LABEL.get(" ".join(text.upper().split()))


def _grade_of(body: str) -> ParsedGrade:
    """'4', '4 (BUY)' or 'BUY' (ASCII letters only), or why not."""
    unreadable = ParsedGrade(None, f"unreadable grade {_shown(body)}; use 1-5 or a scale label")
    if len(body) > MAX_BODY:
        return unreadable
    if body[:1] in ("1", "2", "3", "4", "5"):
        grade, rest = int(body[0]), body[1:].lstrip()
        if not rest:
            return ParsedGrade(grade)
        if not (rest.startswith("(") and rest.endswith(")") and _is_label(rest[1:-1])
                and rest[1:-1].strip()):
            return unreadable
        if _label(rest[1:-1]) != grade:
            return ParsedGrade(None, f"grade {grade} contradicts label {_shown(rest[1:-1])}")
        return ParsedGrade(grade)
    if not _is_label(body):
        return unreadable
    grade = _label(body)
    if grade is None:
        return ParsedGrade(None, f"unknown label {_shown(body)}; use one of "
                           f"{list(LABELS.values())}")
    return ParsedGrade(grade)


def parse_grade(text: str | None, work: _Work | None = None) -> ParsedGrade:
    """Parse a final answer; see the module docstring for the accepted formats. Linear in
    the answer's length (`work`, when given, counts the characters examined)."""
    work = work or _Work()
    stripped = work(text or "").strip()
    if not stripped:
        return ParsedGrade(None, "empty answer")
    if stripped.startswith("{"):
        return _parse_json(stripped, work)
    lines = work(text).splitlines()
    work(text)          # the ':' test below reads every line once more
    bodies = [b for ln in lines if ":" in ln for b in (_line_body(ln, work),) if b is not None]
    if not bodies:
        return ParsedGrade(None, "no 'FINAL GRADE:' line")
    if len(bodies) > 1:
        return ParsedGrade(None, f"{len(bodies)} 'FINAL GRADE:' lines; exactly one is allowed")
    return _grade_of(bodies[0])


async def parse_grade_async(text: str | None) -> ParsedGrade:
    """`parse_grade`, in a worker thread for a long answer so the event loop (both paths'
    calls) never waits on it."""
    if text is None or len(text) < OFF_LOOP_CHARS:
        return parse_grade(text)
    import asyncio

    return await asyncio.to_thread(parse_grade, text)


# The last line of every final-grade prompt; the simulated servers recognise the call by it.
GRADE_INSTRUCTION = "Finish with exactly one line: FINAL GRADE: <1-5> (<LABEL>)"
# Constrained output for the final grade: the grade alone, so that a short max_tokens cannot
# cut the object in half (a rationale comes from the previous calls anyway).
GRADE_SCHEMA = {"type": "object", "required": ["grade"], "additionalProperties": False,
                "properties": {"grade": {"type": "integer", "minimum": 1, "maximum": 5}}}


def format_grade(grade: int) -> str:
    """The canonical text form of a grade, as the pipeline asks models to write it."""
    return f"FINAL GRADE: {grade} ({LABELS[grade]})"
