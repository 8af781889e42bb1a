"""`dualpath ui`: the pages, driven in headless Chromium on a small scored warehouse, and the
viewer's guarantees (read-only, escaped, waits out an ingest, links from other outputs)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pytest
from starlette.testclient import TestClient

from dualpath.config import load_config
from dualpath.pipeline import AGENTS
from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from tests.ui_hostile import AGENT, SCRIPT
from dualpath.viewer.app import CSP, create_app
from dualpath.viewer.links import night_url, ticker_url

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--no-proxy-server"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """Two nights of 4 tickers x 2 draws on both simulated paths, one agent's answers
    carrying a script (`tests.ui_hostile`)."""
    root = tmp_path_factory.mktemp("ui")
    cfg_path, cfg, nights = make_project(root, tickers=4, draws=2, nights=2)
    cfg_path.write_text(cfg_path.read_text()
                        + '\n[pipeline]\nname = "tests.ui_hostile:pipeline"\n')
    cfg = load_config(cfg_path)
    with SimFleet(cfg) as fleet:
        for night in nights:
            ingest(cfg, score_night_plain(cfg, night, fleet.urls))
    return cfg_path, cfg, nights


def rows(cfg, sql: str, *params):
    with duckdb.connect(str(cfg.resolve(cfg.warehouse.path)), read_only=True) as con:
        return con.execute(sql, list(params)).fetchall()


class Dom(HTMLParser):
    """Elements as (tag, classes, text inside) and every start tag seen."""

    def __init__(self, html: str):
        super().__init__()
        self.tags, self.open, self.elements = [], [], []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("br", "meta", "link", "input", "img"):
            return
        self.open.append([tag, (dict(attrs).get("class") or "").split(), ""])

    def handle_endtag(self, tag):
        while self.open:
            el = self.open.pop()
            self.elements.append(tuple(el))
            if self.open:
                self.open[-1][2] += el[2]
            if el[0] == tag:
                break

    def handle_data(self, data):
        if self.open:
            self.open[-1][2] += data

    def texts(self, cls: str) -> list[str]:
        return [t for _, classes, t in self.elements if cls in classes]


@pytest.fixture(scope="module")
def ui(project):
    """`dualpath ui` itself, on a free port."""
    cfg_path = project[0]
    proc = subprocess.Popen([sys.executable, "-m", "dualpath", "ui", "-c", str(cfg_path),
                             "--port", "0"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:\d+", line)
    assert m, line
    yield m[0]
    proc.terminate()
    proc.wait(timeout=30)


def chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.environ.get("CI") == "true":
        pytest.fail("chromium is not installed (`make test` installs it with apt-get)")
    if found is None:
        pytest.skip("chromium is not installed: apt-get install chromium")
    return found


def browse(url: str, tmp_path: Path, shot: Path | None = None) -> Dom:
    """The page's DOM after Chromium loaded it (and ran whatever it would run)."""
    profile = tmp_path / f"profile-{time.monotonic_ns()}"
    args = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1000"]
    r = subprocess.run(args + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "<html" in r.stdout, r.stderr[-2000:]
    return Dom(r.stdout)


def test_the_overview_shows_the_verdict_and_every_night(project, ui, tmp_path):
    cfg_path, cfg, nights = project
    from dualpath.viewer.headline import headline
    h = headline(cfg)       # glance's headline where it exists, else the metric tables'
    dom = browse(ui + "/", tmp_path)
    assert dom.texts("verdict") == [h.verdict] and h.verdict
    assert dom.texts("interchange") == ([h.interchange] if h.interchange else [])
    assert dom.texts("lines")[0].splitlines() == list(h.lines)
    from dualpath.flows.prereg import study
    assert h.verdict == study(cfg).verdict.verdict          # prereg's primary verdict
    for night in nights:
        assert any(tag == "a" and text == str(night) for tag, _, text in dom.elements)
    # every run complete; one the machine starved (a loaded CI runner) is still complete, and
    # marked as no speed with its reason
    left = dom.texts("st-left")
    assert all(" · not a speed: " in t for t in left), left
    assert sorted(dom.texts("st-complete") + [t.split(" · ")[0] for t in left]) == \
        ["complete"] * 2 * len(nights)
    apart = dict(rows(cfg, """
        WITH m AS (SELECT night, ticker, avg(grade) FILTER (WHERE path = 'backup')
                          - avg(grade) FILTER (WHERE path = 'main') AS gap
                   FROM units GROUP BY ALL)
        SELECT night::VARCHAR, count(*) FILTER (WHERE abs(gap) >= 1) FROM m GROUP BY 1"""))
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as c:
        html = c.get("/").text
    for night in nights:     # each night's disagreements, linked to that filter
        assert re.findall(rf'href="/night/{night}\?only=disagree">(\d+)<', html) == \
            [str(apart[str(night)])]


def test_a_night_page_lists_every_ticker_with_both_paths_grades(project, ui, tmp_path):
    _, cfg, nights = project
    dom = browse(ui + night_url("", nights[0]), tmp_path)
    links = [text for tag, _, text in dom.elements if tag == "a" and text in cfg.tickers()]
    assert sorted(links) == sorted(cfg.tickers())
    # each row shows both paths' grades of both draws (a grade badge each)
    graded = rows(cfg, "SELECT count(*) FROM units WHERE night = ? AND grade IS NOT NULL",
                  nights[0])[0][0]
    badges = [t for _, classes, t in dom.elements if "g" in classes and "gx" not in classes]
    assert len(badges) == graded == 2 * 2 * len(cfg.tickers())


def test_a_ticker_page_shows_both_paths_grades_and_the_17_calls(project, ui, tmp_path):
    _, cfg, nights = project
    ticker = cfg.tickers()[0]
    dom = browse(ui + ticker_url("", nights[0], ticker), tmp_path)
    grades = dict(((p, d), g) for p, d, g in rows(
        cfg, "SELECT path, draw, grade FROM units WHERE night = ? AND ticker = ?",
        nights[0], ticker))
    draws = [t for tag, classes, t in dom.elements if tag == "table" and "draws" in classes]
    assert len(draws) == 2                       # one draws table per path, side by side
    for table, path in zip(draws, ["main", "backup"]):
        assert re.findall(r"draw (\d)\s*(\d)", table) == [(str(d), str(grades[path, d]))
                                                          for d in (1, 2)]
    calls = dom.texts("call")
    assert len(calls) == 2 * 17
    agents = [t for _, classes, t in dom.elements if "agent" in classes]
    assert [a.split()[0] for a in agents] == [a for a in AGENTS for _ in range(2)]


def test_a_model_answer_holding_a_script_renders_as_text(project, ui, tmp_path):
    _, cfg, nights = project
    ticker = cfg.tickers()[1]
    stored = rows(cfg, "SELECT t.text FROM calls c JOIN texts t ON t.hash = c.output_hash "
                       "WHERE c.night = ? AND c.ticker = ? AND c.agent = ? AND c.draw = 1",
                  nights[0], ticker, AGENT)
    assert stored and all(SCRIPT in s for s, in stored)      # the model did answer with it
    dom = browse(ui + ticker_url("", nights[0], ticker), tmp_path)
    assert "script" not in dom.tags                            # no script element at all
    answers = [t for t in dom.texts("answer") if SCRIPT in t]
    assert len(answers) == 2                                   # shown, as text, on both paths
    assert "pwned" not in [t for tag, _, t in dom.elements if tag == "title"][0]


@pytest.fixture
def client(project):
    return TestClient(create_app(project[1]), base_url="http://127.0.0.1")


def test_pages_are_read_only_and_refuse_scripts(client, project):
    night = project[2][0]
    r = client.get(night_url("", night))
    assert r.status_code == 200 and r.headers["content-security-policy"] == CSP
    assert "script-src 'none'" in CSP
    assert client.post(night_url("", night)).status_code == 405
    assert client.get("/night/2001-01-01").status_code == 404
    assert client.get(ticker_url("", night, "NOPE")).status_code == 404
    assert client.get("/night/yesterday").status_code == 404


def test_the_night_table_sorts_and_filters(client, project):
    _, cfg, nights = project
    def order(**q):
        html = client.get(night_url("", nights[0]), params=q).text
        return re.findall(r'<td><a href="/night/[^"]+/(\w+)">', html)

    assert order(sort="ticker") == sorted(cfg.tickers())
    assert order(q=cfg.tickers()[2].lower()) == [cfg.tickers()[2]]
    gaps = dict(rows(cfg, """
        SELECT ticker, avg(grade) FILTER (WHERE path = 'backup')
                       - avg(grade) FILTER (WHERE path = 'main') FROM units
        WHERE night = ? GROUP BY ticker""", nights[0]))
    by_gap = sorted(gaps, key=lambda t: (-gaps[t], t))
    assert order(sort="gap") == by_gap
    assert order(sort="disagree") == sorted(gaps, key=lambda t: (abs(gaps[t]) < 1,
                                                                 -abs(gaps[t]), t))
    assert order(only="disagree") == [t for t in order() if abs(gaps[t]) >= 1]


def test_a_page_waits_out_an_ingest_holding_the_warehouse(client, project):
    _, cfg, nights = project
    db = cfg.resolve(cfg.warehouse.path)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from dualpath.warehouse.db import writer\n"
        f"with writer(Path({str(db)!r})):\n"
        "    print('locked', flush=True); time.sleep(1.5)\n"
        "print('released', flush=True)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        # asked while the writer holds the file: served once it lets go, not refused
        r = client.get(night_url("", nights[1]))
        assert r.status_code == 200 and cfg.tickers()[0] in r.text
        assert holder.stdout.readline().strip() == "released"
    finally:
        holder.wait(timeout=30)


def test_the_report_and_runs_link_each_night_to_its_page(project, client, tmp_path):
    cfg_path, cfg, nights = project
    base = "http://viewer.example:8765"
    linked = cfg_path.with_name("linked.toml")       # beside it: the same warehouse
    linked.write_text(cfg_path.read_text() + f'\n[ui]\nbase_url = "{base}/"\n')
    from dualpath.flows.weekly import write_report
    html, md, _ = write_report(load_config(linked), tmp_path / "report")
    html, md = html.read_text(), md.read_text()
    for night in nights:
        assert f'href="{base}/night/{night}"' in html
        assert f"[{night}]({base}/night/{night})" in md
        link = re.search(rf'href="{base}(/night/{night})"', html)[1]
        assert client.get(link).status_code == 200         # the link opens the night's page
    out = subprocess.run([sys.executable, "-m", "dualpath", "runs", "-c", str(linked)],
                         capture_output=True, text=True, timeout=120).stdout
    assert f"in the viewer: {base}/night/{max(nights)}" in out
    import json
    runs = json.loads(subprocess.run([sys.executable, "-m", "dualpath", "runs", "-c",
                                      str(linked), "-f", "json"], capture_output=True,
                                     text=True, timeout=120).stdout)["runs"]
    assert {(r["night"][:10], r["ui_url"]) for r in runs} == \
        {(str(n), f"{base}/night/{n}") for n in nights}
    # without a base URL, neither says anything of the viewer
    html, md, _ = write_report(cfg, tmp_path / "plain")
    assert "/night/" not in html.read_text() + md.read_text()


def test_thinking_kept_apart_is_shown_apart_and_as_text(project, tmp_path):
    _, cfg, nights = project
    copy = tmp_path / "thinking.duckdb"
    shutil.copy(cfg.resolve(cfg.warehouse.path), copy)
    thought = "Let me weigh it. </pre><script>alert(1)</script> Done."
    with duckdb.connect(str(copy)) as con:   # as m015 stores it: a text by hash, tokens, basis
        con.execute("ALTER TABLE calls ADD COLUMN IF NOT EXISTS reasoning_hash UBIGINT")
        con.execute("ALTER TABLE calls ADD COLUMN IF NOT EXISTS reasoning_tokens INTEGER")
        con.execute("ALTER TABLE calls ADD COLUMN IF NOT EXISTS reasoning_tokens_basis VARCHAR")
        con.execute("INSERT INTO texts SELECT hash(?), ?", [thought, thought])
        con.execute("UPDATE calls SET reasoning_hash = hash(?), reasoning_tokens = 12, "
                    "reasoning_tokens_basis = 'chars' WHERE night = ? AND ticker = ? AND "
                    "draw = 1 AND agent = 'trader'", [thought, nights[0], cfg.tickers()[0]])
    with TestClient(create_app(cfg, copy), base_url="http://127.0.0.1") as c:
        html = c.get(ticker_url("", nights[0], cfg.tickers()[0])).text
    dom = Dom(html)
    shown = [t for _, classes, t in dom.elements if "thinking" in classes]
    assert len(shown) == 2 and all(thought in t and "12 tokens (estimated from its characters)" in t for t in shown)
    assert "script" not in dom.tags
    answers = dom.texts("answer")
    assert len(answers) == 34 and not any(thought in a for a in answers)


def test_a_warehouse_without_nights_shows_what_is_missing(tmp_path):
    _, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)     # prices, no night
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as c:
        r = c.get("/")
    assert r.status_code == 200 and "no nights yet" in r.text
    assert Dom(r.text).texts("verdict") == ["—"]


