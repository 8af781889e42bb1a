"""The viewer's views across answers and nights: the word diff of two final answers, the
search of every answer, the night's call filters, a ticker's history, and each run's slot
occupancy beside its GPU power (or the line saying why there is none)."""

from __future__ import annotations

import base64
import re
import shutil

import duckdb
from starlette.testclient import TestClient

from dualpath.config import load_config
from tests.seeded import POWER, SPEED, seed_warehouse
from tests.test_ui import Dom, browse, project, rows, ui  # noqa: F401  (fixtures)
from tests.ui_hostile import FINAL, SCRIPT, plant_final
from dualpath.viewer.app import create_app
from dualpath.viewer.diff import word_diff
from dualpath.viewer.links import history_url, night_url, search_url, ticker_url


def client(cfg, db=None):
    return TestClient(create_app(cfg, db), base_url="http://127.0.0.1")


def copy_of(cfg, tmp_path):
    copy = tmp_path / "copy.duckdb"
    shutil.copy(cfg.resolve(cfg.warehouse.path), copy)
    return copy


def test_a_word_diff_marks_the_words_only_one_answer_has():
    a = "Margins widen.\nFINAL GRADE: 5 (STRONG BUY)"
    b = "Margins  widen.\nFINAL GRADE: 3 (HOLD)"
    d = word_diff(a, b)
    # "Margins widen. FINAL GRADE:" is common (the doubled space is no change); "5 (STRONG
    # BUY)" only in a, "3 (HOLD)" only in b: 4 same, 3 removed, 2 added
    assert d.segments == (("same", "Margins  widen.\nFINAL GRADE: "),
                          ("del", "5 (STRONG BUY)"), ("ins", "3 (HOLD)"))
    assert (d.same, d.removed, d.added, d.identical) == (4, 3, 2, False)
    # a frequent word is matched, not junked (difflib's autojunk would drop it past 200 words)
    long = " ".join(["the grade"] * 150)
    assert word_diff(long, long + " now").segments == (("same", long + " "), ("ins", "now"))
    assert word_diff("same words", "same   words").identical
    # a line break only the first answer has is kept, or the removed line would run on
    assert word_diff("views on X.\nFINAL GRADE: 5", "lean on X.").segments == (
        ("del", "views "), ("ins", "lean "), ("same", "on X.\n"), ("del", "FINAL GRADE: 5"))


def test_the_ticker_page_diffs_the_final_answers_as_text(project, tmp_path):
    _, cfg, nights = project
    ticker = cfg.tickers()[0]
    copy = copy_of(cfg, tmp_path)
    with duckdb.connect(str(copy)) as con:
        plant_final(con, nights[0], ticker, "backup", 1)
        main_final = con.execute(
            "SELECT t.text FROM units u JOIN texts t ON t.hash = u.final_hash WHERE u.night = ?"
            " AND u.ticker = ? AND u.path = 'main' AND u.draw = 1 ORDER BY u.unit_attempt DESC "
            "LIMIT 1", [nights[0], ticker]).fetchone()[0]
    with client(cfg, copy) as c:
        html = c.get(ticker_url("", nights[0], ticker)).text
    dom = Dom(html)
    assert "script" not in dom.tags and "img" not in dom.tags
    shown = dom.texts("worddiff")
    assert len(shown) == 1
    expected = word_diff(main_final, FINAL)
    # the diff's text, read back from the page, is main's answer plus backup's: nothing lost
    assert "".join(t for k, t in expected.segments if k != "ins") == main_final
    assert shown[0] == "".join(t for _, t in expected.segments)
    ins = "".join(t for tag, _, t in dom.elements if tag == "ins")
    assert "<script>document.title='pwned'</script>" in ins
    assert f"{expected.removed} only in main" in html


