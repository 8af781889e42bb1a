"""A server's numbers are untrusted input: usage counts and timings range-checked before they
are kept as numbers.

A reply's `usage`, llama-server's `timings` and vLLM's per-request `metrics` are copied onto the
`CallRecord` (`take_meta`) only when each is a number of the right kind inside a plausible
range. Anything else (a count of 2**40, which no warehouse INTEGER holds and which once made
every ingest of its journal fail; a count sent as "lots"; a negative or non-finite time) is
left out of the numeric field and kept as it was sent in `CallRecord.untrusted` (JSON: the
reply's field path -> the value's JSON text), where the warehouse flags the call, and its run's
speed, from it. The same check runs again at ingest (`LIMITS`, read by `warehouse`), for
journals written before it existed.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from dualpath.records import CallRecord

# A token count past any model's context (the largest served are ~10M tokens), or a time past
# a day, is not a measurement. Counts are integers (no bool: JSON true is not 1 token).
MAX_TOKENS = 2**24          # 16.8M: far above any context, far below INT32's 2.1G
MAX_MS = 86_400_000.0       # a day, in milliseconds
MAX_PER_SECOND = 1e7        # tokens per second

# CallRecord field -> (kind, upper bound); every lower bound is 0
LIMITS: dict[str, tuple[type, float]] = {
    "prompt_tokens": (int, MAX_TOKENS), "completion_tokens": (int, MAX_TOKENS),
    "cached_tokens": (int, MAX_TOKENS), "reasoning_tokens": (int, MAX_TOKENS),
    "prompt_n": (int, MAX_TOKENS), "predicted_n": (int, MAX_TOKENS), "cache_n": (int, MAX_TOKENS),
    "draft_n": (int, MAX_TOKENS), "draft_n_accepted": (int, MAX_TOKENS),
    "prompt_ms": (float, MAX_MS), "predicted_ms": (float, MAX_MS),
    "prompt_per_second": (float, MAX_PER_SECOND), "predicted_per_second": (float, MAX_PER_SECOND),
}

TIMING_FIELDS = ("prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
                 "predicted_per_second", "cache_n", "draft_n", "draft_n_accepted")


def in_range(field: str, value: Any) -> bool:
    """True when `value` may be stored as `field`'s number."""
    kind, hi = LIMITS[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if kind is int and not isinstance(value, int):
        return False
    return math.isfinite(value) and 0 <= value <= hi


def _as_sent(value: Any) -> str:
    # stdlib json: it writes any integer (orjson refuses those past 64 bits) and NaN as sent
    try:
        return json.dumps(value)[:200]
    except (TypeError, ValueError):
        return repr(value)[:200]


def take_number(rec: CallRecord, field: str, value: Any, where: str) -> None:
    """Set `rec.<field>` to `value` if it is in range, else keep it in `rec.untrusted`."""
    if value is None:
        return
    if in_range(field, value):
        setattr(rec, field, value)
        return
    note_untrusted(rec, where, _as_sent(value))


def note_untrusted(rec: CallRecord, where: str, as_sent: str) -> None:
    """Add `where` -> `as_sent` to the record's untrusted values."""
    seen = orjson.loads(rec.untrusted) if rec.untrusted else {}
    seen[where] = as_sent
    rec.untrusted = orjson.dumps(seen).decode()


def take_meta(rec: CallRecord, data: dict[str, Any]) -> None:
    """Copy usage, timings, per-request metrics and identity fields present in `data`."""
    if data.get("model"):
        note_model(rec, data)
        rec.response_model = rec.response_model or data["model"]
    if data.get("system_fingerprint"):
        rec.system_fingerprint = data["system_fingerprint"]
    usage = data.get("usage")
    if isinstance(usage, dict) and usage:
        _take_usage(rec, usage)
    elif usage:
        note_untrusted(rec, "usage", _as_sent(usage))
    timings = data.get("timings")
    if isinstance(timings, dict) and timings:
        for k in TIMING_FIELDS:
            take_number(rec, k, timings.get(k), f"timings.{k}")
        rec.timings_json = orjson.dumps(timings).decode() if _plain(timings) else None
        if rec.cached_tokens is None and rec.cache_n is not None:
            rec.cached_tokens = rec.cache_n
    metrics = data.get("metrics")
    if isinstance(metrics, dict):
        rec.server_metrics_json = orjson.dumps(metrics).decode() if _plain(metrics) else None
        # vLLM --enable-per-request-metrics (vllm/entrypoints/generate/base/serving.py, 0.33):
        # scheduled -> first token is its prefill, first -> last token its decode; the
        # server's own service time, as llama-server's timings give it
        if rec.prompt_ms is None:
            take_number(rec, "prompt_ms", metrics.get("time_to_first_token_ms"),
                        "metrics.time_to_first_token_ms")
        if rec.predicted_ms is None:
            take_number(rec, "predicted_ms", metrics.get("generation_time_ms"),
                        "metrics.generation_time_ms")


def _take_usage(rec: CallRecord, usage: dict[str, Any]) -> None:
    take_number(rec, "prompt_tokens", usage.get("prompt_tokens"), "usage.prompt_tokens")
    take_number(rec, "completion_tokens", usage.get("completion_tokens"),
                "usage.completion_tokens")
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict):
        take_number(rec, "cached_tokens", details.get("cached_tokens"),
                    "usage.prompt_tokens_details.cached_tokens")
    # vLLM with a reasoning parser counts the thinking; llama-server does not
    out_details = usage.get("completion_tokens_details")
    if isinstance(out_details, dict) and out_details.get("reasoning_tokens") is not None:
        take_number(rec, "reasoning_tokens", out_details["reasoning_tokens"],
                    "usage.completion_tokens_details.reasoning_tokens")
        if rec.reasoning_tokens is not None:
            rec.reasoning_tokens_basis = "server"


def _plain(obj: dict[str, Any]) -> bool:
    """orjson can write it (no integer past 64 bits): else the verbatim copy is dropped and
    its numbers are in `untrusted`."""
    try:
        orjson.dumps(obj)
        return True
    except TypeError:
        return False


def note_model(rec: CallRecord, data: dict[str, Any]) -> None:
    """A reply whose events name more than one model came from more than one server (or a
    proxy that switched mid-reply): kept in `untrusted` and, by `model_changed`, contamination."""
    model = data.get("model")
    if model and rec.response_model and model != rec.response_model:
        note_untrusted(rec, "model", _as_sent([rec.response_model, model]))


def model_changed(rec: CallRecord) -> None:
    """Mark a call contaminated when its reply named another model part way through."""
    if not rec.untrusted or '"model"' not in rec.untrusted:
        return
    models = orjson.loads(orjson.loads(rec.untrusted)["model"])
    why = f"the reply named model {models[1]!r} after {models[0]!r}"
    rec.contaminated = f"{rec.contaminated}; {why}" if rec.contaminated else why
