"""What a run produces: one `CallRecord` per LLM call and one `UnitResult` per unit.

A *unit* is one ticker x draw scored by the pipeline on one path. Records are plain dataclasses
so that a journal can write hundreds of thousands of them quickly (orjson serialises
dataclasses natively) and the warehouse can ingest them column by column.

Times: `*_wall` are Unix epoch seconds (comparable across machines and processes);
`*_mono` are `time.monotonic()` seconds (immune to clock steps, comparable within one boot).
Durations are always taken from the monotonic clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# finish_reason of a call that hit max_tokens: a runaway output, not an answer.
RUNAWAY = "length"


@dataclass(slots=True)
class CallRecord:
    """One LLM call as the client saw it, with the server's own timings."""

    call_id: str
    run_id: str
    path: str
    ticker: str
    draw: int
    unit_attempt: int
    agent: str
    call_seq: int
    start_wall: float
    start_mono: float
    end_wall: float = 0.0
    end_mono: float = 0.0
    first_token_mono: float | None = None
    http_status: int | None = None
    attempts: int = 0
    error_kind: str | None = None
    error_detail: str | None = None
    finish_reason: str | None = None
    response_model: str | None = None
    system_fingerprint: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    # llama.cpp `timings`
    prompt_n: int | None = None
    prompt_ms: float | None = None
    prompt_per_second: float | None = None
    predicted_n: int | None = None
    predicted_ms: float | None = None
    predicted_per_second: float | None = None
    cache_n: int | None = None
    draft_n: int | None = None
    draft_n_accepted: int | None = None
    timings_json: str | None = None       # every timing field the server returned, verbatim
    # vLLM per-request metrics (time_to_first_token_ms, generation_time_ms, queue_time_ms, ...)
    server_metrics_json: str | None = None
    request_json: str = ""                # the sampling/body fields sent (without messages)
    prompt_text: str = ""                 # messages, serialised
    output_text: str = ""
    contaminated: str | None = None       # why this response came from another server, if it did

    @property
    def latency_s(self) -> float:
        """Client-side seconds from request start to the last byte."""
        return self.end_mono - self.start_mono

    @property
    def ttft_s(self) -> float | None:
        """Client-side seconds to the first generated token (streaming only)."""
        return None if self.first_token_mono is None else self.first_token_mono - self.start_mono

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def runaway(self) -> bool:
        """True when the output stopped at max_tokens instead of finishing."""
        return self.finish_reason == RUNAWAY


@dataclass(slots=True)
class UnitResult:
    """The outcome of one unit: a grade, or the kind of failure that prevented one."""

    run_id: str
    path: str
    ticker: str
    draw: int
    unit_attempt: int
    start_wall: float
    start_mono: float
    end_wall: float
    end_mono: float
    n_calls: int
    grade: int | None = None
    failure_kind: str | None = None     # parse_failure | server_error | pipeline_error
    failure_detail: str | None = None
    final_text: str | None = None

    @property
    def seconds(self) -> float:
        """Slot-latency basis: first call start to last call end of this unit."""
        return self.end_mono - self.start_mono


@dataclass(slots=True)
class UnitStart:
    """Marks that a unit began: calls of a unit without a matching result were abandoned."""

    run_id: str
    path: str
    ticker: str
    draw: int
    unit_attempt: int
    start_wall: float


@dataclass(slots=True)
class ServerIdentity:
    """What a server says it is, read before a run and checked against the path's expectation."""

    base_url: str
    engine: str
    model: str | None = None
    model_path: str | None = None
    slots: int | None = None
    n_ctx_per_slot: int | None = None
    build: str | None = None
    speculative: bool | None = None
    sampling: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
