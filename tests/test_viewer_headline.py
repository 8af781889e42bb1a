"""The overview's two big words: the interchangeability answer first (the headline's first
quality line), then the RankIC verdict, which an interim look never shows as a decision."""

from __future__ import annotations

from types import SimpleNamespace

from dualpath.viewer.headline import _interchange_word, _rankic_word

Q = "Quality — are backup's grades interchangeable with main's?  "


def test_the_interchangeability_word_is_the_first_lines_answer():
    assert _interchange_word([Q + "not interchangeable, 20 night(s)  [confirmatory]"]) == \
        "not interchangeable"
    assert _interchange_word([Q + "interim — no decision, 10 night(s)", "  10 of 20"]) == \
        "interim — no decision"
    assert _interchange_word([Q + "stopped early for interchangeable at night 7 (look 1 of "
                              "3)"]) == "stopped early for interchangeable at night 7 (look 1 of 3)"
    assert _interchange_word(["RankIC — is backup's signal as good as main's?  inconclusive"]) \
        is None
    assert _interchange_word([]) is None


def test_an_interim_rankic_look_is_no_decision_in_the_big_word():
    assert _rankic_word(SimpleNamespace(verdict="non-inferior", label="interim")) == \
        "interim — no decision"
    assert _rankic_word(SimpleNamespace(verdict="non-inferior", label="confirmatory")) == \
        "non-inferior"
    assert _rankic_word(None) is None
