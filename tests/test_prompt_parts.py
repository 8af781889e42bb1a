"""Prompts as parts: journaled once per writer, stored once, read back byte for byte.

A real prompt is ~33 KB of JSON whose sections (ticker context, documents, earlier answers)
repeat across a unit's 17 calls; the journal and the warehouse keep each distinct part once.
"""

import dataclasses

import duckdb
import orjson
import pytest

from dualpath.errors import DataError
from dualpath.records import CallRecord, RunBegin, RunEnd, UnitResult, UnitStart
from dualpath.warehouse.ingest import ingest_journal, ingest_journals
from dualpath.warehouse.journal import JournalWriter, encode, prompt_parts, read_journal
from dualpath.warehouse.migrations import MIGRATIONS, migrate
from dualpath.warehouse.prompts import cut_quoted, prompt_texts

CONTEXT = "TICKER: AAA | AS OF: 2027-01-04\n\nAdjusted closes:\n" + "\n".join(
    f"2026-12-{d:02d},{100 + d}.00" for d in range(1, 29)) + "\n\nDocuments:\nQ3 revenue ±3% — “guidance” \\ kept\n\nnew plant"


def messages(agent: str, *sections: str) -> str:
    """The JSON text of a call's messages, exactly as dualpath.client records it."""
    return orjson.dumps([{"role": "system", "content": "You are on a committee."},
                         {"role": "user", "content": "\n\n".join((CONTEXT, *sections,
                                                                  f"Your role: {agent}"))}]).decode()


def call(i: int, prompt: str, ticker="AAA", run="r") -> CallRecord:
    return CallRecord(call_id=f"{run}-c{i}", run_id=run, path="p", ticker=ticker, draw=1,
                      unit_attempt=1, agent=f"a{i}", call_seq=i, start_wall=1.0 + i,
                      start_mono=1.0, end_wall=2.0 + i, end_mono=2.0, prompt_text=prompt,
                      output_text=f"answer {i}\n\nsecond paragraph", request_json="{}")


def begin(run="r") -> RunBegin:
    return RunBegin(run, "e", "2027-01-04", "p", "sim", "h", 1, 1, 1, 4, 1.0, 1, 1.0)


def end(run="r") -> RunEnd:
    return RunEnd(run, 1, 1.0, 9.0, "complete", None, 1, 1, 3)


PROMPTS = [messages("data_summary", "Summarise."),
           messages("technical", "Data summary:\nanswer 1\n\nsecond paragraph", "Report."),
           messages("bull_1", "## technical\nanswer 2\n\nsecond paragraph", "Open the case.")]


def write_unit(path, prompts=PROMPTS, run="r", writer=None):
    w = writer or JournalWriter(path)
    w.write(begin(run))
    w.write(UnitStart(run, "p", "AAA", 1, 1, 1.0))
    for i, p in enumerate(prompts, 1):
        w.write(call(i, p, run=run))
    w.write(UnitResult(run, "p", "AAA", 1, 1, 1.0, 1.0, 9.0, 9.0, len(prompts), "graded", 3))
    w.write(end(run))
    if writer is None:
        w.close()


def stored_prompts(con) -> dict[int, str]:
    rows = con.execute("SELECT prompt_hash, prompt_text FROM v_prompts WHERE prompt_hash IN "
                       "(SELECT prompt_hash FROM calls)").fetchall()
    assert len(rows) == len({h for h, _ in rows}), "a prompt came back twice"
    return dict(rows)


@pytest.mark.parametrize("text", ["", "[]", '"},', "a\\n\\n", "\\n\\n\\n\\n", PROMPTS[1],
                                  '[{"role":"user","content":"\\\\n\\n"}]'])
def test_parts_are_the_text_cut_in_pieces(text):
    parts = prompt_parts(text)
    assert "".join(parts) == text and all(parts)


