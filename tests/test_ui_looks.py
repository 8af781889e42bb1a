"""The viewer's views as a reader sees them, laid out by headless Chromium at 1000 px: no page
scrolls sideways or cuts a table, and every run that is no result or no speed (partial,
starved, resumed) carries its reason where it is shown. One browser for every page."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from bench.browser import Browser
from dualpath.config import load_config
from tests.test_ui import chromium
from tests.ui_hostile import plant_final
from dualpath.viewer.links import history_url, night_url, search_url, ticker_url
from dualpath.warehouse.db import writer
from dualpath.warehouse.search_index import build_search_index

# a final answer of each path's, in Korean and English, long words included: the diff's lines
# must wrap inside the page
MAIN_FINAL = ("삼성전자 수정종가 기준으로 실적 개선이 뚜렷합니다. Margins widen across the "
              "quarter; https://example.com/a/very/long/path/without/any/break/at/all/" + "x" * 80
              + "\nFINAL GRADE: 4 (BUY)")
BACKUP_FINAL = ("삼성전자 수정종가 기준으로 실적이 다소 둔화되었습니다. Margins narrow across the "
                "quarter.\nFINAL GRADE: 2 (SELL)")


@pytest.fixture(scope="module")
def looks(tmp_path_factory):
    """The seeded warehouse (`tests.seeded`) with night 3's backup run starved, night 5's
    main run resumed (two segments), its last night's backup run partial, and one ticker's
    final answers stored on both paths; `dualpath ui` over it; one Chromium."""
    from tests.test_starved import _seeded_with_a_starved_night

    root = tmp_path_factory.mktemp("looks")
    cfg_path = _seeded_with_a_starved_night(root)
    cfg = load_config(cfg_path)
    nights = sorted({n for n, in _rows(cfg, "SELECT DISTINCT night FROM runs")})
    ticker = cfg.tickers()[0]
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("UPDATE runs SET segments = 2 WHERE run_id = ?", [f"demo/{nights[5]}/main"])
        for path, text in (("main", MAIN_FINAL), ("backup", BACKUP_FINAL)):
            plant_final(con, nights[-2], ticker, path, 1, text)
            con.execute("UPDATE calls SET output_hash = hash(?) WHERE night = ? AND ticker = ? "
                        "AND path = ? AND draw = 1 AND call_seq = 2", [text, nights[-2], ticker,
                                                                       path])
        build_search_index(con)     # the planted answers, indexed as ingest indexes its own
    browser = chromium()
    proc = subprocess.Popen([sys.executable, "-m", "dualpath", "ui", "-c",
                             str(cfg_path), "--port", "0"],
                            stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        m = re.search(r"http://127\.0\.0\.1:\d+", proc.stdout.readline())
        assert m, "the viewer did not start"
        with Browser(browser) as b:
            yield m[0], b, cfg, nights, ticker
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _rows(cfg, sql, *params):
    import duckdb
    with duckdb.connect(str(cfg.resolve(cfg.warehouse.path)), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


def _fits(look):
    assert look.console == [], look.console
    assert look.scroll_width <= look.width, (look.url, look.overflow)
    assert look.overflow == [] and look.cut == [], (look.url, look.overflow, look.cut)


def test_the_overview_fits_and_marks_every_run_left_out(looks):
    base, b, cfg, nights, _ = looks
    look = b.open(base + "/", width=1000)
    _fits(look)
    # the headline's lines (100 columns, as `dualpath metrics` prints them) each on one row
    assert b.evaluate("""(() => { const p = document.querySelector("pre.lines");
        p.style.whiteSpace = "pre"; const whole = p.scrollWidth <= p.clientWidth;
        p.style.whiteSpace = ""; return whole; })()""") is True
    text = look.text
    rows = {n: line for line in text.splitlines() for n in map(str, nights)
            if line.startswith(n)}
    assert "partial · not a result" in rows[str(nights[-1])]
    assert "not a speed: starved, busy 32%" in rows[str(nights[3])]
    assert "not a speed: resumed" in rows[str(nights[5])]


def test_a_night_and_its_filters_fit(looks):
    base, b, cfg, nights, _ = looks
    look = b.open(base + night_url("", nights[-1]), width=1000)
    _fits(look)
    assert "backup partial · not a result 8/16 units measured" in look.text
    assert "backup draws partial: not a result" in look.text       # its column, too
    look = b.open(base + night_url("", nights[3]) + "?flag=contaminated", width=1000)
    _fits(look)
    assert "no ticker of this night has a call answered by another server on either path" \
        in look.text
    look = b.open(base + night_url("", nights[3]) + "?flag=runaway", width=1000)
    _fits(look)
    assert "not a speed: starved, busy 32%" in look.text


def test_the_ticker_page_and_its_diff_fit(looks):
    base, b, cfg, nights, ticker = looks
    look = b.open(base + ticker_url("", nights[-2], ticker), width=1000)
    _fits(look)
    assert "only in main" in look.text and "삼성전자" in look.text


def test_a_tickers_history_fits_and_says_why_runs_are_left_out(looks):
    base, b, cfg, nights, ticker = looks
    look = b.open(base + history_url("", ticker), width=1000)
    _fits(look)
    lines = {n: line for line in look.text.splitlines() for n in map(str, nights)
             if line.startswith(n)}
    assert "partial · not a result" in lines[str(nights[-1])]
    assert "not a speed: starved, busy 32%" in lines[str(nights[3])]
    assert "not a speed: resumed" in lines[str(nights[5])]


def test_search_fits_with_and_without_matches(looks):
    base, b, *_ = looks
    look = b.open(base + search_url("", "수정종가"), width=1000)
    _fits(look)
    assert "2 calls whose answer holds 수정종가" in look.text
    look = b.open(base + search_url("", "zzqxjw"), width=1000)
    _fits(look)
    assert "no stored answer contains 'zzqxjw'" in look.text
