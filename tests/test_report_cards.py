"""The report's headline cards: one per question (grades interchangeable, RankIC, speed,
energy), the question and its answer apart so a narrow page breaks between them and never
mid-phrase, and the detail lines in a block that is never wrapped (the 100-column text
wrapped mid-phrase at 1000 and 1400 px when two cards shared a row)."""

from __future__ import annotations

import pytest
from markupsafe import escape

from dualpath.evals.weekly.render import cards, render
from dualpath.flows.weekly import gather
from tests.seeded import seed_warehouse


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    cfg_path, cfg, _ = seed_warehouse(tmp_path_factory.mktemp("cards"))
    return gather(cfg, None, None, sweeps=False)


def test_one_card_per_question_each_split_into_question_answer_and_details(data):
    got = cards(data)
    assert [c["question"] for c in got] == [
        "Quality — are backup's grades interchangeable with main's?",
        "RankIC — is backup's signal as good as main's?",
        "Speed — how much slower is backup?", "Energy — how much energy per ticker?"]
    assert got[2]["answer"] == "5.7× slower than main (95% CI 5.6×–5.8×, 9 paired nights)"
    assert [c["cls"] for c in got] == ["verdict open", "verdict open", "slowdown", "energy"]
    # every headline line is in a card, once: a title, or a detail line less its indent
    lines = [ln for c in got for ln in (f"{c['question']}  {c['answer']}", *c["lines"])]
    assert [ln.strip() for ln in lines] == [ln.strip() for ln in data.headline.lines]


def test_the_details_are_an_unwrapped_block_and_the_answer_a_whole_phrase(data, tmp_path):
    html = render(data, tmp_path, "r")[0].read_text()
    for c in cards(data):
        assert f"<pre>{escape(chr(10).join(c['lines']))}</pre>" in html
        assert f'<span class="answer">{escape(c["answer"])}</span>' in html
    assert ".card pre{" in html and "white-space:pre}" in html
    assert ".card h2 span{white-space:nowrap}" in html
