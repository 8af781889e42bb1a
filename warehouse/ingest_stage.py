"""Staging a batch of journals' bulk lines in temp tables, for `warehouse.ingest`: call lines
read by DuckDB's JSON reader (`stage_calls`), prompts as lists of part hashes and the parts'
texts (`stage_prompts`), quoted answers checked (`check_quotes`), each new text stored once
(`insert_texts`). A line the reader cannot read is a damaged journal, named with its repair.
"""

from __future__ import annotations

from dataclasses import fields

import duckdb

from dualpath.errors import DataError
from dualpath.records import CallRecord
from dualpath.warehouse.ingest_numbers import CHECKED, checked_columns
from dualpath.warehouse.journal import JournalContents, repair_hint
from dualpath.warehouse.line_limit import DEFAULT_OBJECT_BYTES, READ_OBJECT_BYTES

_SQL_TYPE = {"str": "VARCHAR", "int": "BIGINT", "float": "DOUBLE"}
CALL_COLUMNS = {"k": "VARCHAR", **{
    f.name: _SQL_TYPE[str(f.type).split(" | ")[0]] for f in fields(CallRecord)},
    # the journal's own fields of a call line (prompts as parts)
    "prompt_hash": "UBIGINT", "prompt_parts": "BIGINT[]"}
# a server's numbers are read as the text journaled, then checked (warehouse.ingest_numbers)
_READ_AS = {**CALL_COLUMNS, **{f: "VARCHAR" for f in CHECKED}}
_COLUMNS_SQL = "{" + ", ".join(f"'{k}': '{v}'" for k, v in _READ_AS.items()) + "}"


def stage_calls(con: duckdb.DuckDBPyConnection, contents: list[JournalContents]) -> None:
    """Parse every journal's call lines into a temp table, keeping only calls not yet stored."""
    files = [str(jc.path) for jc in contents if jc.call_lines]
    con.execute("CREATE OR REPLACE TEMP TABLE stage_runs (run_id VARCHAR, night DATE, lines BIGINT)")
    con.executemany("INSERT INTO stage_runs VALUES (?, ?, ?)",
                    [[jc.begins[-1]["run_id"], jc.begins[-1]["night"], jc.call_lines]
                     for jc in contents if jc.call_lines])
    # a call line with parts brings its prompt's hash; an older one its whole prompt
    for i, (group, size) in enumerate(json_reads(contents, files)):
        con.execute(("CREATE OR REPLACE TEMP TABLE stage_calls AS" if i == 0 else
                     "INSERT INTO stage_calls") + f"""
            SELECT * EXCLUDE (k, prompt_hash, untrusted, {", ".join(CHECKED)}),
                   {checked_columns()},
                   CASE WHEN prompt_parts IS NULL THEN hash(prompt_text) ELSE prompt_hash END
                       AS prompt_hash,
                   hash(output_text) AS output_hash, hash(request_json) AS request_hash,
                   -- the thinking, stored apart from the answer (m018); none: NULL
                   CASE WHEN reasoning_text <> '' THEN hash(reasoning_text) END
                       AS reasoning_hash,
                   end_mono - start_mono AS latency_s, first_token_mono - start_mono AS ttft_s
            FROM read_json(?, format = 'newline_delimited', columns = {_COLUMNS_SQL},
                           ignore_errors = true, maximum_object_size = {size})
            WHERE k = 'call'""", [group])
    short = con.execute("""SELECT r.run_id, r.lines, count(s.call_id) FROM stage_runs r
                           LEFT JOIN stage_calls s USING (run_id) GROUP BY ALL
                           HAVING count(s.call_id) <> r.lines""").fetchall()
    if short:
        run_id, lines, read = short[0]
        path = next(jc.path for jc in contents if jc.begins[-1]["run_id"] == run_id)
        raise DataError(f"journal {path} of run {run_id}: {lines} call lines but {read} "
                        f"readable; a damaged line in the middle of the journal: "
                        f"{repair_hint(path)}")
    con.execute("DELETE FROM stage_calls WHERE call_id IN (SELECT call_id FROM calls "
                "WHERE run_id IN (SELECT run_id FROM stage_runs))")
    for jc in contents:
        # the identity watcher found another server: calls since its last good check are
        # suspect, though each looked right when it arrived
        for (lo, hi), problem, clock in jc.identity_lost_windows():
            end = f"end_{clock}"           # end_mono or end_wall: both columns of calls
            for table in ("stage_calls", "calls"):   # calls stored by a mid-night ingest too
                con.execute(f"UPDATE {table} SET contaminated = ? WHERE run_id = ? AND "
                            f"contaminated IS NULL AND {end} > ? AND {end} <= ?",
                            [problem, jc.begins[-1]["run_id"], lo, hi])


