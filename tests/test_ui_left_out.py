"""The viewer's overview marks a run left out of speed with its reason and gives it no
seconds (it showed a starved run's seconds under a green 'complete' badge), and words the
slowdown as the headline does ('5.7× slower', never a bare '0.92×')."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from dualpath.config import load_config
from tests.test_starved import _seeded_with_a_starved_night
from viewer.app import create_app


def test_the_overview_marks_a_starved_run_and_keeps_its_seconds_out(tmp_path):
    cfg = load_config(_seeded_with_a_starved_night(tmp_path))
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as c:   # a Host it serves
        html = c.get("/").text
    row = re.search(r'<tr><td><a href="/night/2027-05-04">2027-05-04</a></td>(.*?)</tr>', html,
                    re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    backup = cells[3]                    # main's status, units, seconds, then backup's
    assert 'class="st st-left"' in backup
    # read as text: the reason is kept on one line, the badge breaking only after "complete ·"
    assert "complete · not a speed: starved, busy 32%" in re.sub(r"<[^>]+>", "", backup)
    assert 'title="starved: slots busy 32% of the time units waited to start' in backup
    assert cells[5] == "—" and cells[2] == "60.0 s"      # no seconds for it; main's stay
    assert html.count("st-left") == 1
    assert re.search(r'<div class="v">5\.7× slower</div>', html)
