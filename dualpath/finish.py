"""How a reply ended: only a normal end is a finished answer.

`stop` (the model ended its answer, or a stop string) and `length` (it hit max_tokens: a
runaway, recorded as such) are the two normal ends in both engines. Anything else is an
attempt that failed and is retried as transient: a missing `finish_reason` (a reply cut short
by a proxy or a crashed worker), vLLM's `abort` (sent for every aborted request, including
each one in flight when the server shuts down: the answer is cut wherever it was) and `error`
(vLLM's own retryable request failure), `repetition` (vLLM stopped a looping generation), or a
reason no engine we serve sends (vllm/v1/engine/__init__.py `FinishReason`, 0.33.0;
llama-server sends only `stop` and `length` without tools).
"""

from __future__ import annotations

from dualpath.records import CallRecord
from dualpath.retry import Fault

NORMAL_ENDS = frozenset({"stop", "length"})


def check_finish(rec: CallRecord) -> None:
    """Raise a transient `Fault` (kind `bad_finish`) unless the reply ended normally."""
    reason = rec.finish_reason
    if reason in NORMAL_ENDS:
        return
    what = ("no finish_reason" if reason is None
            else f"finish_reason {str(reason)[:40]!r} is not a normal end")
    raise Fault("bad_finish", f"{what}: the answer may be cut; retried", True, 200)
