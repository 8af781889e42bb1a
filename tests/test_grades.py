import pytest

from dualpath.grades import GRADE_INSTRUCTION, format_grade, parse_grade


@pytest.mark.parametrize("text,grade", [
    ("Reasons...\nFINAL GRADE: 4", 4),
    ("Reasons...\nFINAL GRADE: 4 (BUY)", 4),
    ("final grade: 2 (sell)", 2),
    ("**FINAL GRADE: 5 (STRONG BUY)**", 5),
    ("**FINAL GRADE:** 1", 1),
    ("Momentum faded.\nFINAL GRADE: STRONG SELL\n", 1),
    ("FINAL GRADE:   hold  ", 3),
    ('{"grade": 3, "rationale": "balanced"}', 3),
    ('  {"grade": 5}  ', 5),
])
def test_documented_formats_parse(text, grade):
    assert parse_grade(text).grade == grade


@pytest.mark.parametrize("text,reason", [
    ("", "empty"),
    (None, "empty"),
    ("I would buy this stock.", "no 'FINAL GRADE:' line"),
    ("Grade: 4", "no 'FINAL GRADE:' line"),
    ("FINAL GRADE: 6", "unreadable grade"),
    ("FINAL GRADE: 0", "unreadable grade"),
    ("FINAL GRADE: 4.5", "unreadable grade"),
    ("FINAL GRADE: 4 (SELL)", "contradicts"),
    ("FINAL GRADE: MILD BUY", "unknown label"),
    ("FINAL GRADE: 4\nFINAL GRADE: 4", "exactly one"),
    ("FINAL GRADE: 4\nFINAL GRADE: 2", "exactly one"),
    ("The grade is 4. FINAL GRADE: 4", "no 'FINAL GRADE:' line"),   # not on its own line
    ('{"grade": 7}', "integer 1-5"),
    ('{"grade": "4"}', "integer 1-5"),
    ('{"grade": true}', "integer 1-5"),
    ('{"score": 4}', "no 'grade' key"),
    ('{"grade": 4', "not valid JSON"),
])
def test_anything_else_is_a_recorded_failure_never_a_default(text, reason):
    parsed = parse_grade(text)
    assert parsed.grade is None
    assert reason in parsed.failure


def test_canonical_form_round_trips():
    for g in range(1, 6):
        assert parse_grade("why\n" + format_grade(g)).grade == g
    assert "FINAL GRADE" in GRADE_INSTRUCTION


# ---- bounded work, ASCII keywords, strict JSON (properties) ----------------------------------

import json  # noqa: E402
import re  # noqa: E402

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dualpath.grades import LABELS, _Work, parse_grade_async  # noqa: E402

# The parser before it was made linear, with ASCII matching: the reference for what the
# documented formats mean (on short ASCII lines, where its backtracking costs nothing).
_OLD_LINE = re.compile(r"^\s*(?:\*\*)?\s*FINAL GRADE\s*:\s*(?:\*\*)?\s*(?P<body>.*?)\s*"
                       r"(?:\*\*)?\s*$", re.IGNORECASE | re.ASCII)
_OLD_BODY = re.compile(r"^(?:(?P<num>[1-5])(?:\s*\((?P<lab1>[A-Z ]+)\))?|(?P<lab2>[A-Z ]+))$",
                       re.IGNORECASE | re.ASCII)


def old_grade(text: str) -> int | None:
    hits = [m for m in map(_OLD_LINE.match, text.splitlines()) if m]
    if len(hits) != 1:
        return None
    body = _OLD_BODY.match(hits[0]["body"])
    if not body:
        return None
    label = lambda t: {v: k for k, v in LABELS.items()}.get(" ".join(t.upper().split()))
    if body["num"]:
        g = int(body["num"])
        return g if not body["lab1"] or label(body["lab1"]) == g else None
    return label(body["lab2"])


PIECES = ["FINAL GRADE", "final grade", "Final Grade", ":", "**", " ", "  ", "\t", "\n", "(",
          ")", "1", "3", "4", "5", "6", "BUY", "sell", "Strong", "HOLD", "x", "."]
ws = st.sampled_from(["", " ", "  ", "\t"])
stars = st.sampled_from(["", "**", "*"])
keyword = st.sampled_from(["FINAL GRADE", "final grade", "Final Grade", "FINAL  GRADE",
                           "FINAL GRADE", "FINALGRADE"])
body = st.sampled_from(["4", "4 (BUY)", "4(buy)", "2 (SELL)", "2 (BUY)", "BUY", "strong buy",
                        "STRONG  SELL", "hold", "6", "4.5", "45", "4 (BUY", "(BUY)", "MILD BUY",
                        "", "5 ( STRONG BUY )", "3 (\tHOLD)", "STRONG\tBUY"])