def test_parts_fall_at_messages_and_blank_lines():
    parts = prompt_parts(PROMPTS[0])
    # the system message, the header, the price table, the two document paragraphs, the rest
    assert parts[0] == '[{"role":"system","content":"You are on a committee."},'
    assert parts[1] == '{"role":"user","content":"TICKER: AAA | AS OF: 2027-01-04\\n\\n'
    assert len(parts) == 7


def test_each_distinct_part_is_journaled_once_before_its_first_call(tmp_path):
    p = tmp_path / "j.jsonl"
    write_unit(p)
    lines = p.read_bytes().splitlines()
    kinds = [orjson.loads(x)["k"] for x in lines]
    # the shared context is on one line, not on every call's
    assert p.read_bytes().count(b"Adjusted closes") == 1
    parts = [set(prompt_parts(x)) for x in PROMPTS]
    assert kinds.count("part") == len(set().union(*parts)) < sum(map(len, parts))
    seen = set()
    for x in lines:
        obj = orjson.loads(x)
        if obj["k"] == "part":
            seen.add(obj["key"])
        elif obj["k"] == "call":
            assert obj["prompt_text"] == "" and set(obj["prompt_parts"]) <= seen
    jc = read_journal(p)
    assert [c["prompt_text"] for c in jc.calls] == PROMPTS
    fast = read_journal(p, skip_calls=True)
    assert (fast.call_lines, fast.part_lines, fast.units) == (3, kinds.count("part"), jc.units)


def test_the_journal_hash_is_the_warehouse_hash_of_the_whole_text(tmp_path):
    p = tmp_path / "j.jsonl"
    write_unit(p)
    with duckdb.connect() as con:
        for line in p.read_bytes().splitlines():
            obj = orjson.loads(line)
            if obj["k"] == "call":
                text = PROMPTS[obj["call_seq"] - 1]
                assert obj["prompt_hash"] == con.execute("SELECT hash(?)", [text]).fetchone()[0]


def test_new_journals_read_back_byte_for_byte_and_ingest_once(tmp_path):
    p = tmp_path / "j.jsonl"
    write_unit(p)
    with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
        migrate(con)
        assert ingest_journal(con, p).new_calls == 3
        rows = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("calls", "prompts", "texts")}
        assert ingest_journal(con, p).new_calls == 0
        assert {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in rows} == rows
        got = stored_prompts(con)
        assert sorted(got.values()) == sorted(PROMPTS)
        # calls.prompt_hash is still the hash of the whole text
        assert con.execute("SELECT count(*) FROM v_prompts WHERE prompt_hash <> hash(prompt_text)"
                           ).fetchone()[0] == 0
        # no whole prompt is stored: the context is in texts once
        assert con.execute("SELECT count(*) FROM texts WHERE text LIKE '%Adjusted closes%'"
                           ).fetchone()[0] == 1
        assert rows["texts"] == con.execute("SELECT count(DISTINCT hash) FROM texts").fetchone()[0]


def test_a_resumed_writer_writes_its_parts_again_and_ingest_keeps_them_once(tmp_path):
    p = tmp_path / "j.jsonl"
    write_unit(p)
    p.write_bytes(p.read_bytes() + b'{"k":"part","key":1,"text":"tor')   # crash mid-part
    more = PROMPTS[:1] + [messages("bear_1", "## technical\nanswer 2", "Open the bear case.")]
    w = JournalWriter(p)
    assert w.dropped_torn_tail
    for i, pr in enumerate(more, 10):
        w.write(call(i, pr))
    w.close()
    assert [c["prompt_text"] for c in read_journal(p).calls] == PROMPTS + more
    with duckdb.connect() as con:
        migrate(con)
        ingest_journal(con, p)
        assert sorted(stored_prompts(con).values()) == sorted(set(PROMPTS + more))
        assert con.execute("SELECT count(*) - count(DISTINCT hash) FROM texts").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM prompts").fetchone()[0] == 4


