"""The overview's two big words: the interchangeability answer first, then the RankIC answer,
each in the words its headline line gives it (read from the result object, not parsed from
text); an interim look is never shown as a decision, a pass that does not reassure never bare."""

from __future__ import annotations

from dualpath.viewer.headline import big_words


def test_the_big_words_are_the_result_objects_answers():
    r = {"interchangeability": {"answer": "not interchangeable"},
         "rankic": {"answer": "non-inferior, not reassuring"}}
    assert big_words(r) == ("not interchangeable", "non-inferior, not reassuring")
    assert big_words({"interchangeability": None, "rankic": None}) == (None, None)


def test_an_interim_rankic_look_is_no_decision_in_the_big_word(tmp_path):
    """On a real interim study the answer is the headline's words: never the verdict so far."""
    from dataclasses import replace

    from dualpath.evals.headline import quality_lines
    from dualpath.evals.result import answer_of
    from tests.test_headline_icr import V

    v = replace(V, label="interim", verdict="non-inferior", decided=True,
                label_text="interim — no decision: 12 of 20 window nights collected")
    assert answer_of(quality_lines(v)) == "interim — no decision"
    assert answer_of(quality_lines(replace(V, label="confirmatory"))) == \
        "inconclusive: measurably worse"
