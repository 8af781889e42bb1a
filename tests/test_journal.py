import hashlib
import random
import threading
import time

import duckdb
import orjson
import pytest

from dualpath.errors import DataError
from dualpath.records import CallRecord, RunBegin, RunEnd, UnitResult, UnitStart
from dualpath.warehouse.journal import JournalWriter, read_journal


def call(i: int, ticker="AAA", draw=1) -> CallRecord:
    return CallRecord(call_id=f"c{i}", run_id="r", path="p", ticker=ticker, draw=draw,
                      unit_attempt=1, agent="a", call_seq=i, start_wall=1.0, start_mono=1.0,
                      end_mono=2.0, prompt_text="[]", output_text="x")


def unit(ticker="AAA", draw=1, grade=3) -> UnitResult:
    return UnitResult("r", "p", ticker, draw, 1, 1.0, 1.0, 2.0, 2.0, 17,
                      "graded" if grade else "parse_failed", grade)


def begin() -> RunBegin:
    return RunBegin("r", "e", "2027-01-04", "p", "sim", "h", 1, 1, 1, 4, 1.0, 1, 1.0)


def test_group_commit_syncs_per_unit_not_per_call(tmp_path):
    w = JournalWriter(tmp_path / "j.jsonl", max_delay_s=60)
    w.write(begin())
    for i in range(2000):
        w.write(call(i))
    w.write(unit())
    w.close()
    jc = read_journal(tmp_path / "j.jsonl")
    assert len(jc.calls) == 2000 and len(jc.units) == 1 and len(jc.begins) == 1
    assert w.fsyncs <= 4     # begin, unit end, close: not one per call


def test_records_are_durable_within_the_delay_without_a_unit_end(tmp_path):
    import time
    w = JournalWriter(tmp_path / "j.jsonl", max_delay_s=0.05)
    w.write(call(1))
    time.sleep(0.5)
    assert w.fsyncs == 1     # synced by the timer, before close
    assert len(read_journal(tmp_path / "j.jsonl").calls) == 1
    w.close()


def test_torn_last_line_is_ignored_damage_elsewhere_is_an_error(tmp_path):
    p = tmp_path / "j.jsonl"
    with JournalWriter(p) as w:
        w.write(UnitStart("r", "p", "AAA", 1, 1, 1.0))
        w.write(call(1))
        w.write(unit())
    data = p.read_bytes()
    p.write_bytes(data + b'{"k":"call","call_id":"half')   # crash mid-write
    jc = read_journal(p)
    assert jc.torn_tail and len(jc.calls) == 1 and jc.measured_units() == {("AAA", 1)}
    lines = data.splitlines(keepends=True)
    p.write_bytes(lines[0] + b"garbage\n" + b"".join(lines[1:]))
    with pytest.raises(DataError, match="line 2 is damaged"):
        read_journal(p)


def test_attempts_count_unit_starts(tmp_path):
    p = tmp_path / "j.jsonl"
    with JournalWriter(p) as w:
        w.write(UnitStart("r", "p", "AAA", 1, 1, 1.0))
        w.write(UnitStart("r", "p", "AAA", 1, 2, 1.0))
        w.write(UnitStart("r", "p", "BBB", 1, 1, 1.0))
    assert read_journal(p).attempts() == {("AAA", 1): 2, ("BBB", 1): 1}


def test_fast_reader_agrees_with_the_line_reader(tmp_path):
    p = tmp_path / "j.jsonl"
    with JournalWriter(p) as w:
        w.write(begin())
        for i in range(50):
            w.write(call(i))
        w.write(unit())
    p.write_bytes(p.read_bytes() + b'{"k":"call","call_id":"half')
    slow, fast = read_journal(p), read_journal(p, skip_calls=True)
    assert fast.call_lines == slow.call_lines == 50
    assert fast.units == slow.units and fast.begins == slow.begins and fast.torn_tail
    lines = p.read_bytes().splitlines(keepends=True)
    p.write_bytes(b"".join(lines[:3]) + b"not json\n" + b"".join(lines[3:-1]))
    with pytest.raises(DataError, match="line 4 is damaged"):
        read_journal(p, skip_calls=True)


# --- a call's prompt cut into parts and hashed a batch at a time -------------------------

def _msgs(*sections: str) -> str:
    """A prompt's text as dualpath.client records it: the messages as JSON."""
    return orjson.dumps([{"role": "system", "content": "You are on a committee."},
                         {"role": "user", "content": "\n\n".join(
                             ("TICKER: AAA | AS OF: 2027-01-04\n\nAdjusted closes:\n"
                              + "\n".join(f"2026-12-{d:02d},{100 + d}.00" for d in range(1, 29)),
                              *sections))}]).decode()


