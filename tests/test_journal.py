import pytest

from dualpath.errors import DataError
from dualpath.records import CallRecord, RunBegin, UnitResult, UnitStart
from warehouse.journal import JournalWriter, read_journal


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