def test_a_draw_without_a_final_answer_says_so(project, tmp_path):
    _, cfg, nights = project
    ticker = cfg.tickers()[2]
    copy = copy_of(cfg, tmp_path)
    with duckdb.connect(str(copy)) as con:
        con.execute("UPDATE units SET final_hash = NULL WHERE night = ? AND ticker = ? AND "
                    "path = 'backup' AND draw = 2", [nights[0], ticker])
    with client(cfg, copy) as c:
        html = c.get(ticker_url("", nights[0], ticker, 2)).text
    assert "no diff: no final answer stored for draw 2 on backup" in html
    assert "worddiff" not in html


def _stored(cfg, text, path=None):
    return rows(cfg, "SELECT count(*) FROM calls c JOIN texts t ON t.hash = c.output_hash "
                     "WHERE t.text ILIKE '%' || ? || '%' AND (? IS NULL OR c.path = ?)",
                text, path, path)[0][0]


def test_search_finds_every_answer_holding_the_text_up_to_its_limit(project):
    _, cfg, _ = project
    with client(cfg) as c:
        def found(q, path=None):
            html = c.get(search_url("", q, path)).text
            return html, re.findall(r'<td><a href="(/night/[^"]+\?draw=\d+)">', html)
        q = f"{cfg.tickers()[1].lower()}: the evidence looks NEUTRAL"
        html, links = found(q, "main")
        n = _stored(cfg, q, "main")
        assert 0 < n <= 50 and len(links) == n
        assert [m.lower() for m in re.findall(r"<mark>(.*?)</mark>", html)] == [q.lower()] * n
        assert all(c.get(u).status_code == 200 for u in links[:3])      # each opens its draw
        html, links = found("Synthetic")                 # every answer: more than the limit
        assert _stored(cfg, "Synthetic") > 50 and len(links) == 50
        assert "more than 50 matched" in html
        for literal in ("%s", "_s"):     # LIKE wildcards are text here (as such, both match all)
            html, links = found(literal)
            assert links == [] and f"no stored answer contains &#39;{literal}&#39;" in html
        assert "at least 2 characters" in found("x")[0]


def test_search_says_when_it_read_every_answer_instead_of_its_index(project, tmp_path):
    """Ingest indexed the answers: a word is found through the index; a query of only
    punctuation, or a warehouse from before the index, reads every answer (the same rows)
    and the page says so in a line."""
    _, cfg, _ = project
    pick = re.compile(r'<td><a href="(/night/[^"]+\?draw=\d+)">.*?<mark>(.*?)</mark>', re.S)
    with client(cfg) as c:
        indexed = c.get(search_url("", "Evidence")).text
        assert "searched without the index" not in indexed and pick.findall(indexed)
        html = c.get(search_url("", ": (")).text
        assert ("<p class=\"small\">searched without the index: the text has no letter or "
                "digit to look up</p>") in html
    copy = copy_of(cfg, tmp_path)
    with duckdb.connect(str(copy)) as con:
        con.execute("DROP TABLE search_postings; DROP TABLE search_docs; DROP TABLE "
                    "search_terms; DELETE FROM schema_migrations WHERE name = "
                    "'m023_search_index'")
    with client(cfg, copy) as c:
        scanned = c.get(search_url("", "Evidence")).text
    assert ("searched without the index: this warehouse has no index of its answers yet "
            "(the next ingest builds it)") in scanned
    assert pick.findall(scanned) == pick.findall(indexed)


def test_search_shows_a_script_in_an_answer_as_text(project, ui, tmp_path):
    dom = browse(ui + search_url("", "<script>"), tmp_path)
    assert "script" not in dom.tags
    assert "pwned" not in [t for tag, _, t in dom.elements if tag == "title"][0]
    snippets = dom.texts("snippet")
    assert snippets and all(SCRIPT in s for s in snippets)