def _answer(n: int, extra: str) -> str:
    return "\n\n".join(f"Answer {n}.{p}: margins / growth \"held\" \\ " + "steady. " * 40
                       for p in range(3)) + extra


# answers with characters DuckDB's to_json might escape otherwise than orjson: 2 and 5 have
# control characters it escapes in upper case (not quotable), the others are quotable
ANSWERS = {
    1: _answer(1, " plain"),
    2: _answer(2, " unit\x1fsep"),
    3: _answer(3, " é — “quoted” ± 3% 2/3 \u2028 line\u2029 📈 中文 \x7f"),
    4: _answer(4, " tab\t bs\b ff\f cr\r nul\x00 \x01 \U0001F600 ok"),
    5: _answer(5, " vt\x0b"),
}


def quoting_records() -> list:
    """A unit whose later prompts quote its earlier answers (some in the same batch as the
    answer), with a shared context and a prompt seen twice; another unit's prompt and a
    later attempt's quoting the same texts, which are not their answers."""
    def rec(i, agent, prompt, output, ticker="AAA", attempt=1):
        return CallRecord(call_id=f"c{i}", run_id="r", path="p", ticker=ticker, draw=1,
                          unit_attempt=attempt, agent=agent, call_seq=i, start_wall=1.0 + i,
                          start_mono=1.0, end_wall=2.0 + i, end_mono=2.0, prompt_text=prompt,
                          output_text=output, request_json="{}")
    a = ANSWERS
    judge = _msgs(f"## bull\n{a[3]}", f"## bear\n{a[4]}", f"Summary:\n{a[1]}", "Decide.")
    return [
        begin(), UnitStart("r", "p", "AAA", 1, 1, 1.0), UnitStart("r", "p", "BBB", 1, 1, 1.0),
        rec(1, "data_summary", _msgs("Summarise."), a[1]),
        rec(2, "technical", _msgs(f"Data summary:\n{a[1]}", "Report."), a[2]),
        rec(3, "no_prompt", "", a[3]),
        rec(4, "bull", _msgs(f"Data summary:\n{a[1]}", f"## technical\n{a[2]}",
                             f"## other\n{a[3]}", "Open."), a[4]),
        rec(5, "other_unit", _msgs(f"Seen elsewhere:\n{a[1]}", "Report."), a[1],
            ticker="BBB"),
        rec(6, "bear", _msgs(f"## bull\n{a[4]}", f"{a[4]}", f"## vt\n{a[5]}", "Rebut."), a[5]),
        rec(7, "judge", judge, "short answer"),
        rec(8, "judge_again", judge, a[3] + " again"),
        unit(),
        rec(9, "retry", _msgs(f"Data summary:\n{a[1]}", "Report."), a[1], attempt=2),
        RunEnd("r", 1, 1.0, 9.0, "complete", None, 1, 1, 3),
    ]


# sha256 of the journal of quoting_records(), as written one call at a time by the writer
# before batches (two DuckDB queries a call): batches must not change a byte. Since the
# thinking fields (m018) every call line also ends in
# ,"reasoning_text":"","reasoning_tokens":null,"reasoning_tokens_basis":null; without them
# the bytes hash to the writer's before batches, 70f20900785d...c867d42dc6c0. Since m020
# every call line ends in ,"untrusted":null too, and since the segment's monotonic seconds
# the run-end line ends in ,"wall_s":null; without both, 889684d2a2a4...c14c05b9.
QUOTING_JOURNAL_SHA256 = "a3693f9e83630809844207bacc31f827eaac5cdd4f28e47d23a1f01c57c3f8a5"


class GatedWriter(JournalWriter):
    """A writer whose first batch waits for `gate`: what is written meanwhile is queued and
    makes the second batch, whole; it counts its batches and queries."""

    def __init__(self, *args, **kwargs):
        self.gate, self.waiting = threading.Event(), threading.Event()
        self.batches, self.queries = [], []
        super().__init__(*args, **kwargs)

    def _lines(self, items):
        self.waiting.set()
        self.gate.wait()
        self.batches.append(len(items))
        return super()._lines(items)

    def _sql(self, query, args):
        self.queries.append(query)
        return super()._sql(query, args)


def write_batched(path, records, one_batch: bool) -> GatedWriter:
    """`records` journaled in one batch after the first, or each in a batch of its own."""
    w = GatedWriter(path)
    if one_batch:
        w.write(records[0])
        assert w.waiting.wait(10)       # the first batch taken, the rest waits in the queue
        for r in records[1:]:
            w.write(r)
        w.gate.set()
    else:
        w.gate.set()
        for n, r in enumerate(records, 1):
            w.write(r)
            while w.lines < n and w._error is None:
                time.sleep(0.001)
    w.close()
    return w


