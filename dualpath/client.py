"""The serving-path client: one chat call in, one `CallRecord` out.

Every sampling parameter is sent explicitly, in each engine's dialect, because the engines
fill unsent ones differently (llama-server: top_k 40, min_p 0.05, presence penalty only over
the last 64 tokens; vLLM: the model's generation_config). A call never raises for a server
problem: the failure is part of the record, and `CallFailed` is raised by the pipeline context.

Failures are sorted by fault class (`dualpath.retry`), not guessed per call site:

- transient, retried with exponential backoff and jitter (Retry-After honoured), within
  `max_attempts` and `retry_budget_s` per call: connect errors, connection resets, HTTP
  408/429/500/502/503/504, read timeouts, and cut bodies (a 200 whose JSON ends early, a
  stream that ends without its usage chunk and `[DONE]`: a cut answer is never accepted);
- permanent, recorded at once under a named kind: context overflow (`context_overflow`),
  other 4xx (`http_4xx`), replies that are not completions at all (`bad_response`).

Every failed attempt is logged on the record (`attempt_errors`), so a call that succeeded on
its third try says what the first two met.
"""
from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import orjson

from dualpath.config import Sampling, ServingPath
from dualpath.finish import check_finish
from dualpath.records import CallRecord
from dualpath.engines import engine, reasoning_fields
from dualpath.sampling import sampling_body
from dualpath.retry import TRANSIENT_STATUSES, Backoff, Fault, body_fault, status_fault
from dualpath.server_numbers import TIMING_FIELDS as _TIMING_FIELDS
from dualpath.server_numbers import model_changed, note_model
from dualpath.server_numbers import take_meta as _take_meta
from dualpath.thinking import keep_thinking_apart, split_thinking  # noqa: F401 (re-exported)
from dualpath.transport import StreamReply, Timeouts, Transport, as_transport

# attempts at most that wait for an absent server without counting: a guard against a
# near-zero backoff spinning (at the default 1 s doubling to 60 s, 60 s of waiting is 6)
_DOWN_MAX = 100


@dataclass(slots=True)
class ChatRequest:
    """One call a pipeline wants to make."""

    agent: str
    messages: list[dict[str, str]]
    ticker: str
    draw: int
    unit_attempt: int
    call_seq: int
    seed: int | None = None
    json_schema: dict[str, Any] | None = None
    id_slot: int | None = None     # llama-server slot to run on (its prompt cache), None: any