def test_a_running_journal_is_ingested_from_its_complete_lines(tmp_path):
    p = tmp_path / "j.jsonl"
    write_unit(p)
    data = p.read_bytes()
    cut = data.index(b'{"k":"call"', data.index(b'"call_seq":2')) - 1   # call 3's parts onward
    p.write_bytes(data[:cut] + data[cut:cut + 40])       # a line half written
    with duckdb.connect() as con:
        migrate(con)
        st = ingest_journal(con, p, running=True)
        assert st.status == "running" and st.new_calls == 2
        p.write_bytes(data)
        assert ingest_journal(con, p).new_calls == 1
        assert sorted(stored_prompts(con).values()) == sorted(PROMPTS)


def test_a_part_missing_from_the_middle_of_a_journal_is_an_error(tmp_path):
    p = tmp_path / "j.jsonl"
    write_unit(p)
    lines = p.read_bytes().splitlines(keepends=True)
    i = next(n for n, x in enumerate(lines) if x.startswith(b'{"k":"part"'))
    p.write_bytes(b"".join(lines[:i] + [b'{"k":"part","key":' + b"x" * 20 + b"\n"] + lines[i + 1:]))
    with duckdb.connect() as con:
        migrate(con)
        with pytest.raises(DataError, match="prompt part"):
            ingest_journal(con, p)


def test_an_old_warehouse_and_old_journals_read_back_the_same_prompts(tmp_path):
    """A warehouse written before m012 holds whole prompts in texts; a journal written before
    parts carries them whole. After m012 both read back byte for byte, beside new ones, and
    a prompt stored both ways comes back once."""
    db = tmp_path / "old.duckdb"
    old_prompt = messages("risk_judge", "an old plan")
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at "
                    "TIMESTAMPTZ DEFAULT now())")
        for name, sql in MIGRATIONS[:11]:
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [name])
        # what the ingest before m012 stored: the whole text under its hash
        for i, text in enumerate([old_prompt, PROMPTS[0]]):
            con.execute("INSERT INTO texts SELECT hash($t), $t", {"t": text})
            con.execute("INSERT INTO calls (call_id, run_id, prompt_hash) SELECT ?, 'old', hash(?)",
                        [f"old{i}", text])
        before = dict(con.execute("SELECT prompt_hash, prompt_text FROM v_prompts").fetchall())
        assert migrate(con)[:2] == ["m012_messages", "m013_quotes"]     # and any later ones
        assert stored_prompts(con) == {h: t for h, t in before.items()}
        # an old-format journal (whole prompt_text on the call line), and a new one sharing
        # PROMPTS[0] with the old warehouse
        old_j = tmp_path / "old.jsonl"
        old_j.write_bytes(b"".join(encode(r) for r in (
            begin("o"), call(1, old_prompt, run="o"), call(2, PROMPTS[2], run="o"), end("o"))))
        assert read_journal(old_j).calls[1]["prompt_text"] == PROMPTS[2]
        ingest_journal(con, old_j)
        new_j = tmp_path / "new.jsonl"
        write_unit(new_j)
        ingest_journal(con, new_j)
        got = stored_prompts(con)
        assert sorted(got.values()) == sorted({old_prompt, *PROMPTS})
        assert con.execute("SELECT count(*) FROM v_prompts WHERE prompt_hash <> hash(prompt_text)"
                           ).fetchone()[0] == 0


def test_a_journal_given_twice_in_one_call_is_ingested_once(tmp_path):
    p = tmp_path / "j.jsonl"
    write_unit(p)
    copy = tmp_path / "shipped-again.jsonl"
    copy.write_bytes(p.read_bytes())
    with duckdb.connect() as con:
        migrate(con)
        stats = ingest_journals(con, [p, copy])
        assert [s.new_calls for s in stats] == [3, 0]
        assert con.execute("SELECT count(*), count(DISTINCT call_id) FROM calls").fetchone() == (3, 3)
        assert sorted(stored_prompts(con).values()) == sorted(PROMPTS)


def long_answer(i: int, extra: str = "") -> str:
    return "\n\n".join(f"Answer {i}, paragraph {n}: " + "the case rests on margins. " * 6
                       for n in range(4)) + extra