@pytest.mark.parametrize("one_batch", [True, False])
def test_batches_write_the_same_bytes_as_one_call_at_a_time(tmp_path, one_batch):
    records = quoting_records()
    p = tmp_path / "j.jsonl"
    w = write_batched(p, records, one_batch)
    n_calls = sum(type(r) is CallRecord for r in records)
    if one_batch:
        assert w.batches == [1, len(records) - 1]
        # the calls' batch: one query for the answers with characters not checked yet
        # (the first: the common ones besides), one for every hash
        assert len(w.queries) == 2
    else:
        assert w.batches == [1] * len(records)
        assert len(w.queries) <= 2 * n_calls
    data = p.read_bytes()
    assert hashlib.sha256(data).hexdigest() == QUOTING_JOURNAL_SHA256
    jc = read_journal(p)
    calls = [r for r in records if type(r) is CallRecord]
    assert [c["prompt_text"] for c in jc.calls] == [c.prompt_text for c in calls]
    quotes = [orjson.loads(x) for x in data.splitlines() if x.startswith(b'{"k":"part"')
              and b'"quote"' in x]
    # quoted whole: answers 1, 3 and 4 of unit AAA's first attempt, each once; not answer 2
    # or 5 (DuckDB escapes their control characters otherwise), nor in unit BBB's prompt
    # or the second attempt's
    assert sorted(q["call"] for q in quotes) == ["c1", "c3", "c4"]
    with duckdb.connect() as con:
        for q in quotes:
            text = ANSWERS[int(q["call"][1:])]
            assert (q["hash"], q["quote"]) == con.execute(
                "SELECT hash($e), hash($a)", {"e": orjson.dumps(text)[1:-1].decode(),
                                              "a": text}).fetchone()
        for c, r in zip(jc.calls, calls):
            if r.prompt_text:
                assert c["prompt_hash"] == con.execute("SELECT hash(?)",
                                                       [r.prompt_text]).fetchone()[0]
    # the shared context and the judge's prompt, seen twice, are journaled once
    assert data.count(b"Adjusted closes") == 1
    assert data.count(b"Decide.") == 1


def _duckdb_quotable(con, text: str) -> bool:
    escaped = orjson.dumps(text)[1:-1].decode()
    return con.execute("SELECT to_json($a)::VARCHAR = '\"' || $e || '\"'",
                       {"a": text, "e": escaped}).fetchone()[0]


@pytest.mark.parametrize("per_char", [True, False])
def test_an_answer_is_quotable_exactly_when_duckdb_escapes_it_as_orjson(tmp_path, per_char):
    """Answers judged by their characters, without a query, are judged as a query of each
    would: random answers over ASCII, Latin, punctuation, control characters, emoji and
    CJK, a batch at a time (and every answer queried, when the characters are not trusted)."""
    rng = random.Random(5)
    pool = ([chr(c) for c in range(0x80)] + list("éü±—“”…€\u2028\u2029\u00a0\u200b/\\\"")
            + ["📈", "😀", "中", "文", "\U0010fffd", "\ufeff", "\ufffd"])
    w = JournalWriter(tmp_path / "j.jsonl")
    w._per_char = per_char
    answers = []
    for n in range(400):
        k = rng.choice([0, 1, 2, 40])       # how many characters from the whole pool
        text = "".join(rng.choice(pool) if i < k else rng.choice("abc .\n")
                       for i in range(300))
        answers.append(CallRecord("c", "r", "p", "A", 1, 1, "a", n, 1.0, 1.0,
                                  output_text="".join(rng.sample(text, len(text)))))
    w.close()
    w._duck = None                          # the thread's connection closed with it
    got = {}
    for i in range(0, len(answers), 50):
        got.update(w._quotable(answers[i:i + 50]))
    with duckdb.connect() as con:
        want = {id(r) for r in answers if _duckdb_quotable(con, r.output_text)}
    assert set(got) == want
    assert 0 < len(want) < len(answers)
    assert all(got[id(r)] == orjson.dumps(r.output_text)[1:-1].decode()
               for r in answers if id(r) in got)
    if per_char:
        # the characters were checked one by one, the differing ones found
        assert {"\x0b", "\x1f"} <= w._checked_chars - w._same_chars
        assert {"/", "é", "\u2028", "📈", "\x00", "\n"} <= w._same_chars
