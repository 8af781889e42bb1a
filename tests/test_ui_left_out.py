"""The viewer's overview marks a run left out of speed with its reason and gives it no
seconds (it showed a starved run's seconds under a green 'complete' badge), and words the
slowdown as the headline does ('5.7× slower', never a bare '0.92×')."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from dualpath.config import load_config
from tests.test_starved import _seeded_with_a_starved_night
from dualpath.viewer.app import create_app


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


def test_the_overview_counts_no_disagreements_on_a_night_with_a_partial_run(tmp_path):
    from tests.seeded import seed_warehouse

    _, cfg, nights = seed_warehouse(tmp_path)
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as c:
        html = c.get("/").text

    def cell(night):
        row = re.search(rf'<tr><td><a href="/night/{night}">{night}</a></td>(.*?)</tr>', html,
                        re.S).group(1)
        return re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[-1]

    # the last night's backup run is partial: its grades are no result, nothing is counted
    assert cell(nights[-1]) == ('<span title="not counted: a run of this night is not complete, '
                                'so its grades are no result">—</span>')
    assert all(re.fullmatch(r'<a href="/night/\S+\?only=disagree">\d+</a>', cell(n))
               for n in nights[:-1])


def test_a_night_page_gives_a_partial_runs_counts_once(tmp_path):
    from tests.seeded import seed_warehouse

    _, cfg, nights = seed_warehouse(tmp_path)
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as c:
        html = c.get(f"/night/{nights[-1]}").text
    line = re.sub(r"<[^>]+>", "", re.search(r'<p class="runs">(.*?)</p>', html, re.S).group(1))
    # its detail ("8 of 16 units measured") says no more than the counts beside the badge
    assert re.sub(r"\s+", " ", line).strip() == ("main complete 16/16 units measured"
                                                 "backup partial · not a result "
                                                 "8/16 units measured")


def test_a_runs_detail_beyond_its_counts_is_kept():
    from dualpath.viewer.app import _beyond_counts

    assert _beyond_counts("3 of 40 units measured; 37 failed; last segment interrupted "
                          "(no end record)") == "37 failed; last segment interrupted (no end record)"
    assert _beyond_counts("8 of 16 units measured") == ""
    assert _beyond_counts("server went away") == "server went away"
    assert _beyond_counts(None) == ""