def schema_body(dialect: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Constrained-output fields for a JSON schema in the server's dialect."""
    return engine(dialect).schema_body(schema)


class PathClient:
    """Makes calls to one serving path and turns each into a `CallRecord`."""

    def __init__(self, name: str, path: ServingPath, sampling: Sampling,
                 http: Any, run_id: str, *, base_url: str | None = None,
                 api_key: str | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 rng: random.Random | None = None):
        self.name = name
        self.path = path
        self.sampling = sampling
        # an `dualpath.transport` transport (aiohttp on nights), or an httpx client
        self.http: Transport = as_transport(http)
        self.run_id = run_id
        self.url = f"{base_url or path.base_url}/v1/chat/completions"
        self.headers = {"content-type": "application/json"}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"
        # a request may wait in the server's queue behind queue_depth others, each of which
        # may take up to call_timeout_s: the wait for its first byte is bounded accordingly
        self.timeout = Timeouts(path.connect_timeout_s, path.read_timeout_s, path.call_timeout_s,
                                path.call_timeout_s * (1 + path.server_queue_depth))
        self.backoff = Backoff(path.backoff_s, path.backoff_max_s, path.retry_after_max_s)
        self._sleep = sleep
        self._reasoning_fields = reasoning_fields(path.dialect)
        self._rng = rng or random.Random(0)
        # Set from the identity check: a response from another build/model is contamination.
        # Only what the engine's replies really carry is pinned (see `pin`).
        self.expected_fingerprint: str | None = None
        self.expected_model: str | None = None
        self._fingerprint_of: str | None = None    # vLLM: the version a fingerprint must carry
        # Set by the identity watcher when a re-read of the server's identity no longer
        # matches: every later response is contaminated, whatever it says.
        self.identity_problem: str | None = None
        self.in_flight = 0   # calls of this client the server may be processing now
        # since when this path's server has refused or reset new connections (None: it
        # answers); the wait for it is the path's, not each call's: per call, a server gone
        # for good held every unit's first call ~5 min, and a night ran on for hours
        self._down_since: float | None = None

    def pin(self, model: str | None, build: str | None, dialect: str,
            fingerprint: str | None = None) -> None:
        """Expect every response to name this model and, where the engine's replies carry
        one, this build. llama-server puts its build in `system_fingerprint`. vLLM sends
        `vllm-<version>[-tpN...]-<config hash>` there (vllm/entrypoints/serve/utils/
        fingerprint.py, 0.33): pinned whole when the path's expect gives it (`fingerprint`),
        else taken from the first response that carries one, which must be of the version
        `/version` reported (`build` = `vllm-<version>`)."""
        self.expected_model = model
        self.expected_fingerprint, self._fingerprint_of = \
            engine(dialect).fingerprint_pin(build, fingerprint)

    def applied_sampling(self) -> dict[str, Any] | None:
        """The sampling a server that never reports it applies (vLLM): what it is sent
        (see `dualpath.sampling.applied_from_request`); None for other engines, whose
        servers are asked (llama-server's /slots) or say nothing."""
        return engine(self.path.dialect).sent_sampling(self.sampling)

    def body(self, req: ChatRequest) -> dict[str, Any]:
        """The request body without messages (recorded as `request_json`)."""
        body: dict[str, Any] = {"model": self.path.model, "stream": self.path.stream}
        body.update(sampling_body(self.path.dialect, self.sampling, req.seed))
        if self.path.stream:
            body["stream_options"] = {"include_usage": True}
        if req.json_schema is not None:
            body.update(schema_body(self.path.dialect, req.json_schema))
        if req.id_slot is not None:
            body.update(engine(self.path.dialect).slot_body(req.id_slot))
        return body

    async def chat(self, req: ChatRequest) -> CallRecord:
        """Make one call (with retries); never raises for server-side problems."""
        body = self.body(req)
        rec = CallRecord(
            call_id=uuid.uuid4().hex, run_id=self.run_id, path=self.name, ticker=req.ticker,
            draw=req.draw, unit_attempt=req.unit_attempt, agent=req.agent, call_seq=req.call_seq,
            start_wall=time.time(), start_mono=time.monotonic(),
            request_json=orjson.dumps(body).decode(),
            prompt_text=orjson.dumps(req.messages).decode())
        payload = orjson.dumps({**body, "messages": req.messages})
        self.in_flight += 1
        try:
            await self._attempts(payload, rec)
        finally:
            self.in_flight -= 1
        rec.end_mono, rec.end_wall = time.monotonic(), time.time()
        keep_thinking_apart(rec, self.sampling.thinking)
        self._check_identity(rec)
        model_changed(rec)
        return rec

    async def _attempts(self, payload: bytes, rec: CallRecord) -> None:
        """Attempt until success, a permanent fault, `max_attempts`, or the retry budget.

        The budget bounds waiting and re-sending, never a generation already under way: no
        attempt starts (and no backoff is slept) past `retry_budget_s` after the call began.
        A server that is not there (`Fault.no_server`: refused, or reset before replying on
        a new connection) is waited for with the same backoff, for `server_down_wait_s` of
        sleeping (the last sleep may end past it), before its faults count toward
        `max_attempts`: a server restarting on
        its port takes seconds, and the attempts alone (~1 s of backoff at 6 attempts of
        0.05 s doubling) were spent before it listened again."""
        budget_end = rec.start_mono + self.path.retry_budget_s
        log: list[dict] = []
        counted = 0           # attempts that count toward max_attempts
        waited_down = 0.0     # backoff slept for a server that was not there
        while True:
            rec.attempts += 1
            try:
                if self.path.stream:
                    await self._stream(payload, rec)
                else:
                    await self._once(payload, rec)
                self._down_since = None
                break
            except Fault as f:
                _clear_attempt(rec)     # a cut answer's pieces must not leak into the next
                rec.http_status = f.status
                wait = self.backoff.delay(rec.attempts, f.retry_after, self._rng)
                now = time.monotonic()
                if f.no_server and self._down_since is None:
                    self._down_since = now
                down_for = now - self._down_since if self._down_since is not None else 0.0
                waiting = (f.no_server and 0 < wait and rec.attempts - counted < _DOWN_MAX
                           and waited_down < self.path.server_down_wait_s
                           and down_for < self.path.server_down_wait_s)
                counted += not waiting
                stop = self._why_stop(f, counted, rec.attempts, waited_down,
                                      time.monotonic() + wait > budget_end)
                log.append(f.as_dict(rec.attempts, None if stop is not None else wait))
                if stop is not None:
                    rec.error_kind, rec.error_detail = f.kind, f"{f.detail}{stop}"
                    break
                waited_down += wait if waiting else 0.0
                await self._sleep(wait)
        record_attempt_log(rec, log)

    def _why_stop(self, f: Fault, counted: int, attempts: int, waited_down: float,
                  over_budget: bool) -> str | None:
        """None to retry; else the suffix that says why the call ends here."""
        if not f.transient:
            return ""
        down = (f", {waited_down:.1f}s of them waiting for a server that refused or reset "
                "new connections" if waited_down else "")
        if counted >= self.path.max_attempts:
            return f" (transient; gave up after {attempts} attempts{down})"
        if over_budget:
            return (f" (transient; retry budget of {self.path.retry_budget_s:g}s spent "
                    f"after {attempts} attempts{down})")
        return None

    def _check_identity(self, rec: CallRecord) -> None:
        if not rec.ok:
            return
        why = []
        fp, version = rec.system_fingerprint, self._fingerprint_of
        if version and fp and not self.expected_fingerprint:
            if fp.startswith(version + "-"):
                self.expected_fingerprint = fp       # the first: every later one must match
            else:
                why.append(f"system_fingerprint {fp!r} is not of {version!r}")
        if self.expected_fingerprint and rec.system_fingerprint != self.expected_fingerprint:
            why.append(f"system_fingerprint {rec.system_fingerprint!r} != "
                       f"{self.expected_fingerprint!r}")
        if self.expected_model and rec.response_model != self.expected_model:
            why.append(f"model {rec.response_model!r} != {self.expected_model!r}")
        if self.identity_problem:
            why.append(self.identity_problem)
        rec.contaminated = "; ".join(why) or None

    async def _once(self, payload: bytes, rec: CallRecord) -> None:
        resp = await self.http.post(self.url, payload, self.headers, self.timeout)
        rec.http_status = resp.status
        if resp.status != 200:
            raise status_fault(resp.status, resp.text, resp.headers)
        try:
            data = orjson.loads(resp.body)
        except orjson.JSONDecodeError as e:
            raise body_fault(resp.body, e) from None
        try:
            choice = data["choices"][0]
            message = choice["message"]
            rec.output_text = message.get("content") or ""
            rec.reasoning_text = _reasoning_of(message, self._reasoning_fields)
            rec.finish_reason = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise Fault("bad_response", f"not a completion: {e!r}: {resp.text[:300]}",
                        False, 200) from None
        _take_meta(rec, data)
        check_finish(rec)

    async def _stream(self, payload: bytes, rec: CallRecord) -> None:
        async with self.http.stream(self.url, payload, self.headers, self.timeout) as resp:
            rec.http_status = resp.status
            if resp.status != 200:
                text = (await resp.read()).decode(errors="replace")
                raise status_fault(resp.status, text, resp.headers)
            parts: list[str] = []
            thought: list[str] = []
            await self._read_events(resp, rec, parts, thought)
            rec.output_text = "".join(parts)
            rec.reasoning_text = "".join(thought)

    async def _read_events(self, resp: StreamReply, rec: CallRecord, parts: list[str],
                           thought: list[str]) -> None:
        done = usage = False
        async for line in resp.lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                # read on to the end of the body (the server ends it here): a body left
                # unread closes the connection, and every streamed call would open a new one
                done = True
                continue
            if done:
                continue
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                # events are whole lines: a broken one is a stream cut mid-event
                raise Fault("cut_stream", f"unreadable stream event: {data[:200]}", True, 200) from None
            if "error" in chunk:
                raise _stream_error(chunk["error"])
            note_model(rec, chunk)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                text = delta.get("content")
                # the first token is the first thinking or answer token, in either dialect
                thinking = _reasoning_of(delta, self._reasoning_fields)
                if (text or thinking) and rec.first_token_mono is None:
                    rec.first_token_mono = time.monotonic()
                if text:
                    parts.append(text)
                if thinking:
                    thought.append(thinking)
                if choice.get("finish_reason"):
                    rec.finish_reason = choice["finish_reason"]
            if "usage" in chunk or "timings" in chunk or rec.response_model is None:
                # identity comes with the first event, usage and timings with the last ones:
                # the hundreds of token events in between need no more than their text
                usage = usage or bool(chunk.get("usage"))
                _take_meta(rec, chunk)
        if not (done and usage and rec.finish_reason):
            # every engine asked for usage sends it, then [DONE]: without them the answer,
            # its token counts and its timings may all be incomplete
            missing = [n for n, ok in (("finish_reason", rec.finish_reason), ("usage", usage),
                                       ("[DONE]", done)) if not ok]
            raise Fault("cut_stream", f"stream ended without {', '.join(missing)}", True, 200)
        check_finish(rec)


def _stream_error(err: Any) -> Fault:
    """An error event inside a 200 stream: transient when its code says so."""
    code = err.get("code") if isinstance(err, dict) else None
    transient = isinstance(code, int) and code in TRANSIENT_STATUSES
    return Fault("stream_error", str(err)[:500], transient, code if isinstance(code, int) else 200)


# What one attempt may have filled in; cleared before the next attempt.
_ATTEMPT_FIELDS = ("first_token_mono", "finish_reason", "response_model", "system_fingerprint",
                   "prompt_tokens", "completion_tokens", "cached_tokens", *_TIMING_FIELDS,
                   "timings_json", "server_metrics_json", "reasoning_tokens",
                   "reasoning_tokens_basis", "untrusted")


def _clear_attempt(rec: CallRecord) -> None:
    for name in _ATTEMPT_FIELDS:
        setattr(rec, name, None)
    rec.output_text = rec.reasoning_text = ""


def record_attempt_log(rec: CallRecord, log: list[dict]) -> None:
    """Keep each failed attempt on the record (`attempt_errors`, JSON) where the record
    has that field; the count is always in `attempts`."""
    if log and "attempt_errors" in getattr(type(rec), "__dataclass_fields__", {}):
        rec.attempt_errors = orjson.dumps(log).decode()


def _reasoning_of(msg: dict[str, Any], fields: tuple[str, ...]) -> str:
    """The thinking in a message or delta, in the first of `fields` it fills
    (`dualpath.engines.reasoning_fields`: the path's engine's own first)."""
    for name in fields:
        if got := msg.get(name):
            return got
    return ""