def test_a_port_in_use_is_refused_in_one_line(project):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "dualpath", "ui", "-c", str(project[0]),
                            "--port", str(port)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr


def test_prompts_rebuilt_from_answers_already_read_are_the_prompts_as_sent(tmp_path):
    """A ticker page reads the unit's answers once and hands them to `prompt_texts`, which
    rebuilds the prompts quoting them from those (quotes, backslashes, é included)."""
    from tests.test_prompt_parts import write_quoting_unit
    from dualpath.warehouse.ingest import ingest_journal
    from dualpath.warehouse.migrations import migrate
    from dualpath.warehouse.prompts import prompt_texts
    from dualpath.warehouse.viewer import texts

    prompts, answers = write_quoting_unit(tmp_path / "j.jsonl")
    with duckdb.connect() as con:
        migrate(con)
        ingest_journal(con, tmp_path / "j.jsonl")
        hashes, outputs = zip(*con.execute("SELECT prompt_hash, output_hash FROM calls "
                                           "ORDER BY call_seq").fetchall())
        assert con.execute("SELECT count(*) FROM quotes").fetchone()[0] == 2
        read = texts(con, outputs)
        assert sorted(read.values()) == sorted(answers + ["short"])
        rebuilt = prompt_texts(con, hashes, read)
        assert [rebuilt[h] for h in hashes] == prompts