grade_lines = st.tuples(ws, stars, ws, keyword, ws, st.sampled_from([":", "", "::"]), ws, stars,
                        ws, body, ws, stars, ws).map("".join)
noise = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)
ascii_lines = st.one_of(grade_lines, grade_lines, noise).filter(lambda ln: len(ln) <= 60)
ascii_answers = st.lists(ascii_lines, min_size=1, max_size=4).map("\n".join).filter(
    lambda t: not t.strip().startswith("{"))


@given(ascii_answers)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_on_short_ascii_lines_the_linear_parser_reads_what_the_old_one_read(text):
    assert parse_grade(text).grade == old_grade(text)


@given(st.text(max_size=400))
@settings(max_examples=300)
def test_the_work_is_linear_in_the_answer_for_any_text(text):
    work = _Work()
    parse_grade(text, work)
    assert work.chars <= 12 * len(text) + 64


@given(st.integers(0, 6), st.sampled_from([" ", "\t", "*", "x", ":", "FINAL GRADE: 4"]),
       st.sampled_from(["x", "", "**", ")", "\n"]))
@settings(max_examples=60, deadline=None)
def test_adversarial_shapes_scale_linearly_with_their_length(exponent, filler, tail):
    """The backtracking shape (a grade line, a long run of one character, one more that
    fails the match) at sizes 1 to 4**6 x: the characters examined grow in proportion."""
    def work(n: int) -> int:
        w = _Work()
        parse_grade("FINAL GRADE: 4" + filler * n + tail, w)
        return w.chars
    n = 4 ** exponent
    small, large = work(n * 100), work(n * 800)
    assert large <= 8 * small + 200          # 8x the input: at most 8x the work
    assert large <= 12 * len("FINAL GRADE: 4" + filler * n * 800 + tail) + 64


def test_the_redos_string_is_refused_with_little_work():
    text = "FINAL GRADE: 4" + " " * 2000 + "x"
    w = _Work()
    assert "unreadable grade" in parse_grade(text, w).failure
    assert w.chars < 10 * len(text)


@given(st.sampled_from(["ſELL", "FİNAL GRADE: 4", "FINAL GRADE: ſtrong buy", "FINAL GRADE: 4 (BUY)",
                        "FINAL GRADE: BUY", "FINAL GRADE: 5 (STRONG BUY)"]),
       st.data())
def test_keywords_and_labels_are_ascii_only(base, data):
    """Unicode case folding maps 'ſ' to 's', 'İ' to 'i' and the Kelvin sign to 'k': none of
    them may make a grade."""
    lookalikes = {"s": "ſ", "S": "ſ", "I": "İ", "i": "ı", "K": "\u212a", "k": "\u212a"}
    spots = [i for i, c in enumerate(base) if c in lookalikes]
    assume(spots)
    i = data.draw(st.sampled_from(spots))
    text = base[:i] + lookalikes[base[i]] + base[i + 1:]
    assert parse_grade(text).grade is None
    assert parse_grade("FINAL GRADE: ſELL").grade is None


@given(st.integers(1, 5), st.dictionaries(st.text(max_size=8).filter(lambda k: k != "grade"),
                                          st.integers() | st.text(max_size=20), max_size=4))
def test_json_grades_read_and_duplicate_keys_are_refused(grade, extra):
    doc = {"grade": grade, **extra}
    assert parse_grade(json.dumps(doc)).grade == grade
    twice = json.dumps(doc)[:-1] + f', "grade": {grade % 5 + 1}}}'
    parsed = parse_grade(twice)
    assert parsed.grade is None and "gives the key 'grade' twice" in parsed.failure


@pytest.mark.parametrize("text,reason", [
    ('{"grade": 1, "grade": 5}', "gives the key 'grade' twice"),
    ('{"grade": 3, "why": {"a": 1, "a": 2}}', "gives the key 'a' twice"),
    ('{"grade": NaN}', "not valid JSON"),
    ('{"grade": ' + "1" * 5000 + "}", "not valid JSON"),
    ("{" + '"a":[' * 100_000, "not valid JSON"),
    ("FINAL GRADE: 4\u00a0(BUY)", None),            # Unicode space between: still a grade
])
def test_strict_json_and_what_still_reads(text, reason):
    parsed = parse_grade(text)
    if reason is None:
        assert parsed.grade == 4
    else:
        assert parsed.grade is None and reason in parsed.failure


async def test_a_huge_answer_is_parsed_off_the_event_loop():
    """While a 40 MB answer is parsed, the loop keeps running other tasks."""
    import asyncio

    text = "reasoning: step\n" * 2_500_000 + "FINAL GRADE: 2 (SELL)"
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    t = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    parsed = await parse_grade_async(text)
    t.cancel()
    assert parsed.grade == 2
    assert ticks > before + 1          # the loop ran while the answer was parsed
