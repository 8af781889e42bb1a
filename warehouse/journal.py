"""The append-only journal of one path-run: the source of truth until it is ingested.

One JSON object per line, each with a kind `k`:

    begin    a scoring segment started           (dualpath.records.RunBegin)
    session  the server seen for that segment    (ServerSession; SessionEnd at its end)
    ustart   a unit started                      (dualpath.records.UnitStart)
    call     one LLM call                        (dualpath.records.CallRecord)
    unit     a unit ended, with its outcome      (dualpath.records.UnitResult)
    end      the segment ended: status, counts   (dualpath.records.RunEnd)
    part     one distinct part of prompts: {"key": int, "text": str}

A call's prompt (its messages as JSON, ~33 KB at real size) is not repeated on its line: the
text is cut into parts after each message and after each blank line inside one (where the
pipeline joins its sections: ticker context, documents, earlier agents' answers), each
distinct part is written once per writer as a `part` line before the first call line that
uses it, and the call line carries `prompt_parts` (their keys, in order) and `prompt_hash`
(DuckDB's `hash()` of the whole text, as the warehouse keys prompts) with `prompt_text`
empty. The parts concatenated are the text, byte for byte. Journals written before parts
existed carry `prompt_text` whole; both are read.

An earlier answer of the same unit quoted whole in a later prompt (as the pipeline quotes
them, section by section) is one part, and its line carries no text:
`{"k":"part","key":int,"hash":H,"quote":A,"call":call_id}` says the part is that call's
`output_text` as JSON escapes it inside a string (orjson; checked, when the answer is
recorded, to be exactly what DuckDB's `to_json` writes), `hash` the part's own hash, `quote`
the answer's (`output_hash`). So an answer is journaled and stored once, whole, not again
paragraph by paragraph in every prompt that quotes it.

Durability is group commit: a writer thread appends lines (gathering for `gather_s`, 50 ms,
what follows a record, so that one DuckDB query hashes them all) and fsyncs when a unit has
ended and at least every `max_delay_s` otherwise, so a crash loses at most about a second of
records and never a finished unit's acknowledgement once synced; a torn last line is
ignored on read. One fsync per call would dominate a night of ~7k calls per path.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import orjson

from dualpath.records import (CallRecord, RunBegin, RunEnd, ServerSession, SessionEnd,
                              UnitResult, UnitStart)
# reading lives in journal_read; its names stay importable from here
from dualpath.warehouse.journal_read import (JournalContents, iter_lines, read_journal,  # noqa: F401
                                    repair_hint, unit_outcome)
from dualpath.warehouse.line_limit import bound_call, bound_unit
from dualpath.warehouse.prompts import QUOTE_MIN_BYTES, cut_quoted, part_key, prompt_parts

__all__ = ["JournalWriter", "read_journal", "snapshot", "prompt_parts", "part_key"]

log = logging.getLogger(__name__)

_KIND = {CallRecord: b"call", UnitStart: b"ustart", UnitResult: b"unit", RunBegin: b"begin",
         ServerSession: b"session", SessionEnd: b"session", RunEnd: b"end"}
# synced at once: a unit's end, and the run-level records
_URGENT = frozenset({UnitResult, RunBegin, ServerSession, SessionEnd, RunEnd})
_STOP = object()
# texts hashed in one query at most (~8 MB of prompts)
_HASH_CHUNK = 256
# characters whose to_json escaping is checked with the first answer: ASCII, Latin, general
# punctuation, currency, arrows, mathematical operators (others when first seen)
_SEED_CHARS = [chr(c) for r in (range(0x250), range(0x2000, 0x2070), range(0x20a0, 0x20c1),
                                range(0x2190, 0x2300)) for c in r]


def encode(record: Any, kind: bytes | None = None) -> bytes:
    """One journal line: the record's fields plus its kind."""
    kind = kind or _KIND[type(record)]
    body = orjson.dumps(record)
    return b'{"k":"' + kind + b'",' + body[1:] + b"\n"


