"""The answers' index (`warehouse.search_index`) finds exactly what reading every answer finds
(the ILIKE scan), on random queries over a seeded warehouse of mixed-case, Korean, accented
and punctuated answers; it is built by ingest and by m023 alike, never twice, and a search
it cannot answer reads every answer and says so."""

from __future__ import annotations

import random
from datetime import date, timedelta

import duckdb
import pytest

from dualpath.warehouse import search_index
from dualpath.warehouse.db import transaction, writer
from dualpath.warehouse.migrations import migrate
from dualpath.warehouse.viewer import search_answers

WORDS = ["Evidence", "evidence", "EVIDENCE", "margin", "margins", "re-rating", "FINAL",
         "GRADE", "삼성전자", "삼성전자의", "매출이", "증가했다", "영업이익", "하락", "Straße",
         "STRASSE", "İstanbul", "ΣΊΣΥΦΟΣ", "café", "cafe\u0301", "100%", "50_50", "a\\b",
         "x_y", "naïve", "Ünïcode", "q1", "2027", "3.5", "v2_final", "日本", "ＡＢＣ", "🙂",
         "don't", "e.g.", "—", "TICKER:"]
SEPARATORS = [" ", " ", " ", ", ", ". ", "\n", ": ", " (", ") ", "-", " / ", "\t", "; "]
NIGHTS = [date(2027, 3, 1) + timedelta(days=i) for i in range(3)]


def answer(rng: random.Random) -> str:
    out = []
    for _ in range(rng.randint(0, 30)):
        out += [rng.choice(WORDS), rng.choice(SEPARATORS)]
    return "".join(out[:-1])


def seed(con: duckdb.DuckDBPyConnection, rng: random.Random) -> None:
    """3 nights x 2 paths of calls; some answers shared by several calls, some texts no
    call's answer. The first two nights indexed as m023 does on an existing warehouse, the
    third as ingest does."""
    answers = [answer(rng) for _ in range(240)] + [""]
    con.execute("CREATE TEMP TABLE a AS SELECT DISTINCT unnest($a) AS text", {"a": answers})
    con.execute("INSERT INTO texts SELECT hash(text), text FROM a")
    con.execute("INSERT INTO texts SELECT hash(t), t FROM (SELECT 'prompt: evidence 삼성전자' "
                "AS t)")            # not an answer: never found
    calls = []
    for ni, night in enumerate(NIGHTS):
        for path in ("main", "backup"):
            con.execute("INSERT INTO runs (run_id, experiment, night, path, config_hash, "
                        "status) VALUES (?, 'e', ?, ?, 'h', 'complete')",
                        [f"r{ni}{path}", night, path])
            for t in range(6):
                for seq in range(1, 8):
                    text = rng.choice(answers[ni * 80: ni * 80 + 100])
                    calls.append([f"c{len(calls)}", f"r{ni}{path}", night, path, f"T{t}", 1,
                                  1, f"agent{seq}", seq, "stop", text, ni])
    con.execute("CREATE TEMP TABLE c (call_id VARCHAR, run_id VARCHAR, night DATE, "
                "path VARCHAR, ticker VARCHAR, draw INTEGER, unit_attempt INTEGER, "
                "agent VARCHAR, call_seq INTEGER, finish_reason VARCHAR, text VARCHAR, "
                "n INTEGER)")
    con.executemany("INSERT INTO c VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", calls)
    cols = "call_id, run_id, night, path, ticker, draw, unit_attempt, agent, call_seq, " \
           "finish_reason"
    con.execute(f"INSERT INTO calls ({cols}, output_hash) SELECT {cols}, hash(text) FROM c "
                "WHERE n < 2")
    # a call without an answer: its hash names no text
    con.execute(f"INSERT INTO calls ({cols}, output_hash) VALUES ('none', 'r0main', "
                "DATE '2027-03-01', 'main', 'T9', 1, 1, 'agent1', 1, 'error', 42)")
    with transaction(con):
        search_index.build_search_index(con)
    with transaction(con):
        con.execute("CREATE TEMP TABLE stage_calls AS SELECT *, hash(text) AS output_hash, "
                    "text AS output_text FROM c WHERE n = 2")
        assert search_index.index_new_answers(con) > 0
        con.execute(f"INSERT INTO calls ({cols}, output_hash) SELECT {cols}, output_hash "
                    "FROM stage_calls")
        con.execute("DROP TABLE stage_calls")


@pytest.fixture(scope="module")
def con(tmp_path_factory):
    with writer(tmp_path_factory.mktemp("search") / "w.duckdb") as con:
        seed(con, random.Random(33))
        yield con


def queries(con: duckdb.DuckDBPyConnection, rng: random.Random, n: int) -> list[str]:
    """Pieces of stored answers (any length, across punctuation, case flipped here and
    there) and strings made up of the answers' characters."""
    texts = [t for t, in con.execute("SELECT text FROM texts WHERE length(text) > 3")
             .fetchall()]
    chars = sorted(set("".join(texts)) | set("%_\\'"))
    out = ["%", "_s", "%_", "\\", "a\\b", "100%", "x_y", "50_5", "--", ". ", "  ", "ß", "SS",
           "삼성", "전자의 매", "e.g.", "don't", "é", "ΣΟΣ", "σος", "i̇s", "İs", "🙂", ": ("]
    while len(out) < n:
        if rng.random() < 0.7:
            t = rng.choice(texts)
            i = rng.randrange(len(t))
            q = t[i:i + rng.randint(1, 14)]
            q = "".join(c.swapcase() if rng.random() < 0.2 else c for c in q)
        else:
            q = "".join(rng.choice(chars) for _ in range(rng.randint(1, 4)))
        out.append(q)
    return out


