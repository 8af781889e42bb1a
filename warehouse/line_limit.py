"""The journal's line limit: any answer up to it is stored whole; beyond it, one failed call.

DuckDB reads a journal's call and part lines with `read_json`, whose `maximum_object_size`
(16 MiB by default) bounds a line: one 50 MB answer made a night impossible to ingest, and
every rerun failed the same way, taking the other path's calls with it. A journal with a
line longer than the default is now read alone, at a size just above that line, up to
`READ_OBJECT_BYTES` (measured: a 130 MB line read in 0.18 s and ~340 MB of memory), and the
writer never writes a line over
`MAX_LINE_BYTES`: a call whose answer (or prompt) would make one is journaled as a failed
call (`error_kind = 'answer_too_large'`, its text left out), and its unit as `call_failed`,
so the unit is scored again on a rerun and the night's other units are untouched.
"""

from __future__ import annotations

import dataclasses

from dualpath.records import CALL_FAILED, MEASURED, CallRecord, UnitResult

# a journal line at most: 2.5x the largest answer seen to break ingest (50 MB)
MAX_LINE_BYTES = 128 * 2**20
# what DuckDB's reader accepts: room for lines written before the limit existed
READ_OBJECT_BYTES = 2 * MAX_LINE_BYTES
# DuckDB's own default maximum_object_size, kept for journals of ordinary lines
DEFAULT_OBJECT_BYTES = 16 * 2**20
TOO_LARGE = "answer_too_large"
# a call line's share that is not the record (its prompt's hash and part keys)
_RESERVE = 2**20


def _detail(what: str, size: int) -> str:
    return (f"the {what} is {size:,} bytes as a journal line, over the journal's "
            f"{MAX_LINE_BYTES:,}-byte limit: not stored, the call counted as failed")


def _prompt_bytes(text: str) -> int:
    # orjson escapes a character in at most 6 bytes: exact only when that bound is too big
    bound = 6 * len(text) + 2
    return bound if bound <= MAX_LINE_BYTES else len(text.encode("utf-8", "surrogatepass"))


def bound_call(record: CallRecord, line_bytes: int) -> CallRecord | None:
    """The call as it may be journaled (a failed copy without its texts), or None when it
    fits as it is. `line_bytes`: its line without the prompt."""
    prompt = _prompt_bytes(record.prompt_text)
    if line_bytes + _RESERVE <= MAX_LINE_BYTES and prompt <= MAX_LINE_BYTES:
        return None
    what, size = ("answer", line_bytes) if line_bytes + _RESERVE > MAX_LINE_BYTES \
        else ("prompt", prompt)
    return dataclasses.replace(
        record, output_text="", error_kind=TOO_LARGE, error_detail=_detail(what, size),
        prompt_text=record.prompt_text if what == "answer" else
        f"(a prompt of {size:,} bytes, over the journal's line limit)")


def bound_unit(record: UnitResult, line_bytes: int, failed_call: str | None) -> UnitResult | None:
    """The unit as it may be journaled, or None when it stands as it is: not measured when
    one of its calls was too large (`failed_call`: that call's detail) or its own final
    answer makes too long a line."""
    if failed_call is None and line_bytes <= MAX_LINE_BYTES:
        return None
    detail = failed_call or _detail("final answer", line_bytes)
    return dataclasses.replace(
        record, final_text=None if line_bytes > MAX_LINE_BYTES else record.final_text,
        outcome=CALL_FAILED if record.outcome in MEASURED else record.outcome,
        grade=None, failure_detail=detail)