class JournalWriter:
    """Appends records to a journal file from any thread; fsyncs in groups.

    A call's prompt is cut into parts in the writer thread, which alone writes the file:
    a part's line always precedes the first call line that needs it, in one ordered stream.
    The thread takes what is queued a batch at a time, and its DuckDB work (hashes) a
    batch at a time too (see `_lines`): the same bytes as one call at a time.
    """

    def __init__(self, path: Path, max_delay_s: float = 0.5, gather_s: float = 0.05):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.max_delay_s = max_delay_s
        self.gather_s = gather_s
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self.dropped_torn_tail = _drop_torn_tail(path)
        self._f = open(path, "ab")
        self.fsyncs = 0
        self.lines = 0
        self._parts_written: set[int] = set()
        # each unfinished unit's answers so far, that later prompts may quote:
        # [escaped text, its hash, the answer's hash, call id]
        self._answers: dict[tuple, list[list]] = {}
        self._duck: duckdb.DuckDBPyConnection | None = None
        # characters whose escaping by DuckDB's to_json was checked (see `_quotable`), those
        # escaped exactly as orjson does, and a pattern for any character not among those
        self._checked_chars: set[str] = set()
        self._same_chars: set[str] = set()
        self._per_char = True
        self._error: BaseException | None = None
        self._too_large: dict[tuple, str] = {}    # unit -> why one of its calls failed
        self._thread = threading.Thread(target=self._run, name=f"journal:{path.name}", daemon=True)
        self._thread.start()

    def write(self, record: Any) -> None:
        """Queue a record (the scheduler's sink); raises if the writer thread has failed."""
        if self._error is not None:
            raise self._error
        if type(record) is CallRecord:
            # the texts travel beside the line; the writer thread cuts the prompt
            line = encode(dataclasses.replace(record, prompt_text="")
                          if record.prompt_text else record)
            bounded = bound_call(record, len(line))      # see warehouse.line_limit
            if bounded is not None:
                self._too_large[_unit_of(record)] = bounded.error_detail
                record, line = bounded, encode(dataclasses.replace(bounded, prompt_text=""))
            self._q.put((line, False, record))
        else:
            line = encode(record)
            if type(record) is UnitResult:
                bounded = bound_unit(record, len(line), self._too_large.pop(_unit_of(record),
                                                                            None))
                if bounded is not None:
                    record, line = bounded, encode(bounded)
            self._q.put((line, type(record) in _URGENT,
                         record if type(record) is UnitResult else None))

    def _sql(self, query: str, args) -> tuple:
        if self._duck is None:
            # one thread: these queries are too small to share, and waking DuckDB's pool
            # costs more CPU than they do (~0.04 ms of ~0.15 ms a query)
            self._duck = duckdb.connect(":memory:", config={"threads": 1})
        return self._duck.execute(query, args).fetchone()

    def _hashes(self, texts: list[str]) -> list[int]:
        """DuckDB's `hash()` of each text: one query for a batch (a parameter each for one
        call's few texts, cheaper to bind than a list; a list beyond that, of at most
        `_HASH_CHUNK` texts, so that a writer catching up never copies it all at once)."""
        if len(texts) <= 4:
            return list(self._sql("SELECT " + ", ".join(["hash(?)"] * len(texts)), texts)
                        ) if texts else []
        return [h for i in range(0, len(texts), _HASH_CHUNK)
                for h in self._sql("SELECT list_transform($t, lambda x: hash(x))",
                                   {"t": texts[i:i + _HASH_CHUNK]})[0]]

    def _lines(self, items: list) -> bytes:
        """The journal lines of a batch of queued items, in order.

        DuckDB costs ~0.15-0.3 ms a query whatever it hashes, so a batch makes at most two:
        one for every hash it needs, and one only when an answer has a character whose
        `to_json` escaping has not been checked yet (see `_quotable`). The first pass cuts
        each prompt against the answers of its unit recorded before it, in earlier batches
        or earlier in this one (whether an answer is quotable is settled before the batch is
        cut), exactly as one call at a time would; the second formats the lines once the
        hashes are known."""
        quotable = self._quotable([r for _, _, r in items if type(r) is CallRecord
                                   and len(r.output_text) >= QUOTE_MIN_BYTES])
        texts: list[str] = []          # to hash
        fresh = []                     # (answer, index of its escaped text in texts)
        draft: list = []               # per item: its line, or what to format it from
        for line, _, record in items:
            if type(record) is UnitResult:     # its answers will be quoted no more
                self._answers.pop((record.run_id, record.ticker, record.draw,
                                   record.unit_attempt), None)
                draft.append(line)
                continue
            if record is None or not record.prompt_text:
                draft.append(line)
            else:
                unit = (record.run_id, record.ticker, record.draw, record.unit_attempt)
                parts, keys = self._cut(record.prompt_text, self._answers.get(unit, ()))
                draft.append((line, parts, keys, len(texts)))
                texts.append(record.prompt_text)
            escaped = quotable.get(id(record))
            if escaped is not None:
                # [escaped text, its hash, the answer's hash, call id]; the hashes are set
                # below, before any line that quotes the answer is formatted
                answer = [escaped, None, None, record.call_id]
                fresh.append((answer, len(texts)))
                texts += (escaped, record.output_text)
                self._answers.setdefault((record.run_id, record.ticker, record.draw,
                                          record.unit_attempt), []).append(answer)
        # the warehouse keys prompts by DuckDB's hash of the whole text: taken here, where
        # the text is in memory anyway, so that ingest never rebuilds 13 GB of prompts
        hashes = self._hashes(texts)
        for answer, i in fresh:
            answer[1], answer[2] = hashes[i], hashes[i + 1]
        out = []
        for d in draft:
            if type(d) is bytes:
                out.append(d)
                continue
            line, parts, keys, i = d
            for part in parts:
                out.append(part if type(part) is bytes else
                           b'{"k":"part","key":%d,"hash":%d,"quote":%d,"call":%s}\n'
                           % (part[0], part[1][1], part[1][2], orjson.dumps(part[1][3])))
            out.append(line[:-2] + b',"prompt_hash":%d,"prompt_parts":%s}\n'
                       % (hashes[i], orjson.dumps(keys)))
        return b"".join(out)

    def _cut(self, prompt: str, answers) -> tuple[list, list[int]]:
        """A prompt's part keys, and its parts not yet written, each once: a part's line,
        or (key, answer) for an answer quoted whole (its line waits for the hashes)."""
        new, keys = [], []
        for part, quote in cut_quoted(prompt, answers):
            key = part_key(part.encode())
            keys.append(key)
            if key not in self._parts_written:
                self._parts_written.add(key)
                new.append(b'{"k":"part","key":%d,"text":%s}\n' % (key, orjson.dumps(part))
                           if quote is None else (key, quote))
        return new, keys

    def _quotable(self, records: list[CallRecord]) -> dict[int, str]:
        """id(record) -> its answer as orjson escapes it inside a string, for each answer
        that later prompts may quote: those DuckDB's `to_json` escapes exactly so (the
        warehouse rebuilds the quote with it).

        An answer made only of characters that `to_json` was seen, one by one, to escape as
        orjson does is escaped the same whole: both escape a string character by character
        (checked too: `to_json` of all the checked characters together is their escapes
        joined). Any other answer is compared whole, and its unchecked characters checked
        for the next ones; all in one query per batch, and rarely once the common
        characters (`_SEED_CHARS`) are checked with the first answer."""
        out, doubt = {}, []
        for r in records:
            try:
                escaped = orjson.dumps(r.output_text)[1:-1].decode()
            except (orjson.JSONEncodeError, UnicodeDecodeError):
                continue
            # a set, not a pattern of the checked characters: a random-weight model's answers
            # bring hundreds of new characters a batch, and recompiling that pattern (~0.2 s
            # a batch at 15k characters, GIL held) stalled the night's event loop
            if self._per_char and self._same_chars.issuperset(r.output_text):
                out[id(r)] = escaped
            else:
                doubt.append((r, escaped))
        if not doubt:
            return out
        chars = set().union(*(r.output_text for r, _ in doubt))
        if not self._checked_chars:
            chars.update(_SEED_CHARS)
        chars = sorted(chars - self._checked_chars) if self._per_char else []
        each, together, whole = self._sql(
            "SELECT list_transform($c, lambda x: to_json(x)::VARCHAR), to_json($s)::VARCHAR, "
            "list_transform($a, lambda x: to_json(x)::VARCHAR)",
            {"c": chars, "s": "".join(chars), "a": [r.output_text for r, _ in doubt]})
        for (r, escaped), got in zip(doubt, whole):
            if got == '"' + escaped + '"':
                out[id(r)] = escaped
        if chars:
            mine = [orjson.dumps(c).decode() for c in chars]
            if together != '"' + "".join(e[1:-1] for e in each) + '"' or (
                    orjson.dumps("".join(chars)).decode() != '"' + "".join(
                        m[1:-1] for m in mine) + '"'):
                # not escaped character by character: compare every answer whole
                log.warning("journal %s: DuckDB's to_json does not escape a string character "
                            "by character; checking every answer whole", self.path)
                self._per_char = False
            else:
                self._checked_chars.update(chars)
                self._same_chars.update(c for c, e, m in zip(chars, each, mine) if e == m)
        return out

    def _run(self) -> None:
        dirty_since: float | None = None
        try:
            while True:
                timeout = None if dirty_since is None else max(
                    0.0, dirty_since + self.max_delay_s - time.monotonic())
                try:
                    item = self._q.get(timeout=timeout)
                except queue.Empty:
                    item = None
                urgent, stop = False, False
                batch = []
                if item is not None and item is not _STOP and self.gather_s > 0:
                    # a night's calls arrive one by one; the lines of those that follow
                    # within `gather_s` are cut and hashed with this one, in one query
                    time.sleep(self.gather_s)
                while item is not None:
                    if item is _STOP:
                        stop = True
                        break
                    batch.append(item)
                    urgent |= item[1]
                    try:
                        item = self._q.get_nowait()
                    except queue.Empty:
                        item = None
                if batch:
                    self._f.write(self._lines(batch))
                    self.lines += len(batch)
                    dirty_since = dirty_since or time.monotonic()
                due = dirty_since is not None and (
                    urgent or stop or time.monotonic() - dirty_since >= self.max_delay_s)
                if due:
                    self._f.flush()
                    os.fsync(self._f.fileno())
                    self.fsyncs += 1
                    dirty_since = None
                if stop:
                    return
        except BaseException as e:  # surfaced on the next write and on close
            self._error = e
            log.error("journal %s: %s", self.path, e)
        finally:
            if self._duck is not None:
                self._duck.close()

    def close(self) -> None:
        """Flush, fsync and close; raises if the writer thread failed."""
        self._q.put(_STOP)
        self._thread.join()
        self._f.close()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> "JournalWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _unit_of(r) -> tuple:
    return (r.run_id, r.ticker, r.draw, r.unit_attempt)


def complete_end(f, size: int) -> int:
    """The end of the last complete line of an open binary file of `size` bytes, found by
    reading backwards from the end (a journal can be gigabytes; a torn line is short)."""
    pos = size
    while pos > 0:
        step = min(pos, 1 << 20)
        f.seek(pos - step)
        nl = f.read(step).rfind(b"\n")
        if nl >= 0:
            return pos - step + nl + 1
        pos -= step
    return 0


def _drop_torn_tail(path: Path) -> int:
    """Cut a half-written last line (a crash mid-write) so that appending stays parseable."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        keep = complete_end(f, size)
        if keep == size:
            return 0
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    log.warning("journal %s: dropped %d bytes of a torn last record", path, size - keep)
    return size - keep


def snapshot(journal: Path, copy: Path) -> Path:
    """A copy of a journal being written, cut at its last complete line, streamed (never the
    whole file in memory): DuckDB and the line scanner must read the same bytes."""
    with open(journal, "rb") as src, open(copy, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    with open(copy, "rb+") as f:
        f.truncate(complete_end(f, f.seek(0, os.SEEK_END)))
    return copy
