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
    attempt_errors: str | None = None     # JSON: each failed attempt before the last
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
    output_text: str = ""                 # the answer only: thinking never goes here
    contaminated: str | None = None       # why this response came from another server, if it did
    # The model's thinking, kept apart from the answer (never quoted, never graded), and its
    # tokens: counted by the server (vLLM with a reasoning parser) or estimated from the
    # characters' share of completion_tokens (basis 'chars'); None when nothing was thought.
    reasoning_text: str = ""
    reasoning_tokens: int | None = None
    reasoning_tokens_basis: str | None = None   # server | chars
    # JSON: what the server sent that was not kept as sent (dualpath.server_numbers): a usage
    # count or timing out of range or of the wrong type (its field path -> the value's JSON
    # text), the models a reply named when it named more than one (`model`)
    untrusted: str | None = None

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


# What became of a unit. Only the first two are measurements (a graded unit, or a model that
# answered without a readable grade); the others are failures of the harness, the server or
# the inputs, which a rerun of the night scores again.
GRADED, PARSE_FAILED = "graded", "parse_failed"
CALL_FAILED, INPUT_FAILED, PIPELINE_FAILED = "call_failed", "input_failed", "pipeline_failed"
CONTAMINATED, ABANDONED = "contaminated", "abandoned"
MEASURED = frozenset({GRADED, PARSE_FAILED})


@dataclass(slots=True)
class UnitResult:
    """The outcome of one unit attempt: a grade, or what prevented one.

    outcome: graded | parse_failed (the model answered, no grade: a quality outcome) |
    call_failed (a call failed after its retries) | input_failed (no prices or inputs for the
    ticker) | pipeline_failed (the pipeline code raised) | contaminated (a call was answered
    by another server). `abandoned` is never written: it is what a started unit with no
    result becomes at ingest.
    """

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
    outcome: str
    grade: int | None = None
    failure_detail: str | None = None
    final_text: str | None = None

    @property
    def seconds(self) -> float:
        """Slot-latency basis: first call start to last call end of this unit."""
        return self.end_mono - self.start_mono

    @property
    def measured(self) -> bool:
        return self.outcome in MEASURED


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
    binary_sha256: str | None = None       # the process behind the port, on this host only
    model_sha256: str | None = None        # the model file it loaded, where readable here
    backend: str | None = None             # "Vulkan", "CUDA", "CPU": its start log, on this host
    device: str | None = None              # "Vulkan0 (NVIDIA H200)": likewise


@dataclass(slots=True)
class RunBegin:
    """A scoring segment of a path-run began: what the warehouse keys the run by."""

    run_id: str
    experiment: str
    night: str
    path: str
    engine: str
    config_hash: str
    units_planned: int
    units_remaining: int
    tickers_planned: int
    slots: int
    time_scale: float
    segment: int
    started_wall: float


@dataclass(slots=True)
class ServerSession:
    """The server a segment talked to: where, how it was obtained, and what it said it was.

    Written at the start of a segment and completed (same session_id) at its end with the
    server's own counters, the sampling it applied, the load that was not ours, and whether
    its identity held.
    """

    session_id: str
    run_id: str
    segment: int
    path: str
    engine: str | None = None
    dialect: str | None = None
    base_url: str | None = None
    how: str | None = None                 # attached | launched | simulated
    model: str | None = None
    model_path: str | None = None
    slots: int | None = None
    n_ctx_per_slot: int | None = None
    build: str | None = None
    speculative: bool | None = None
    sampling_json: str | None = None
    raw_json: str | None = None
    command: str | None = None
    env_json: str | None = None
    log_path: str | None = None
    gpu_state: str | None = None
    started_wall: float | None = None
    host: str | None = None                # the machine that scored the segment
    worker: str | None = None              # the Prefect worker that ran it (None: the flow's own)
    binary_sha256: str | None = None       # see dualpath.binaries
    model_sha256: str | None = None


@dataclass(slots=True)
class SessionEnd:
    """The end-of-segment half of a `ServerSession` (merged by session_id at ingest)."""

    session_id: str
    stopped_wall: float
    metrics_before_json: str | None = None
    metrics_after_json: str | None = None
    effective_sampling_json: str | None = None
    load_polls: int = 0
    external_load_polls: int = 0
    external_load_max: int = 0
    identity_checks: int = 0
    # wall time of the last identity re-read that still matched; set only when a later one
    # did not: calls that ended after it may have come from another server
    identity_lost_after_wall: float | None = None
    # the same instant and the segment's stop on the monotonic clock of the process that
    # made the calls: the window compared with the calls' end_mono (a wall clock stepped
    # back after a swap emptied the wall window)
    identity_lost_after_mono: float | None = None
    stopped_mono: float | None = None
    identity_problem: str | None = None
    # the longest stretch, beyond one poll period, in which the server answered no /health
    # poll (stopped, hung or restarting): the run's seconds include it
    unanswered_s: float | None = None


@dataclass(slots=True)
class RunEnd:
    """A scoring segment ended, with its own counts and (when not complete) why."""

    run_id: str
    segment: int
    started_wall: float
    ended_wall: float
    status: str                              # complete | partial | failed
    detail: str | None
    units_done: int
    units_measured: int
    calls: int
    # seconds the segment ran, by the monotonic clock (the wall stamps above only label it:
    # a stepped wall clock read -3,580 s); None in journals from before it was kept
    wall_s: float | None = None