def test_a_rescored_unit_shows_its_earlier_attempt_and_its_calls(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=4, draws=2, nights=1)
    with SimFleet(cfg) as fleet:       # cut short after the first unit (others mid-way), rerun
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls, stop_after_units=1))
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    # which draw was mid-way depends on how far the paths got before the cut (the journal
    # writes a batch of records at a time): the first draw of either path that was
    cut = rows(cfg, """WITH d AS (SELECT min(draw) AS draw FROM units
                                  WHERE unit_attempt = 1 AND outcome = 'abandoned')
                       SELECT u.path, u.ticker, count(c.call_id), any_value(u.draw) FROM units u
                       LEFT JOIN calls c USING (run_id, ticker, draw, unit_attempt)
                       WHERE u.unit_attempt = 1 AND u.outcome = 'abandoned'
                         AND u.draw = (SELECT draw FROM d)
                       GROUP BY u.path, u.ticker ORDER BY ALL""")
    assert cut, "the cut night left no unit mid-way"
    path, ticker, n, draw = cut[0]
    cut = [(p, t, k) for p, t, k, _ in cut]
    with TestClient(create_app(cfg), base_url="http://127.0.0.1") as c:
        html = c.get(ticker_url("", nights[0], ticker, draw)).text
    dom = Dom(html)
    assert f"{path}: earlier attempts of draw {draw}" in html
    earlier = {path for path, t, k in cut if t == ticker and k}
    assert len(dom.texts("earlier")) == len(earlier)
    assert any(t.startswith(f"attempt 1: {n} call(s)") for t in dom.texts("earlier"))
    assert len(dom.texts("answer-earlier")) == sum(k for _, t, k in cut if t == ticker)
    assert "attempt 1: abandoned" in html                 # in the draws table too
    assert len(dom.texts("call")) == 2 * 17              # the final attempts, side by side


def test_call_marks_say_why():
    from types import SimpleNamespace
    from dualpath.viewer.pages import call_marks
    call = SimpleNamespace(finish_reason="length", contaminated="model 'x' != 'y'", attempts=3,
                           attempt_errors='[{"kind": "reset"}, {"kind": "http_503"}]',
                           error_kind=None, error_detail=None)
    assert call_marks(call) == [
        ("runaway", "stopped at max_tokens (finish_reason = length)"),
        ("contaminated", "model 'x' != 'y'"),
        ("retried ×2", '[{"kind": "reset"}, {"kind": "http_503"}]')]
    clean = SimpleNamespace(finish_reason="stop", contaminated=None, attempts=1,
                            attempt_errors=None, error_kind="timeout", error_detail="read 600 s")
    assert call_marks(clean) == [("failed", "timeout: read 600 s")]