def test_the_night_filters_keep_the_tickers_with_flagged_calls(project, tmp_path):
    _, cfg, nights = project
    night, (t_retry, t_cont) = nights[1], cfg.tickers()[1:3]
    copy = copy_of(cfg, tmp_path)
    with duckdb.connect(str(copy)) as con:
        con.execute("UPDATE calls SET attempts = 2 WHERE night = ? AND ticker = ? AND path = "
                    "'backup' AND draw = 1 AND call_seq = 3", [night, t_retry])
        con.execute("UPDATE calls SET contaminated = 'model alias x != y' WHERE night = ? AND "
                    "ticker = ? AND path = 'main' AND draw = 2 AND call_seq = 1", [night, t_cont])
        final = "u.unit_attempt = (SELECT max(unit_attempt) FROM units v WHERE v.run_id = " \
                "u.run_id AND v.ticker = u.ticker AND v.draw = u.draw)"
        runaway = sorted(t for t, in con.execute(
            f"SELECT DISTINCT c.ticker FROM calls c JOIN units u USING (run_id, ticker, draw, "
            f"unit_attempt) WHERE c.night = ? AND c.finish_reason = 'length' AND {final}",
            [night]).fetchall())
        failed = sorted(t for t, in con.execute(
            f"SELECT DISTINCT ticker FROM units u WHERE night = ? AND outcome = 'parse_failed' "
            f"AND {final}", [night]).fetchall())
    with client(cfg, copy) as c:
        def kept(flag):
            html = c.get(night_url("", night), params={"flag": flag, "sort": "ticker"}).text
            return re.findall(r'<td><a href="/night/[^"]+/(\w+)">', html), html
        assert kept("retried")[0] == [t_retry] and kept("contaminated")[0] == [t_cont]
        assert kept("runaway")[0] == runaway and kept("parse_failed")[0] == failed
        html = kept("")[1]
        assert f"runaway ({len(runaway)})" in html and "retried (1)" in html
        assert "1 retried" in html                       # the mark beside the grades
        assert c.get(night_url("", night), params={"flag": "slow"}).status_code == 400


def test_a_tickers_history_shows_each_nights_grades_and_marks_excluded_runs(tmp_path):
    from tests.test_starved import _seeded_with_a_starved_night

    cfg = load_config(_seeded_with_a_starved_night(tmp_path))
    ticker = cfg.tickers()[0]
    grades = {}
    for night, path, g in rows(cfg, "SELECT night::VARCHAR, path, string_agg(grade::VARCHAR, "
                               "' ' ORDER BY draw) FROM units WHERE ticker = ? GROUP BY ALL",
                               ticker):
        grades[night, path] = g
    with client(cfg) as c:
        html = c.get(history_url("", ticker)).text
        assert c.get(history_url("", "NOPE")).status_code == 404
    body = re.findall(r'<tr class="[^"]*"><td><a href="/night/([\d-]+)/\w+">(.*?)</tr>', html,
                      re.S)
    nights = [n for n, _ in body]
    assert nights == sorted({n for n, _ in grades}, reverse=True)      # newest first
    for night, row in body:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        for path, cell in (("main", cells[1]), ("backup", cells[4])):
            assert " ".join(re.findall(r'class="g g\d">(\d)<', cell)) == grades[night, path]
    last, starved = dict(body)[nights[0]], dict(body)[nights[-4]]
    assert "partial · not a result" in re.sub(r"<[^>]+>", "", last)
    assert 'title="its grades are in no metric: 8 of 16 units measured"' in last
    assert 'class="excluded"' in html.split(nights[0])[0][-200:]
    assert "complete · not a speed: starved" in re.sub(r"<[^>]+>", "", starved)
    assert "excluded" not in starved


def test_a_night_shows_occupancy_beside_power(project):
    _, cfg, nights = project
    with client(cfg) as c:
        html = c.get(night_url("", nights[0])).text
    imgs = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="(\w+): ([^"]+)"',
                      html)
    assert [(p, what) for _, p, what in imgs] == [
        (p, "slot occupancy and GPU board power over the night") for p in ("main", "backup")]
    for data, path, _ in imgs:
        svg = base64.b64decode(data).decode()
        assert "<script" not in svg
        assert f"{path}: slot occupancy" in svg and f"{path}: GPU board power (W)" in svg
        assert "calls in flight ÷ slots" in svg and "server's own timings" in svg
    assert "energy unknown" not in html


