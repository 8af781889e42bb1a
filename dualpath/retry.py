"""Which call failures are worth another attempt, and how long to wait before it.

A fault is *transient* when the same request may well succeed a moment later: the server was
restarting, overloaded, or the connection broke mid-answer. It is *permanent* when sending the
same bytes again must fail the same way (a 4xx that is not 408/429, a prompt longer than the
context). Retrying a permanent fault only burns the night; not retrying a transient one
turns a one-second hiccup into a failed unit.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Mapping

import httpx
import orjson

from dualpath.engines import overflow_markers

# 408 request timeout, 429 rate limited, 500 server error (llama-server answers 500 for a
# slot that crashed mid-request), 502/503/504: loading, overloaded, or a proxy in between.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# Markers of a prompt longer than the server's context, in every engine's error bodies
# (llama-server's error type, vLLM's text, OpenAI's code).
_OVERFLOW_MARKERS = overflow_markers()
_DETAIL_MAX = 500


@dataclass
class Fault(Exception):
    """One failed attempt: its kind (a stable name), detail, HTTP status, and whether it is
    worth retrying; `retry_after` is the server's own Retry-After, in seconds. `no_server`:
    nothing was there to answer (the connection refused, or one opened for this request
    reset before any byte of a reply), as while a server restarts on its port."""

    kind: str
    detail: str
    transient: bool
    status: int | None = None
    retry_after: float | None = None
    no_server: bool = False

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"

    def as_dict(self, attempt: int, wait_s: float | None) -> dict:
        """The attempt log entry (JSON-ready)."""
        return {"attempt": attempt, "kind": self.kind, "status": self.status,
                "detail": self.detail[:200], "wait_s": None if wait_s is None else round(wait_s, 3)}


def transport_fault(e: httpx.HTTPError, read_timeout_s: float) -> Fault:
    """A fault from an httpx exception raised while connecting, sending or reading."""
    name = f"{type(e).__name__}: {e}"[:_DETAIL_MAX]
    if isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout)):
        return Fault("connect_error", name, True, no_server=True)
    if isinstance(e, httpx.TimeoutException):     # read, write or pool timeout
        return Fault("timeout", f"{type(e).__name__} after {read_timeout_s}s of silence", True)
    if isinstance(e, (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)):
        # a reset, or a connection closed before the whole response arrived
        return Fault("connection_reset", name, True)
    return Fault("transport_error", name, False)


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date (None if unreadable)."""
    if not value:
        return None
    value = value.strip()
    try:
        secs = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        secs = when.timestamp() - (time.time() if now is None else now)
    return max(secs, 0.0) if secs == secs and secs != float("inf") else None


def status_fault(status: int, text: str, headers: Mapping[str, str]) -> Fault:
    """A fault from a non-200 reply, named by what the body says when it says something."""
    detail = text[:_DETAIL_MAX]
    try:
        body = orjson.loads(text)
        err = body.get("error", body) if isinstance(body, dict) else {}
        if isinstance(err, dict):
            kind = err.get("type") or err.get("object") or ""
            msg = err.get("message") or ""
            detail = (f"{kind}: {msg}".strip(": ") or detail)[:_DETAIL_MAX]
        elif isinstance(err, str):
            detail = err[:_DETAIL_MAX]
    except orjson.JSONDecodeError:
        pass
    if status == 400 and any(m in text for m in _OVERFLOW_MARKERS):
        return Fault("context_overflow", detail, False, status)
    if status in TRANSIENT_STATUSES:
        return Fault(f"http_{status}", detail, True, status,
                     retry_after_s(headers.get("retry-after")))
    return Fault(f"http_{status}", detail, False, status)


def body_fault(content: bytes, error: Exception) -> Fault:
    """A 200 whose body is not a completion: cut (retry) or not a completion at all."""
    head = content[:300].decode(errors="replace")
    if content.lstrip()[:1] in (b"{", b"["):
        # it began as JSON and did not end as JSON: the body was cut short on the way
        return Fault("cut_body", f"reply cut short after {len(content)} bytes: {error}", True)
    return Fault("bad_response", f"unreadable completion: {error!r}: {head}", False)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: attempt n waits base * 2**(n-1), capped, times a
    random factor in [0.5, 1) so that many slots retrying after one outage do not return in
    lockstep. A Retry-After from the server is waited at least, up to `retry_after_max_s`."""

    base_s: float
    max_s: float
    retry_after_max_s: float

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        exp = min(self.base_s * 2.0 ** min(attempt - 1, 30), self.max_s)
        wait = exp * (0.5 + 0.5 * rng.random())
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.retry_after_max_s))
        return wait
