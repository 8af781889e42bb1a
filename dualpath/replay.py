"""Frozen inputs, replayed: the recorded requests of a few tickers sent again as they were.

A replay set is the exact request bodies (sampling, seed, max_tokens) and messages of N
tickers' recorded units, with each call's place in its unit: `call_seq` and `stage`, its
position in the unit's DAG as recorded (a call's stage is one more than the highest stage of
the calls that had ended before it started, so calls that ran side by side share a stage).
Replaying keeps the inputs fixed and lets the outputs vary: a unit sends its stage-k calls
once its earlier stages are done, and the path's slot count stays in flight, oldest unit
first (as a night's scheduler does).

The set is content-hashed (`replay_hash`) over exactly what is sent, so two measurements
name the inputs they share. Files are Parquet, written and read by `warehouse.sweeps`.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

import httpx
import orjson
import pandas as pd

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.engines import engine
from dualpath.errors import DataError
from dualpath.records import CallRecord

# what a replay sends, in this order; the hash covers exactly these
CONTENT_COLUMNS = ["ticker", "draw", "call_seq", "stage", "agent", "request_json",
                   "prompt_json"]
REPLAY_COLUMNS = CONTENT_COLUMNS + ["seed", "max_tokens", "source_call_id", "source_run_id",
                                    "recorded_prompt_tokens", "recorded_completion_tokens"]


def dag_stages(starts: list[float], ends: list[float]) -> list[int]:
    """Each call's stage in its unit: 1 + the highest stage among calls that ended before it
    started (calls in `starts` order; one unit)."""
    order = sorted(range(len(starts)), key=lambda i: starts[i])
    stage = [0] * len(starts)
    for pos, i in enumerate(order):
        before = [stage[j] for j in order[:pos] if ends[j] <= starts[i]]
        stage[i] = 1 + max(before, default=0)
    return stage


def replay_hash(frame: pd.DataFrame) -> str:
    """SHA-256 (first 16 hex) of what a replay set sends, independent of row order."""
    rows = frame[CONTENT_COLUMNS].sort_values(["ticker", "draw", "call_seq"])
    h = hashlib.sha256()
    for rec in rows.itertuples(index=False):
        h.update(orjson.dumps([_plain(v) for v in rec]))
        h.update(b"\n")
    return h.hexdigest()[:16]


def _plain(v):
    return v.item() if hasattr(v, "item") else v


def check_replay_set(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """The set, validated: its columns, one stream mode, and bodies that parse."""
    missing = [c for c in REPLAY_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(f"{source} is not a replay set (missing columns {missing}); make one "
                        "with `dualpath freeze`")
    if frame.empty:
        raise DataError(f"{source} holds no calls; freeze a night that has recorded calls")
    streams = {bool(orjson.loads(b).get("stream")) for b in frame["request_json"]}
    if len(streams) > 1:
        raise DataError(f"{source} mixes streamed and plain requests; freeze one path")
    return frame.sort_values(["ticker", "draw", "call_seq"]).reset_index(drop=True)


class ReplayClient(PathClient):
    """A `PathClient` that sends each frozen request body as it was recorded, except a
    recorded `id_slot`: it names a slot of the recorded server, which a point with fewer
    slots does not have (the server then picks a slot by prompt similarity)."""

    def __init__(self, bodies: dict[tuple[str, int, int], dict], *args, **kw):
        super().__init__(*args, **kw)
        self.bodies = bodies

    def body(self, req: ChatRequest) -> dict:
        body = dict(self.bodies[(req.ticker, req.draw, req.call_seq)])
        body.pop("id_slot", None)
        return body


class _Slots:
    """At most `n` calls in flight; a freed slot goes to the oldest unit waiting."""

    def __init__(self, n: int):
        self.free = n
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._seq = itertools.count()

    async def acquire(self, priority: int) -> None:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._seq), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()    # handed over just as we were cancelled
            raise

    def release(self) -> None:
        while self._waiters:
            fut = heapq.heappop(self._waiters)[2]
            if not fut.done():
                fut.set_result(None)
                return
        self.free += 1


@dataclass
class ReplayResult:
    """What one replay did: every call's record, and whether it ran to the end."""

    planned: int
    records: list[CallRecord] = field(default_factory=list)
    start_mono: float = 0.0
    end_mono: float = 0.0
    stopped: str | None = None          # why it ended before every call was sent

    @property
    def wall_s(self) -> float:
        return self.end_mono - self.start_mono

    @property
    def ok_calls(self) -> int:
        return sum(r.ok and not r.contaminated for r in self.records)

    @property
    def complete(self) -> bool:
        """Every frozen call replayed, answered, by the server that was checked."""
        return self.stopped is None and self.ok_calls == self.planned


def replay_client(frame: pd.DataFrame, path: ServingPath, base_url: str,
                  http: httpx.AsyncClient, run_id: str) -> ReplayClient:
    """A client for `base_url` that sends the set's bodies (the path's retry settings)."""
    bodies = {(r.ticker, int(r.draw), int(r.call_seq)): orjson.loads(r.request_json)
              for r in frame.itertuples()}
    stream = bool(next(iter(bodies.values())).get("stream"))
    sp = path.model_copy(update={"base_url": base_url, "stream": stream})
    return ReplayClient(bodies, "replay", sp, Sampling(), http, run_id, base_url=base_url)