def test_a_night_without_power_samples_says_why_and_draws_no_empty_chart(tmp_path):
    _, cfg, nights = seed_warehouse(tmp_path)     # energy per run, no samples
    night = nights[0]
    db = cfg.resolve(cfg.warehouse.path)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE energy_runs SET joules = NULL, unknown = 'no GPU counters on host "
                    "h: no NVIDIA or amdgpu device' WHERE run_id LIKE '%/main'")
        con.execute("DELETE FROM energy_runs WHERE run_id LIKE ?", [f"demo/{nights[1]}/%"])
        con.execute("UPDATE runs SET status = 'running' WHERE run_id = ?",
                    [f"demo/{nights[1]}/main"])
    with client(cfg) as c:
        html, other = c.get(night_url("", night)).text, c.get(night_url("", nights[1])).text
    assert "<b>main</b>: energy not known yet (a segment's telemetry is stored when it ends; " \
           "this run is still scoring)" in other.replace("&#39;", "'")
    # backup: J = 190 W × (345 s/ticker × 8 tickers) on night 0 = 524,400 J
    kj = POWER["backup"] * SPEED["backup"](0) * 8 / 1000
    assert f"<b>backup</b>: power over the night unknown (no power samples stored for this " \
           f"run); its board energy: {kj:,.1f} kJ, mean 190 W" in html
    assert "<b>main</b>: energy unknown (no GPU counters on host h: no NVIDIA or amdgpu " \
           "device)" in html
    assert "<b>backup</b>: energy unknown (no GPU telemetry was recorded for this run)" in other
    for data in re.findall(r'base64,([^"]+)"', html):
        svg = base64.b64decode(data).decode()
        assert "slot occupancy" in svg and "GPU board power" not in svg


def test_occupancy_is_the_calls_in_flight_over_the_slots():
    import pandas as pd
    from dualpath.viewer.plots import occupancy, power

    spans = pd.DataFrame({"start_wall": [100.0, 105.0], "end_wall": [110.0, 110.0],
                          "service_s": [10.0, 10.0]})
    occ, server = occupancy(spans, slots=2, scale=0.5, t0=100.0, bins=2)
    # real-scale: calls over [0, 20] and [10, 20] s; bins [0, 10], [10, 20]:
    # 10 s busy ÷ (10 s × 2 slots) = 0.5, then 20 ÷ 20 = 1.0
    assert list(occ.x) == [0.0, 10.0, 20.0] and list(occ.y) == [0.5, 1.0]
    # the server worked 10 s of each: the first call's spread over its 20 s (5 s a bin), the
    # second's all in bin 2: 5 ÷ 20 = 0.25, then (5 + 10) ÷ 20 = 0.75
    assert list(server.y) == [0.25, 0.75]
    assert occupancy(spans.assign(service_s=None), 2, 0.5, 100.0, 2)[1] is None
    assert occupancy(spans.iloc[:0], 2, 1.0, 0.0) == (None, None)
    samples = pd.DataFrame({"segment": [1, 1, 2], "t_s": [0.0, 1.0, 0.0],
                            "width_s": [1.0, 1.0, 2.0], "power_w": [100.0, 200.0, 50.0]})
    segs = pd.DataFrame({"segment": [1, 2], "started_wall": [100.0, 110.0]})
    w = power(samples, segs, scale=0.5, t0=100.0)
    # segment 2 began 10 s (wall) = 20 s real-scale after the first
    assert list(w.x) == [0.0, 1.0, 20.0, 22.0] and list(w.y) == [100.0, 200.0, 50.0]


def test_a_figure_is_drawn_once_for_the_same_data():
    import numpy as np
    from dualpath.viewer import plots
    from dualpath.viewer.plots import Series

    occ = Series(np.array([0.0, 60.0, 120.0]), np.array([0.5, 1.0]))
    first = plots.figure("main", occ, None)
    assert plots.figure("main", occ, None) is first            # kept, not drawn again
    changed = plots.figure("main", Series(occ.x, np.array([0.5, 0.9])), None)
    assert changed != first and plots.figure("backup", occ, None) != first
    assert plots.figure("main", None, None) is None