def quoting_unit() -> tuple[list[str], list[str]]:
    """A unit whose later prompts quote earlier answers whole, as the pipeline does (after a
    label, between blank lines); answer 2 has a control character that DuckDB's to_json
    escapes differently from orjson (\\u001F vs \\u001f), so it cannot be a quote."""
    answers = [long_answer(1), long_answer(2, "\x1f"), long_answer(3, ' "quoted" \\ é')]
    prompts = [messages("data_summary", "Summarise."),
               messages("technical", f"Data summary:\n{answers[0]}", "Report."),
               messages("bull_1", f"## technical\n{answers[1]}", f"## summary\n{answers[0]}",
                        "Open the case."),
               messages("judge", f"Bull said:\n{answers[2]}", answers[0], "Decide.")]
    return prompts, answers


def write_quoting_unit(path, run="r"):
    prompts, answers = quoting_unit()
    w = JournalWriter(path)
    w.write(begin(run))
    w.write(UnitStart(run, "p", "AAA", 1, 1, 1.0))
    for i, p in enumerate(prompts, 1):
        w.write(dataclasses.replace(call(i, p, run=run), output_text=answers[i - 1]
                                    if i <= len(answers) else "short"))
    w.write(UnitResult(run, "p", "AAA", 1, 1, 1.0, 1.0, 9.0, 9.0, len(prompts), "graded", 3))
    w.write(end(run))
    w.close()
    return prompts, answers


def test_an_answer_quoted_later_is_journaled_and_stored_once(tmp_path):
    p = tmp_path / "j.jsonl"
    prompts, answers = write_quoting_unit(p)
    data = p.read_bytes()
    # answers 1 and 3 are on their own call lines only; answer 2 (not quotable) also in parts
    assert data.count(b"Answer 1, paragraph 2") == 1
    assert data.count(b"Answer 3, paragraph 2") == 1
    assert data.count(b"Answer 2, paragraph 2") == 2
    quotes = [orjson.loads(x) for x in data.splitlines() if b'"quote"' in x]
    assert len(quotes) == 2                          # answers 1 and 3, each once
    assert [c["prompt_text"] for c in read_journal(p).calls] == prompts
    with duckdb.connect() as con:
        migrate(con)
        assert ingest_journal(con, p).new_calls == 4
        rows = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("texts", "prompts", "quotes")}
        assert rows["quotes"] == 2
        assert ingest_journal(con, p).new_calls == 0
        assert {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in rows} == rows
        for a, n in ((answers[0], 1), (answers[2], 1), (answers[1], 2)):
            para = a.split("\n\n")[2]
            assert con.execute("SELECT count(*) FROM texts WHERE contains(text, ?)",
                               [para]).fetchone()[0] == n
        assert sorted(stored_prompts(con).values()) == sorted(prompts)
        hashes = [h for h, in con.execute("SELECT prompt_hash FROM calls ORDER BY call_seq"
                                          ).fetchall()]
        assert [prompt_texts(con, hashes)[h] for h in hashes] == prompts


def test_a_quoted_answer_missing_from_the_warehouse_is_an_error(tmp_path):
    p = tmp_path / "j.jsonl"
    write_quoting_unit(p)
    lines = p.read_bytes().splitlines(keepends=True)
    # the first answer's call line damaged: its quote has nothing to point at
    i = next(n for n, x in enumerate(lines) if x.startswith(b'{"k":"call"'))
    lines[i] = lines[i].replace(b"Answer 1, paragraph 0", b"Answer 1, paragraph X")
    p.write_bytes(b"".join(lines))
    with duckdb.connect() as con:
        migrate(con)
        with pytest.raises(DataError, match="quoted answer"):
            ingest_journal(con, p)