def both(con, q, path=None, limit=10_000):
    fast = search_answers(con, "e", q, path, limit)
    scan = search_answers(con, "e", q, path, limit, index=False)
    return fast, scan


def test_the_index_finds_exactly_what_the_scan_finds(con):
    rng = random.Random(7)
    used = {"index": 0, "scan": 0}
    found = 0
    for q in queries(con, rng, 400):
        path = rng.choice([None, None, "main", "backup"])
        fast, scan = both(con, q, path)
        assert fast.rows.to_dict("records") == scan.rows.to_dict("records"), (q, path)
        used["scan" if fast.without_index else "index"] += 1
        found += len(scan.rows) > 0
    assert used["index"] > 350 and used["scan"] > 0 and found > 200


def test_the_first_rows_are_the_scans_when_a_check_runs_past_its_windows(con, monkeypatch):
    """A query of several words is checked a window of candidates at a time, newest night
    first, then by the scan on the candidates: the first `limit` + 1 rows are the scan's."""
    monkeypatch.setattr(search_index, "_WINDOWS", (1, 3, 9))
    rng = random.Random(8)
    for q in queries(con, rng, 60):
        for limit in (0, 3, 40):
            fast, scan = both(con, q, limit=limit)
            assert fast.rows.to_dict("records") == scan.rows.to_dict("records"), (q, limit)


def test_korean_words_split_at_their_spaces_and_punctuation(con):
    got = search_index.lookup(con, "삼성전자의 매출이, 증가")
    assert got.words == (("ends_with", "삼성전자의"), ("equals", "매출이"),
                         ("starts_with", "증가")) and not got.exact
    assert search_index.lookup(con, "EVIDENCE") == search_index.Lookup(
        (("contains", "evidence"),), True)
    assert search_index.lookup(con, " x_y.") == search_index.Lookup((("equals", "x_y"),), False)
    assert search_index.lookup(con, "%") is None and search_index.lookup(con, " - ") is None
    terms = {t for t, in con.execute("SELECT term FROM search_terms").fetchall()}
    assert {"삼성전자의", "매출이", "증가했다", "straße", "x_y", "50_50", "q1"} <= terms
    assert not {t for t in terms if not t or " " in t or "," in t}


def test_each_answer_is_indexed_once_however_often_it_is_stored(con):
    docs = con.execute("SELECT count(*), count(DISTINCT hash), count(DISTINCT doc_id) "
                       "FROM search_docs").fetchone()
    answers = con.execute("SELECT count(DISTINCT output_hash) FROM calls WHERE output_hash "
                          "IN (SELECT hash FROM texts)").fetchone()[0]
    assert docs == (answers,) * 3
    twice = con.execute("SELECT count(*) FROM (SELECT term_id, doc_id FROM search_postings "
                        "GROUP BY ALL HAVING count(*) > 1)").fetchone()[0]
    terms = con.execute("SELECT count(*) - count(DISTINCT term) FROM search_terms").fetchone()
    assert twice == 0 and terms == (0,)
    postings = con.execute("SELECT count(*) FROM search_postings").fetchone()[0]
    with transaction(con):                # m023 again, on a warehouse already indexed
        search_index.build_search_index(con)
    assert con.execute("SELECT count(*) FROM search_postings").fetchone()[0] == postings


def test_a_warehouse_from_before_the_index_is_searched_by_scan_then_indexed(
        tmp_path, monkeypatch, capsys):
    path = tmp_path / "old.duckdb"
    with writer(path) as con:
        seed(con, random.Random(3))
        expected = search_answers(con, "e", "evidence", limit=1000, index=False).rows
        for t in search_index.TABLES:
            con.execute(f"DROP TABLE {t}")
        con.execute("DELETE FROM schema_migrations WHERE name = 'm023_search_index'")
    with duckdb.connect(str(path), read_only=True) as con:       # as the viewer reads it
        before = search_answers(con, "e", "evidence", limit=1000)
    assert before.without_index.startswith("this warehouse has no index of its answers yet")
    # m023 says how far it is when there are many answers (here: a step of 100 rows)
    monkeypatch.setattr(search_index, "PROGRESS_ANSWERS", 1)
    monkeypatch.setattr(search_index, "PROGRESS_S", 0.0)
    monkeypatch.setattr(search_index, "BUILD_ROWS", 100)
    with duckdb.connect(str(path)) as con:
        assert migrate(con) == ["m023_search_index"]
        after = search_answers(con, "e", "evidence", limit=1000)
        answers = con.execute("SELECT count(*) FROM search_docs").fetchone()[0]
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("indexing the stored answers for search: ")
    assert said[-1] == f"indexed {answers:,} stored answers for search" and len(said) >= 3
    assert after.without_index is None and len(expected) > 50
    assert after.rows.to_dict("records") == before.rows.to_dict("records") \
        == expected.to_dict("records")
