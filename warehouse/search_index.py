"""The index behind the viewer's search of answers (`warehouse.viewer.search_answers`).

Every answer (a text that is some call's output) is cut into its words: the maximal runs of
letters, marks, digits and `_` of its lowercased text (`TOKENS`, so Korean words are words
and "FINAL GRADE: 5" is three). Each distinct word is a row of `search_terms`, each answer
a row of `search_docs` (a small integer for its hash, so the postings stay small), and
`search_postings` holds (word, answer) for every word an answer has, sorted by word within
each ingest, so a lookup reads the few row groups of its words only.

It gives exactly the answers the scan gives (`text ILIKE '%q%'`, which lowercases both
sides): a query of one word matches an answer iff some word of the answer contains it; a
query of several words (or with punctuation) narrows the answers to those having, word for
word, a word that ends with its first word, equals each middle one and starts with its last
(a word with punctuation on both sides is equal, on neither side contained), and each
candidate is then checked with that ILIKE, newest night first, until enough are found.

Rows are written in the transaction that stores the answers (`index_new_answers` from
ingest), never twice (an answer indexed already is skipped); m023 indexes the answers a
warehouse already holds (`build_search_index`), and a rebuild gets it from its ingest.

On six weeks of `bench/search.py`'s answers (428k, 2.4 GB; each search on its own
connection, as the page's): a common word 0.15 s (reading every answer: 7.9 s), a word no
answer has 0.05 s (5.8 s), a rare two-word phrase 0.56 s (6.4 s), two common words never
side by side 6.1 s (6.3 s: every candidate is checked). It costs 4.7 CPU s per night of
10,200 answers at ingest (the regex split and its de-duplication most of it) and 706 MB
(2 bytes a posting) on the 1.7 GB file; m023 took 53 CPU s for a quarter of it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import duckdb

from dualpath.warehouse.prompts import _texts
from dualpath.warehouse.quoting import literal

WORD = r"\p{L}\p{M}\p{N}_"
SEPARATOR = f"[^{WORD}]+"
# an answer's distinct lowercased words (empty ones, at a text's start or end, dropped later)
TOKENS = f"list_distinct(string_split_regex(lower(text), '{SEPARATOR}'))"

M023_SEARCH = """
CREATE TABLE IF NOT EXISTS search_terms (term_id INTEGER NOT NULL, term VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS search_docs (doc_id INTEGER NOT NULL, hash UBIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS search_postings (term_id INTEGER NOT NULL, doc_id INTEGER NOT NULL);
"""
TABLES = ("search_terms", "search_docs", "search_postings")
DICTIONARY = {
    "search_terms": ("a distinct word of the answers, lowercased (the search's index)", {
        "term_id": "id — the word in search_postings", "term": "text — the word"}),
    "search_docs": ("an answer the search's index holds (each once)", {
        "doc_id": "id — the answer in search_postings",
        "hash": "hash → texts: the answer (calls.output_hash)"}),
    "search_postings": ("a word an answer has (each pair once, sorted by word per ingest)", {
        "term_id": "id → search_terms", "doc_id": "id → search_docs"}),
}
_STAGES = ("stage_answers", "stage_docs", "stage_tokens", "stage_terms")

# rows of texts read per step while m023 indexes a warehouse's answers (memory stays flat)
BUILD_ROWS = 20_000
# answers past which m023 says how far it is, on stderr, every PROGRESS_S
PROGRESS_ANSWERS, PROGRESS_S = 20_000, 5.0


def _index(con: duckdb.DuckDBPyConnection, source: str) -> int:
    """Index the answers `source` selects (hash, text; each hash once) not indexed yet;
    returns how many. Runs inside the caller's transaction."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE stage_answers AS {source}")
    try:
        n = con.execute("""
            CREATE OR REPLACE TEMP TABLE stage_docs AS
            WITH known AS (SELECT hash FROM search_docs
                           WHERE hash IN (SELECT hash FROM stage_answers))
            SELECT (SELECT coalesce(max(doc_id), 0) FROM search_docs)
                       + row_number() OVER (ORDER BY rowid) AS doc_id, hash, text
            FROM stage_answers WHERE hash NOT IN (SELECT hash FROM known)""").fetchone()[0]
        if not n:
            return 0
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE stage_tokens AS
            SELECT doc_id, term FROM (SELECT doc_id, unnest({TOKENS}) AS term FROM stage_docs)
            WHERE term <> ''""")
        con.execute("CREATE OR REPLACE TEMP TABLE stage_terms AS "
                    "SELECT DISTINCT term FROM stage_tokens")
        con.execute("""
            INSERT INTO search_terms
            WITH known AS (SELECT term FROM search_terms
                           WHERE term IN (SELECT term FROM stage_terms))
            SELECT (SELECT coalesce(max(term_id), 0) FROM search_terms)
                       + row_number() OVER (ORDER BY term), term
            FROM stage_terms WHERE term NOT IN (SELECT term FROM known)""")
        con.execute("""
            INSERT INTO search_postings
            SELECT t.term_id, s.doc_id FROM stage_tokens s
            JOIN (SELECT term_id, term FROM search_terms
                  WHERE term IN (SELECT term FROM stage_terms)) t USING (term)
            ORDER BY t.term_id, s.doc_id""")
        con.execute("INSERT INTO search_docs SELECT doc_id, hash FROM stage_docs")
        return n
    finally:
        for t in _STAGES:
            con.execute(f"DROP TABLE IF EXISTS {t}")


def index_new_answers(con: duckdb.DuckDBPyConnection) -> int:
    """Index the answers of the staged calls (`stage_calls` of an ingest) not indexed yet,
    inside the ingest's transaction."""
    return _index(con, """
        SELECT output_hash AS hash, output_text AS text FROM stage_calls
        WHERE rowid IN (SELECT min(rowid) FROM stage_calls WHERE output_text IS NOT NULL
                        GROUP BY output_hash)""")


def build_search_index(con: duckdb.DuckDBPyConnection) -> None:
    """m023: the index's tables, and every answer the warehouse holds indexed, a range of
    texts at a time; says how far it is on stderr when there are many. Inside the
    migration's transaction: a build cut short leaves nothing, and the next writer builds
    it again."""
    from dualpath.warehouse.ingest import _memory_capped

    con.execute(M023_SEARCH)
    con.execute("CREATE OR REPLACE TEMP TABLE stage_answer_hashes AS SELECT DISTINCT "
                "output_hash AS hash FROM calls WHERE output_hash IS NOT NULL")
    try:
        total = con.execute("SELECT count(*) FROM stage_answer_hashes").fetchone()[0]
        last = con.execute("SELECT max(rowid) FROM texts").fetchone()[0]
        if not total or last is None:
            return
        loud, said, done = total >= PROGRESS_ANSWERS, time.monotonic(), 0
        with _memory_capped(con):
            for lo in range(0, last + 1, BUILD_ROWS):
                done += _index(con, f"""
                    SELECT hash, text FROM texts
                    WHERE rowid BETWEEN {lo} AND {lo + BUILD_ROWS - 1}
                      AND hash IN (SELECT hash FROM stage_answer_hashes)""")
                if loud and time.monotonic() - said >= PROGRESS_S:
                    said = time.monotonic()
                    sys.stderr.write(f"indexing the stored answers for search: {done:,} of "
                                     f"{total:,}\n")
        if loud:
            sys.stderr.write(f"indexed {done:,} stored answers for search\n")
    finally:
        con.execute("DROP TABLE IF EXISTS stage_answer_hashes")


def like_pattern(text: str) -> str:
    """`text` as an ILIKE pattern matching it anywhere, its own % _ and \\ taken literally."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


@dataclass(frozen=True)
class Lookup:
    words: tuple[tuple[str, str], ...]    # (how a word of the answer must hold it, word)
    exact: bool                           # one word, nothing around it: no check needed


def lookup(con: duckdb.DuckDBPyConnection, text: str) -> Lookup | None:
    """How the index answers `text`; None when it cannot (no letter, digit or `_`)."""
    parts = con.execute(f"SELECT string_split_regex(lower($q), '{SEPARATOR}')",
                        {"q": text}).fetchone()[0]
    last = len(parts) - 1
    words = tuple((("equals" if 0 < i < last else "starts_with") if i > 0 else
                   ("ends_with" if i < last else "contains"), w)
                  for i, w in enumerate(parts) if w)
    return Lookup(words, last == 0) if words else None


# term ids passed as a literal list up to this many (else as the subquery that found them)
_LITERAL_IDS = 2000
_TEST = {"equals": "term = {}", "starts_with": "starts_with(term, {})",
         "ends_with": "ends_with(term, {})", "contains": "contains(term, {})"}


def _docs_sql(con: duckdb.DuckDBPyConnection, found: Lookup) -> str | None:
    """SQL of the candidate answers' hashes; None when a word is in no answer at all."""
    selects = []
    for how, word in sorted(set(found.words)):
        test = _TEST[how].format(literal(word))
        ids = [i for i, in con.execute(
            f"SELECT term_id FROM search_terms WHERE {test} LIMIT {_LITERAL_IDS + 1}").fetchall()]
        if not ids:
            return None
        where = (",".join(map(str, ids)) if len(ids) <= _LITERAL_IDS
                 else f"SELECT term_id FROM search_terms WHERE {test}")
        selects.append(f"SELECT doc_id FROM search_postings WHERE term_id IN ({where})")
    return ("SELECT hash FROM search_docs WHERE doc_id IN ("
            + " INTERSECT ".join(selects) + ")")


CALL_ROWS = """
    SELECT c.night, c.path, c.ticker, c.draw, c.unit_attempt, c.agent, c.call_seq,
           c.finish_reason, c.output_hash
    FROM calls c JOIN runs r USING (run_id)
    WHERE r.experiment = $exp AND ($path IS NULL OR c.path = $path) AND {where}
    ORDER BY c.night DESC, c.ticker, c.path, c.draw, c.unit_attempt, c.call_seq"""
_COLUMNS = ["night", "path", "ticker", "draw", "unit_attempt", "agent", "call_seq",
            "finish_reason", "output_hash"]
# candidates checked with ILIKE a window at a time, newest first (past the last window, the
# scan's own query on the candidates finishes the search)
_WINDOWS = (200, 800, 3200)


def find(con: duckdb.DuckDBPyConnection, found: Lookup, experiment: str, text: str,
         path: str | None, n: int):
    """The first `n` calls (in `CALL_ROWS`' order) whose answer holds `text`, found through
    the index: a DataFrame of the columns of `CALL_ROWS` plus `answer`."""
    import pandas as pd      # not at import: every writer imports this module (m023)

    docs = _docs_sql(con, found)
    if docs is None:
        return pd.DataFrame(columns=_COLUMNS + ["answer"])
    sql = CALL_ROWS.format(where=f"c.output_hash IN ({docs})")
    params = {"exp": experiment, "path": path}
    rows = con.execute(sql + " LIMIT $n", {**params, "n": n}).df() if found.exact else None
    test = f"text ILIKE {literal(like_pattern(text))} ESCAPE '\\'"
    kept, offset, holds = [], 0, {}
    for window in (() if found.exact else _WINDOWS):
        part = con.execute(sql + " LIMIT $w OFFSET $o", {**params, "w": window, "o": offset}).df()
        new = {int(h) for h in part["output_hash"]} - holds.keys()
        holds.update(_texts(con, new, test) if new else {})
        kept.append(part.loc[[bool(holds.get(int(h))) for h in part["output_hash"]]])
        if len(part) < window or sum(map(len, kept)) >= n:
            rows = pd.concat(kept).head(n)
            break
        offset += window
    if rows is None:
        rows = con.execute(CALL_ROWS.format(where=f"""c.output_hash IN (
            SELECT hash FROM texts WHERE hash IN ({docs}) AND {test})""") + " LIMIT $n",
                           {**params, "n": n}).df()
    answers = _texts(con, {int(h) for h in rows["output_hash"]})
    return rows.assign(answer=[answers[int(h)] for h in rows["output_hash"]])