def test_prompt_texts_reads_every_way_a_prompt_was_stored(tmp_path):
    """Whole (before m012), as parts, and with quotes: the same text as v_prompts; an
    unknown hash (or None) is left out."""
    with duckdb.connect() as con:
        migrate(con)
        old_prompt = messages("risk_judge", "an old plan")
        con.execute("INSERT INTO texts SELECT hash($t), $t", {"t": old_prompt})
        con.execute("INSERT INTO calls (call_id, run_id, prompt_hash) SELECT 'old', 'old', "
                    "hash(?)", [old_prompt])
        j1, j2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        write_unit(j1)
        write_quoting_unit(j2, run="q")
        ingest_journals(con, [j1, j2])
        view = stored_prompts(con)
        assert set(view.values()) == {old_prompt, *PROMPTS, *quoting_unit()[0]}
        got = prompt_texts(con, [*view, None, 12345])
        assert got == view
        assert prompt_texts(con, []) == {}


def test_ingest_caps_duckdb_memory_on_a_file_and_resets_it_after(tmp_path):
    """A warehouse file is ingested under MEMORY_LIMIT and its connection gets DuckDB's
    default back; a limit the caller set, and an in-memory database, are left alone."""
    from dualpath.warehouse import ingest as ingest_module
    p = tmp_path / "j.jsonl"
    write_unit(p)
    limit = "SELECT current_setting('memory_limit')"
    default = duckdb.connect().execute(limit).fetchone()[0]
    capped = duckdb.connect().execute(f"SET memory_limit = '{ingest_module.MEMORY_LIMIT}'; "
                                      + limit).fetchone()[0]
    seen = []
    real = ingest_module._ingest

    def spy(con, journals, running):
        seen.append(con.execute(limit).fetchone()[0])
        return real(con, journals, running)

    ingest_module._ingest = spy
    try:
        with duckdb.connect(str(tmp_path / "w.duckdb")) as con:
            migrate(con)
            ingest_journal(con, p)
            assert con.execute(limit).fetchone()[0] == default
            con.execute("SET memory_limit = '3GB'")
            mine = con.execute(limit).fetchone()[0]
            ingest_journal(con, p)
            assert con.execute(limit).fetchone()[0] == mine
        with duckdb.connect() as con:
            migrate(con)
            ingest_journal(con, p)
    finally:
        ingest_module._ingest = real
    assert seen == [capped, mine, default] and capped != default


def test_quoted_answers_are_whole_parts_and_the_parts_are_the_text():
    a = ("x" * 300 + "\\n\\ny" * 10, None)
    b = (a[0][-280:] + "z" * 20, None)       # starts inside a's quote: only its own is a part
    prompt = '[{"c":"' + f"## a\\n{a[0]}\\n\\nagain {a[0]}z\\n\\n{b[0]}" + '"}]'
    parts = list(cut_quoted(prompt, [a, b]))
    assert "".join(p for p, _ in parts) == prompt and all(p for p, _ in parts)
    assert [q for _, q in parts if q is not None] == [a, a, b]
    assert list(cut_quoted(prompt, [])) == [(p, None) for p in prompt_parts(prompt)]


def test_a_running_journal_cut_between_an_answer_and_its_quote_reads_back_whole(tmp_path):
    """A mid-night ingest stores an answer; the prompt quoting it arrives with the next
    ingest and points at the answer already stored."""
    p = tmp_path / "j.jsonl"
    prompts, _ = write_quoting_unit(p)
    data = p.read_bytes()
    quote = data.index(b'"quote"')
    cut = data.rindex(b"\n", 0, quote) + 1          # before the first quoting part
    p.write_bytes(data[:cut])
    with duckdb.connect() as con:
        migrate(con)
        assert ingest_journal(con, p, running=True).new_calls == 1    # answer 1 only
        p.write_bytes(data)
        assert ingest_journal(con, p).new_calls == 3
        hashes = [h for h, in con.execute("SELECT prompt_hash FROM calls ORDER BY call_seq"
                                          ).fetchall()]
        got = prompt_texts(con, hashes)
        assert [got[h] for h in hashes] == prompts == [stored_prompts(con)[h] for h in hashes]