def json_reads(contents: list[JournalContents], files: list[str]) -> list[tuple[list[str], int]]:
    """How DuckDB reads these journals' lines: (files, maximum_object_size) per query.

    DuckDB's JSON reader buffers twice `maximum_object_size` per file it reads at once
    (seen: 2 journals at 256 MiB failed to allocate 512 MiB under the 1 GB cap), so journals
    of ordinary lines are read together at DuckDB's default, and each one holding a long
    line (a huge answer) alone, at a size just above that line."""
    longest = {str(jc.path): jc.longest_line for jc in contents}
    small = [f for f in files if longest.get(f, 0) < DEFAULT_OBJECT_BYTES]
    out = [(small, DEFAULT_OBJECT_BYTES)] if small else []
    for f in files:
        if longest.get(f, 0) >= DEFAULT_OBJECT_BYTES:
            out.append(([f], min(READ_OBJECT_BYTES, longest[f] + 2**20)))
    return out


def stage_prompts(con: duckdb.DuckDBPyConnection, contents: list[JournalContents]) -> None:
    """The prompts of the staged calls not yet stored, as lists of part hashes, and the texts
    of their parts (stage_parts). Raises when a call refers to a part its journal lacks."""
    con.execute("""
        CREATE OR REPLACE TEMP TABLE stage_prompts AS
        WITH known AS (SELECT prompt_hash FROM prompts
                       WHERE prompt_hash IN (SELECT prompt_hash FROM stage_calls))
        SELECT prompt_hash, any_value(prompt_parts) AS keys FROM stage_calls
        WHERE prompt_parts IS NOT NULL AND prompt_hash NOT IN (SELECT prompt_hash FROM known)
        GROUP BY prompt_hash""")
    con.execute("""CREATE OR REPLACE TEMP TABLE stage_refs AS
                   SELECT p.prompt_hash, u.key, u.seq FROM stage_prompts p,
                   unnest(p.keys) WITH ORDINALITY AS u(key, seq)""")
    files = [str(jc.path) for jc in contents if jc.part_lines]
    con.execute("CREATE OR REPLACE TEMP TABLE stage_parts "
                "(key BIGINT, hash UBIGINT, text VARCHAR, quote UBIGINT)")
    if files and con.execute("SELECT count(*) FROM stage_refs").fetchone()[0]:
        # a part that quotes an answer brings its own hash and the answer's, no text
        for group, size in json_reads(contents, files):
            con.execute("""
                INSERT INTO stage_parts
                SELECT key, CASE WHEN quote IS NULL THEN hash(text) ELSE hash END, text, quote
                FROM read_json(?, format = 'newline_delimited', ignore_errors = true,
                               maximum_object_size = """ + str(size) + """,
                               columns = {'k': 'VARCHAR', 'key': 'BIGINT', 'text': 'VARCHAR',
                                          'hash': 'UBIGINT', 'quote': 'UBIGINT'})
                WHERE k = 'part' AND key IN (SELECT key FROM stage_refs)""", [group])
    missing = con.execute("SELECT count(*) FROM stage_refs WHERE key NOT IN "
                          "(SELECT key FROM stage_parts)").fetchone()[0]
    if missing:
        raise DataError(f"journals {', '.join(str(jc.path) for jc in contents)}: {missing} "
                        "prompt part(s) referred to but not readable; a damaged line in the "
                        f"middle of a journal: {repair_hint('JOURNAL')}")
    con.execute("""
        INSERT INTO prompts
        SELECT r.prompt_hash, list(m.hash ORDER BY r.seq) FROM stage_refs r
        JOIN (SELECT DISTINCT key, hash FROM stage_parts) m USING (key)
        GROUP BY r.prompt_hash""")
    con.execute("""
        INSERT INTO quotes
        WITH known AS (SELECT hash FROM quotes
                       WHERE hash IN (SELECT hash FROM stage_parts WHERE quote IS NOT NULL))
        SELECT DISTINCT hash, quote FROM stage_parts
        WHERE quote IS NOT NULL AND hash NOT IN (SELECT hash FROM known)""")


def check_quotes(con: duckdb.DuckDBPyConnection, contents: list[JournalContents]) -> None:
    """Every quoted answer is stored (its call line comes before any prompt quoting it)."""
    missing = con.execute("""
        WITH q AS (SELECT DISTINCT quote FROM stage_parts WHERE quote IS NOT NULL)
        SELECT count(*) FROM q WHERE quote NOT IN (
            SELECT hash FROM texts WHERE hash IN (SELECT quote FROM q))""").fetchone()[0]
    if missing:
        raise DataError(f"journals {', '.join(str(jc.path) for jc in contents)}: {missing} "
                        "quoted answer(s) not found; a damaged line in the middle of a journal: "
                        f"{repair_hint('JOURNAL')}")


def insert_texts(con: duckdb.DuckDBPyConnection, table: str, hash_col: str, text_col: str,
                  where: str = "TRUE") -> None:
    """Store each new text once. Deduplicate on (hash, rowid) integers first, then move each
    text once: grouping the long strings themselves was the slowest step of a bulk ingest.
    The stored hashes are matched against the staged ones (a small hash table), never the
    other way round: that table would grow with the warehouse."""
    con.execute(f"""
        INSERT INTO texts
        WITH known AS (SELECT hash FROM texts
                       WHERE hash IN (SELECT {hash_col} FROM {table}))
        SELECT {hash_col}, {text_col} FROM {table}
        WHERE rowid IN (SELECT min(rowid) FROM {table} WHERE {text_col} IS NOT NULL
                        AND {where} GROUP BY {hash_col})
          AND {hash_col} NOT IN (SELECT hash FROM known)""")
