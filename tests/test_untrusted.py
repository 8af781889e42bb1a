"""A server's numbers and ends are untrusted input: range-checked before they are numbers,
abnormal ends retried, a reply naming two models flagged; a journal holding such a number
still ingests (httpx.MockTransport replies, a real simulated night's journal)."""

from __future__ import annotations

import copy

import duckdb
import httpx
import orjson
import pytest

from dualpath.server_numbers import MAX_TOKENS
from tests.helpers import SimFleet, make_project, score_night_plain
from tests.test_client import LLAMA_REPLY, llama_stream_events, make_client, req
from dualpath.warehouse.disturbed import DISTURBED
from dualpath.warehouse.ingest import ingest_journals
from dualpath.warehouse.journal import iter_lines
from dualpath.warehouse.migrations import migrate


def _reply(**usage):
    r = copy.deepcopy(LLAMA_REPLY)
    r["usage"].update(usage)
    return r


@pytest.mark.parametrize("sent, as_sent", [
    (2**40, "1099511627776"),        # no warehouse INTEGER holds it
    ("lots", '"lots"'),              # once stored as NULL without a word
    (-5, "-5"), (12.5, "12.5"), (True, "true"), (MAX_TOKENS + 1, str(MAX_TOKENS + 1)),
])
async def test_a_usage_count_out_of_range_or_of_the_wrong_type_is_kept_apart(sent, as_sent):
    client = make_client(lambda r: httpx.Response(200, json=_reply(prompt_tokens=sent)))
    rec = await client.chat(req())
    assert rec.ok and rec.output_text.startswith("Trend up")
    assert rec.prompt_tokens is None and rec.completion_tokens == 1436
    assert orjson.loads(rec.untrusted) == {"usage.prompt_tokens": as_sent}


async def test_a_timing_that_is_no_time_is_kept_apart_and_the_rest_kept():
    r = copy.deepcopy(LLAMA_REPLY)
    r["timings"].update(prompt_ms=-1.0, predicted_n="1436")
    rec = await make_client(lambda _: httpx.Response(200, json=r)).chat(req())
    assert rec.prompt_ms is None and rec.predicted_n is None and rec.predicted_ms == 33400.2
    assert orjson.loads(rec.untrusted) == {"timings.prompt_ms": "-1.0",
                                           "timings.predicted_n": '"1436"'}


async def test_in_range_numbers_leave_nothing_untrusted():
    rec = await make_client(lambda _: httpx.Response(200, json=LLAMA_REPLY)).chat(req())
    assert rec.untrusted is None and rec.prompt_tokens == 6329


@pytest.mark.parametrize("finish", [None, "abort", "error", "repetition", "weird"])
async def test_a_reply_that_did_not_end_normally_is_a_transient_failure(finish):
    r = copy.deepcopy(LLAMA_REPLY)
    r["choices"][0]["finish_reason"] = finish
    client = make_client(lambda _: httpx.Response(200, json=r), max_attempts=3)
    rec = await client.chat(req())
    assert not rec.ok and rec.error_kind == "bad_finish" and rec.attempts == 3
    assert "retried" in rec.error_detail and "gave up after 3 attempts" in rec.error_detail


async def test_an_aborted_reply_is_retried_and_the_next_answer_kept():
    replies = iter([{**copy.deepcopy(LLAMA_REPLY), "choices": [
        {"index": 0, "finish_reason": "abort", "message": {"content": "Trend u"}}]},
        LLAMA_REPLY])
    rec = await make_client(lambda _: httpx.Response(200, json=next(replies))).chat(req())
    assert rec.ok and rec.attempts == 2 and rec.finish_reason == "stop"
    assert orjson.loads(rec.attempt_errors)[0]["kind"] == "bad_finish"


def _stream(events):
    return lambda _: httpx.Response(200, content=b"".join(events),
                                    headers={"content-type": "text/event-stream"})


async def test_a_streamed_abort_is_retried_never_an_answer():
    events = [e.replace(b'"finish_reason":"stop"', b'"finish_reason":"abort"')
              for e in llama_stream_events()]
    rec = await make_client(_stream(events), stream=True, max_attempts=2).chat(req())
    assert rec.error_kind == "bad_finish" and rec.attempts == 2


async def test_a_stream_that_names_another_model_midway_is_contaminated():
    events = llama_stream_events()
    events[2] = events[2].replace(b'"model":"qwen3.6-35b-a3b"', b'"model":"other-7b"')
    client = make_client(_stream(events), stream=True)
    client.pin("qwen3.6-35b-a3b", None, "llama.cpp")
    rec = await client.chat(req())
    assert rec.output_text == "FINAL GRADE: 2"
    assert rec.contaminated == "the reply named model 'other-7b' after 'qwen3.6-35b-a3b'"
    assert orjson.loads(rec.untrusted) == {"model": '["qwen3.6-35b-a3b", "other-7b"]'}


@pytest.fixture(scope="module")
def backup_journal(tmp_path_factory):
    root = tmp_path_factory.mktemp("untrusted")
    cfg_path, cfg, nights = make_project(root, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, nights[0], fleet.urls)
    return next(w.journal for w in works if w.path == "backup")


def test_a_journal_holding_a_huge_or_wrongly_typed_count_still_ingests(backup_journal, tmp_path):
    """As an older client journaled them: 2**40 made every ingest fail (INT64 into INTEGER)."""
    lines, bad = [], iter([2**40, "lots"])
    for _, line, _ in iter_lines(backup_journal):
        d = orjson.loads(line)
        if d.get("k") == "call" and (v := next(bad, None)) is not None:
            d["prompt_tokens"] = v
            d.pop("untrusted", None)
            line = orjson.dumps(d) + b"\n"
        lines.append(line)
    journal = tmp_path / "backup.jsonl"
    journal.write_bytes(b"".join(lines))
    con = duckdb.connect()
    migrate(con)
    stats = ingest_journals(con, [journal])
    total = sum(1 for line in lines if line.startswith(b'{"k":"call"'))
    assert stats[0].calls == total
    flagged = con.execute("SELECT prompt_tokens, untrusted FROM calls WHERE untrusted "
                          "IS NOT NULL ORDER BY call_seq").fetchall()
    assert sorted(u for _, u in flagged) == ['{"journal.prompt_tokens":"1099511627776"}',
                                             '{"journal.prompt_tokens":"lots"}']
    assert [p for p, _ in flagged] == [None, None]
    assert con.execute("SELECT count(*) FROM calls WHERE prompt_tokens > 0").fetchone()[0] \
        == total - 2
    disturbed = dict(con.execute(DISTURBED).fetchall())
    assert disturbed[stats[0].run_id] == ("untrusted: 2 call(s) sent token counts or timings "
                                          "out of range or of the wrong type (calls.untrusted)")
