"""Prompts as parts: where a prompt is cut (the journal writes each distinct part once), and
reading prompts back fast, by hash.

A prompt is stored as the list of its parts' hashes (`prompts`, m012), each part once in
`texts`, or in `quotes` (m013) when it is an earlier answer quoted whole (that answer,
JSON-escaped); prompts ingested before m012 are whole in `texts`. `v_prompts` rebuilds the
text of any prompt, but DuckDB cannot carry a filter on `prompt_hash` through its join with
`texts`: the texts table is scanned whole for every read (9 s for one unit's 17 prompts at
six weeks, 21 s before answers were stored once). `prompt_texts` looks up the few rows it
needs instead: the prompts' part lists by literal hashes, then the parts' row ids in `texts`
by literal hashes (a filter on the hash column alone), then those rows a range of row ids at
a time (see `_texts`): one unit's 17 prompts in 0.09 s cold at six weeks, one night's 4,900
prompts of one path (158 MB) in 0.6 s.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Iterator, Mapping

import duckdb
import orjson

from dualpath.errors import DataError

# where a prompt's JSON text is cut: after a blank line inside a message (escaped in JSON)
# and after each message
_PART_CUTS = ("\\n\\n", '"},')


def prompt_parts(prompt_text: str) -> list[str]:
    """A prompt's JSON text cut into consecutive, non-empty parts (see `warehouse.journal`);
    `"".join(parts) == prompt_text` whatever the text is."""
    parts = [prompt_text]
    for cut in _PART_CUTS:
        out = []
        for p in parts:
            pieces = p.split(cut)
            out += [x + cut for x in pieces[:-1]]
            out += [pieces[-1]] if pieces[-1] else []
        parts = out
    return parts


# answers shorter than this are not worth a quote (and might match by accident)
QUOTE_MIN_BYTES = 256


def part_key(part: bytes) -> int:
    """A part's key in a journal: 63 bits of BLAKE2b, the same in every process (a resumed
    segment's parts meet the earlier segment's)."""
    return int.from_bytes(hashlib.blake2b(part, digest_size=8).digest(), "little") >> 1


def cut_quoted(prompt: str, answers) -> Iterator[tuple[str, tuple | None]]:
    """(part, answer or None) in order: each of the unit's earlier `answers` (tuples whose
    first item is the answer as JSON escapes it) quoted whole is one part, the text around
    them cut by `prompt_parts`; `"".join` of the parts is `prompt`."""
    spans = []
    for answer in answers:
        at = prompt.find(answer[0])
        while at >= 0:
            spans.append((at, at + len(answer[0]), answer))
            at = prompt.find(answer[0], at + len(answer[0]))
    pos = 0
    for start, stop, answer in sorted(spans, key=lambda s: (s[0], -s[1])):
        if start < pos:        # overlaps a quote already taken
            continue
        yield from ((p, None) for p in prompt_parts(prompt[pos:start]))
        yield prompt[start:stop], answer
        pos = stop
    yield from ((p, None) for p in prompt_parts(prompt[pos:]))


# Hashes per statement: a literal IN list stays a filter on the scanned column up to many
# thousands of values; beyond that the statement itself grows slow to plan.
_CHUNK = 4096
# rows this close are read in one range (a vector of a DuckDB column holds 2,048)
_NEAR = 2048


def _in(values: list[int]) -> str:
    return ",".join(map(str, values))


def _chunks(values: list[int]) -> Iterable[list[int]]:
    for i in range(0, len(values), _CHUNK):
        yield values[i:i + _CHUNK]


def _rows(con: duckdb.DuckDBPyConnection, sql: str, keys: Iterable[int]) -> dict:
    """`sql` (with `{}` for a literal list of keys) over the keys, a chunk at a time."""
    out: dict = {}
    for chunk in _chunks(sorted(keys)):
        out.update(con.execute(sql.format(_in(chunk))).fetchall())
    return out


def _texts(con: duckdb.DuckDBPyConnection, hashes: Iterable[int],
           text: str = "text") -> dict[int, str]:
    """`text` (an expression of the column) of each stored text by hash. The rows are found
    on the hash column alone, then read a run of nearby row ids at a time. DuckDB pushes a
    row id range into the scan but not a long IN list: a filter by hash or by a list of row
    ids decompresses every vector of texts (0.17 s for one unit's 91 parts in 4 nights,
    ZSTD-compressed, warm), a range only those it spans (0.012 s). Texts are never deleted,
    so row ids hold; each text comes back with its hash, so a moved row could only be
    missing, never wrong."""
    rowids = sorted(r for r, in con.execute("SELECT rowid FROM texts WHERE hash IN ({})".format(
        _in(sorted(hashes)))).fetchall()) if hashes else []
    runs: list[list[int]] = []
    for r in rowids:
        if runs and r - runs[-1][-1] <= _NEAR:
            runs[-1].append(r)
        else:
            runs.append([r])
    return dict(con.execute(" UNION ALL ".join(
        f"SELECT hash, {text} FROM texts WHERE rowid BETWEEN {run[0]} AND {run[-1]} "
        f"AND rowid IN ({_in(run)})" for run in runs)).fetchall()) if runs else {}


def _parts(con: duckdb.DuckDBPyConnection, hashes: set[int],
           answers: Mapping[int, str]) -> dict[int, str]:
    """Part texts by hash: stored ones, then quoted answers as JSON escapes them (m013)."""
    out = {}
    for chunk in _chunks(sorted(hashes)):
        out.update(_texts(con, chunk))
    quotes = _rows(con, "SELECT hash, any_value(text_hash) FROM quotes WHERE hash IN ({}) "
                        "GROUP BY hash", hashes - out.keys())
    if quotes:
        # the journal quotes only answers that to_json escapes exactly as orjson does
        escaped = {a: orjson.dumps(answers[a]).decode()[1:-1] for a in set(quotes.values())
                   if a in answers}
        for chunk in _chunks(sorted(set(quotes.values()) - escaped.keys())):
            escaped.update(_texts(con, chunk, "(to_json(text)::VARCHAR)[2:-2]"))
        out.update({h: escaped[a] for h, a in quotes.items() if a in escaped})
    return out


def prompt_texts(con: duckdb.DuckDBPyConnection, hashes: Iterable[int | None],
                 answers: Mapping[int, str] | None = None) -> dict[int, str]:
    """The prompt text (the messages' JSON, byte for byte as sent) of each given
    `prompt_hash` that the warehouse holds, whichever way it was stored; hashes it does not
    hold (and None) are left out. Cost grows with the prompts asked for, not the warehouse.
    `answers`: answer texts by hash the caller has read already (a unit's, for its page):
    prompts quoting them are rebuilt from these instead of reading them again."""
    wanted = sorted({int(h) for h in hashes if h is not None})
    parts = _rows(con, "SELECT prompt_hash, any_value(parts) FROM prompts "
                       "WHERE prompt_hash IN ({}) GROUP BY prompt_hash", wanted)
    # stored whole, before m012 (a call must name it, as in v_prompts)
    whole = _rows(con, "SELECT DISTINCT prompt_hash, 1 FROM calls WHERE prompt_hash IN ({})",
                  [h for h in wanted if h not in parts])
    texts = _parts(con, {p for ps in parts.values() for p in ps}, answers or {})
    for chunk in _chunks(sorted(whole)):
        texts.update(_texts(con, chunk))
    out = {h: texts[h] for h in whole if h in texts}
    for h, ps in parts.items():
        lost = [p for p in ps if p not in texts]
        if lost:
            raise DataError(f"prompt {h}: {len(lost)} of its parts are not in texts; the "
                            "warehouse is damaged (restore it, or ingest its journals again)")
        out[h] = "".join(texts[p] for p in ps)
    return out
