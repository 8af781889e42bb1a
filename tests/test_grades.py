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