async def replay(client: ReplayClient, frame: pd.DataFrame, slots: int,
                 timeout_s: float | None = None,
                 on_call: Callable[[CallRecord], None] | None = None) -> ReplayResult:
    """Send every frozen call with `slots` in flight, each unit's stages in order."""
    pool = _Slots(slots)
    result = ReplayResult(planned=len(frame))
    units = [g for _, g in frame.groupby(["ticker", "draw"], sort=False)]

    async def call(priority: int, row) -> None:
        req = ChatRequest(agent=row.agent, messages=orjson.loads(row.prompt_json),
                          ticker=row.ticker, draw=int(row.draw), unit_attempt=1,
                          call_seq=int(row.call_seq))
        await pool.acquire(priority)
        try:
            rec = await client.chat(req)
        finally:
            pool.release()
        result.records.append(rec)
        if on_call is not None:
            on_call(rec)

    async def unit(priority: int, calls: pd.DataFrame) -> None:
        for _, stage in calls.groupby("stage", sort=True):
            await asyncio.gather(*(call(priority, r) for r in stage.itertuples()))

    result.start_mono = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.gather(*(unit(i, u) for i, u in enumerate(units))),
                               timeout_s)
    except asyncio.TimeoutError:
        result.stopped = f"stopped after {timeout_s:g} s (point_timeout_s) with " \
                         f"{len(result.records)} of {result.planned} calls done"
    except asyncio.CancelledError:
        result.stopped = f"interrupted with {len(result.records)} of {result.planned} calls done"
        raise
    finally:
        result.end_mono = time.monotonic()
    return result


PROBE_MAX_TOKENS = 64     # tokens each probe generates, in a sweep and in verify alike

_WORDS = ("market price trend volume report growth risk margin sales order share rate "
          "cost cash debt plan view sector bank chip ship fund yield data note quarter "
          "demand supply index trade asset value").split()


def probe_prompts(long_tokens: int) -> tuple[str, str]:
    """(short, long) prompts of the verify probe; each begins with a fresh nonce, so no
    prompt cache can serve them."""
    nonce = uuid.uuid4().hex[:8]
    short = f"[{nonce}] Write a short note on the market today."
    words = " ".join(_WORDS[(i * 7) % len(_WORDS)] for i in range(long_tokens))
    return short, f"[{nonce}] {words}\nSummarise the text above."


class _ProbeClient(PathClient):
    """The probe generates exactly `max_tokens` where the engine allows (llama.cpp)."""

    def body(self, req: ChatRequest) -> dict:
        return {**super().body(req), **engine(self.path.dialect).probe_body()}


@dataclass(frozen=True)
class ProbeResult:
    """Single-request speeds of the verify probe: prefill from the long prompt, decode from
    the short one (server timings where the engine reports them, else the client's clock)."""

    prefill_tps: float | None
    decode_tps: float | None
    long_prompt_tokens: int | None
    error: str | None = None


async def probe(http: httpx.AsyncClient, base_url: str, dialect: str, model: str,
                long_tokens: int, max_tokens: int, time_scale: float = 1.0) -> ProbeResult:
    """Send the short and the long probe prompt, one at a time, and read their speeds."""
    sp = ServingPath(engine=dialect, base_url=base_url,
                     model=model, stream=True, max_attempts=2, backoff_s=0.5)
    client = _ProbeClient("probe", sp, Sampling(temperature=0.0, max_tokens=max_tokens,
                                                seed_policy="none"), http, "probe")
    short, long = probe_prompts(long_tokens)
    recs = []
    for i, text in enumerate((short, long), 1):
        recs.append(await client.chat(ChatRequest("probe", [{"role": "user", "content": text}],
                                                   "PROBE", 1, 1, i)))
    bad = [r for r in recs if not r.ok]
    if bad:
        return ProbeResult(None, None, None, f"{bad[0].error_kind}: {bad[0].error_detail}")
    return ProbeResult(_prefill(recs[1], time_scale), _decode(recs[0], time_scale),
                       recs[1].prompt_tokens)


def _prefill(r: CallRecord, scale: float) -> float | None:
    if r.prompt_n and r.prompt_ms:
        return r.prompt_n / (r.prompt_ms / 1000)
    if r.prompt_tokens and r.first_token_mono:
        return r.prompt_tokens / ((r.first_token_mono - r.start_mono) / scale)
    return None


def _decode(r: CallRecord, scale: float) -> float | None:
    if r.predicted_n and r.predicted_ms:
        return r.predicted_n / (r.predicted_ms / 1000)
    if r.completion_tokens and r.completion_tokens > 1 and r.first_token_mono:
        return (r.completion_tokens - 1) / ((r.end_mono - r.first_token_mono) / scale)
    return None
