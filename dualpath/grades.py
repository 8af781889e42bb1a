"""The strict final-grade parser.

The grade is on a 5-level ordinal scale: 1 strong sell, 2 sell, 3 hold, 4 buy, 5 strong buy.
Documented answer formats, and only these, are accepted:

1. Text: exactly one line of the form (case-insensitive, optionally wrapped in ``**``)::

       FINAL GRADE: 4
       FINAL GRADE: 4 (BUY)
       FINAL GRADE: BUY

   When both a number and a label are given they must agree.
2. JSON (constrained output): the whole answer is one JSON object with an integer ``grade``
   between 1 and 5, e.g. ``{"grade": 4, "rationale": "..."}``.

Anything else is a parse failure carrying the reason; a grade is never guessed or defaulted,
because a defaulted "3" would look like a real hold and bias every statistic toward the middle.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import orjson

LABELS = {1: "STRONG SELL", 2: "SELL", 3: "HOLD", 4: "BUY", 5: "STRONG BUY"}
GRADE_BY_LABEL = {v: k for k, v in LABELS.items()}
SCALE = (1, 2, 3, 4, 5)

_LINE = re.compile(r"^\s*(?:\*\*)?\s*FINAL GRADE\s*:\s*(?:\*\*)?\s*(?P<body>.*?)\s*(?:\*\*)?\s*$",
                   re.IGNORECASE)
_BODY = re.compile(r"^(?:(?P<num>[1-5])(?:\s*\((?P<lab1>[A-Z ]+)\))?|(?P<lab2>[A-Z ]+))$",
                   re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ParsedGrade:
    """A grade, or why there is none."""

    grade: int | None
    failure: str | None = None


def _shown(value: object, limit: int = 60) -> str:
    """A piece of the answer for a failure message: repr, cut (an answer can be megabytes)."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit - 3] + "..."


def _label(text: str) -> int | None:
    return GRADE_BY_LABEL.get(" ".join(text.upper().split()))


def _parse_json(text: str) -> ParsedGrade:
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return ParsedGrade(None, f"answer starts like JSON but is not valid JSON: {_shown(str(e), 120)[1:-1]}")
    if not isinstance(obj, dict) or "grade" not in obj:
        return ParsedGrade(None, "JSON answer has no 'grade' key")
    g = obj["grade"]
    if isinstance(g, bool) or not isinstance(g, int) or g not in SCALE:
        return ParsedGrade(None, f"JSON 'grade' must be an integer 1-5, got {_shown(g)}")
    return ParsedGrade(g)


def parse_grade(text: str | None) -> ParsedGrade:
    """Parse a final answer; see the module docstring for the accepted formats."""
    if not text or not text.strip():
        return ParsedGrade(None, "empty answer")
    stripped = text.strip()
    if stripped.startswith("{"):
        return _parse_json(stripped)
    hits = [m for m in map(_LINE.match, text.splitlines()) if m]
    if not hits:
        return ParsedGrade(None, "no 'FINAL GRADE:' line")
    if len(hits) > 1:
        return ParsedGrade(None, f"{len(hits)} 'FINAL GRADE:' lines; exactly one is allowed")
    body = _BODY.match(hits[0]["body"])
    if not body:
        return ParsedGrade(None, f"unreadable grade {_shown(hits[0]['body'])}; use 1-5 or a "
                           "scale label")
    if body["num"]:
        grade = int(body["num"])
        if body["lab1"] and _label(body["lab1"]) != grade:
            return ParsedGrade(None, f"grade {grade} contradicts label {_shown(body['lab1'])}")
        return ParsedGrade(grade)
    grade = _label(body["lab2"])
    if grade is None:
        return ParsedGrade(None, f"unknown label {_shown(body['lab2'])}; use one of "
                           f"{list(LABELS.values())}")
    return ParsedGrade(grade)


# The last line of every final-grade prompt; the simulated servers recognise the call by it.
GRADE_INSTRUCTION = "Finish with exactly one line: FINAL GRADE: <1-5> (<LABEL>)"
# Constrained output for the final grade: the grade alone, so that a short max_tokens cannot
# cut the object in half (a rationale comes from the previous calls anyway).
GRADE_SCHEMA = {"type": "object", "required": ["grade"], "additionalProperties": False,
                "properties": {"grade": {"type": "integer", "minimum": 1, "maximum": 5}}}


def format_grade(grade: int) -> str:
    """The canonical text form of a grade, as the pipeline asks models to write it."""
    return f"FINAL GRADE: {grade} ({LABELS[grade]})"
