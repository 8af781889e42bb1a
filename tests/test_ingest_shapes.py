"""Every shape a journal can be cut to (a crash after any line, a live journal read mid-write)
ingests: the other path's journal in the same transaction is never rolled back with it."""

from __future__ import annotations

import duckdb
import pytest

from dualpath.records import CallRecord, UnitResult
from tests.helpers import SimFleet, make_project, score_night_plain
from dualpath.warehouse.ingest import ingest_journals
from dualpath.warehouse.journal import JournalWriter, iter_lines, read_journal
from dualpath.warehouse.line_limit import MAX_LINE_BYTES
from dualpath.warehouse.migrations import migrate


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """One small night: two paths' full journals."""
    root = tmp_path_factory.mktemp("shapes")
    cfg_path, cfg, nights = make_project(root, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, nights[0], fleet.urls)
    return {w.path: w.journal for w in works}


def _lines(path):
    return [line for _, line, _ in iter_lines(path)]


@pytest.mark.parametrize("running", [False, True])
def test_every_prefix_of_a_journal_ingests_beside_a_whole_one(scored, tmp_path, running):
    lines = _lines(scored["backup"])
    other = tmp_path / "main.jsonl"
    other.write_bytes(scored["main"].read_bytes())
    whole_calls = sum(line.startswith(b'{"k":"call"') for line in _lines(other))
    for cut in range(len(lines) + 1):
        cut_journal = tmp_path / f"backup-{cut}.jsonl"
        cut_journal.write_bytes(b"".join(lines[:cut]))
        jc = read_journal(cut_journal)
        for together in ([other, cut_journal], [cut_journal]):   # beside the other, alone
            con = duckdb.connect()
            migrate(con)
            stats = ingest_journals(con, together, running=running)
            stored = dict(con.execute("SELECT path, count(*) FROM calls GROUP BY 1").fetchall())
            assert stored.get("main", 0) == (whole_calls if other in together else 0), cut
            assert stored.get("backup", 0) == len(jc.calls), cut
            units = con.execute("SELECT count(*) FROM units WHERE path = 'backup'").fetchone()[0]
            assert units == len(jc.unit_results(running)), cut
            assert len(stats) == (other in together) + bool(jc.begins), cut
            con.close()


def test_a_torn_half_line_and_an_empty_journal_ingest_as_nothing(scored, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(_lines(scored["backup"])[0][:40])
    con = duckdb.connect()
    migrate(con)
    stats = ingest_journals(con, [scored["main"], empty, torn])
    assert [s.run_id.endswith("/main") for s in stats] == [True]
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


def _call(i: int, unit: int, output: str) -> CallRecord:
    return CallRecord(call_id=f"c{i}", run_id="x/2027-01-04/p", path="p", ticker=f"T{unit}",
                      draw=1, unit_attempt=1, agent="a", call_seq=i, start_wall=1.0,
                      start_mono=1.0, end_wall=2.0, end_mono=2.0, prompt_text="hello",
                      output_text=output)


def _unit(unit: int) -> UnitResult:
    return UnitResult(run_id="x/2027-01-04/p", path="p", ticker=f"T{unit}", draw=1,
                      unit_attempt=1, start_wall=1.0, start_mono=1.0, end_wall=2.0,
                      end_mono=2.0, n_calls=1, outcome="graded", grade=3, final_text="ok")


def test_an_answer_over_the_line_limit_is_one_counted_failed_call(tmp_path):
    """The answer is kept out, its call failed and its unit not measured; every other
    call and unit of the journal stays as it was."""
    j = tmp_path / "j.jsonl"
    huge = "x" * (MAX_LINE_BYTES + 10)
    with JournalWriter(j) as w:
        w.write(_call(1, 1, "fine"))
        w.write(_unit(1))
        w.write(_call(2, 2, huge))
        w.write(_unit(2))
    del huge
    assert max(len(line) for line in _lines(j)) < MAX_LINE_BYTES
    jc = read_journal(j)
    failed = [c for c in jc.calls if c["error_kind"]]
    assert [(c["call_id"], c["error_kind"], c["output_text"]) for c in failed] == [
        ("c2", "answer_too_large", "")]
    assert "over the journal's" in failed[0]["error_detail"]
    outcomes = {u["ticker"]: (u["outcome"], u["grade"]) for u in jc.units}
    assert outcomes == {"T1": ("graded", 3), "T2": ("call_failed", None)}


def test_a_50_mb_answer_is_stored_whole(tmp_path, scored):
    """DuckDB's default maximum_object_size (16 MiB) refused such a line: the night could
    never be ingested and the other path's calls were lost with it."""
    from dualpath.records import RunBegin
    j = tmp_path / "j.jsonl"
    answer = "y" * 50_000_000
    with JournalWriter(j) as w:
        w.write(RunBegin(run_id="x/2027-01-04/p", experiment="x", night="2027-01-04",
                         path="p", engine="sim", config_hash="h", units_planned=1,
                         units_remaining=1, tickers_planned=1, slots=1, time_scale=1.0,
                         segment=1, started_wall=1.0))
        w.write(_call(1, 1, answer))
        w.write(_unit(1))
    con = duckdb.connect(str(tmp_path / "w.duckdb"))     # under ingest's memory cap
    migrate(con)
    ingest_journals(con, [scored["main"], j])
    got = con.execute("SELECT length(t.text) FROM calls c JOIN texts t "
                      "ON t.hash = c.output_hash WHERE c.call_id = 'c1'").fetchone()
    assert got == (50_000_000,)
    assert con.execute("SELECT count(*) FROM calls WHERE path = 'main'").fetchone()[0] > 0


def test_a_damaged_journal_is_named_with_its_repair_and_the_other_is_stored(scored, tmp_path):
    from dualpath.errors import DataError
    lines = _lines(scored["backup"])
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join(lines[:5] + [b'{"k":"call","call_id": oops\n'] + lines[5:]))
    con = duckdb.connect()
    migrate(con)
    with pytest.raises(DataError, match=f"`dualpath repair {damaged} -c CONFIG`") as e:
        ingest_journals(con, [scored["main"], damaged])
    assert [s.run_id.endswith("/main") for s in e.value.ingested] == [True]
    assert con.execute("SELECT DISTINCT path FROM calls").fetchall() == [("main",)]
