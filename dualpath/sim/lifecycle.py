"""A request's life in the simulated server: intake, a slot taken and its prompt cache read,
the modelled prefill and decode waited out (with the main thread's stalls), the counters
updated, and the reply sent whole or streamed in the engine's dialect.

`dualpath.sim.server` routes requests here; its names stay importable from there.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from typing import TYPE_CHECKING

import orjson

from dualpath.sim import dialect, llama_options
from dualpath.sim import vllm as vllm_dialect
from dualpath.sim.dialect import Reply

if TYPE_CHECKING:
    from dualpath.sim.server import SimServer

_HEADER = re.compile(r"TICKER: (\S+) \| AS OF: (\d{4}-\d{2}-\d{2})")
# llama-server's own sampling defaults, reported by /props and /slots as a real server does.
_SERVER_DEFAULTS = {k: dialect.f32(v) for k, v in dialect.LLAMA_PARAMS.items()}


def _begin(sim: SimServer, slot: int, body: dict, text: str, prompt_n: int,
           n_out: int) -> tuple[int, float, float]:
    """Take a slot's prompt cache and sampling; returns (cache_n, prefill s, decode s)."""
    shared = sim.queue.cached(slot, text) if llama_options.reuses_cache(body) else 0
    header = _HEADER.search(text)
    # The modelled unsent context belongs to the ticker and sits right after the header: a
    # slot whose cache holds this prompt's header holds that context too.
    ctx = sim.profile.context_tokens if header and shared >= header.end() else 0
    cache_n = min(shared // 4 + ctx, prompt_n - 1) if shared else 0
    sim._params[slot] = dialect.applied_params(body, _SERVER_DEFAULTS)
    sim._tasks += 1
    sim._task_ids[slot] = sim._tasks
    return (cache_n, *sim.model.seconds(prompt_n, cache_n, n_out, sim.counters.processing))


def _finish(sim: SimServer, prompt_n: int, cache_n: int, n_out: int, t_prefill: float,
            t_decode: float) -> tuple[dict, dict]:
    """Count a finished request; returns (timings, usage) as llama-server reports them."""
    processed = prompt_n - cache_n
    c = sim.counters
    c.requests += 1
    c.prompt_tokens += processed
    c.cached_tokens += cache_n
    c.prompt_seconds += t_prefill
    c.predicted_tokens += n_out
    c.predicted_seconds += t_decode
    timings = {"cache_n": cache_n, "prompt_n": processed, "prompt_ms": t_prefill * 1e3,
               "prompt_per_token_ms": t_prefill * 1e3 / max(processed, 1),
               "prompt_per_second": processed / t_prefill if t_prefill else 0.0,
               "predicted_n": n_out, "predicted_ms": t_decode * 1e3,
               "predicted_per_token_ms": t_decode * 1e3 / n_out,
               "predicted_per_second": n_out / t_decode}
    usage = {"prompt_tokens": prompt_n, "completion_tokens": n_out,
             "total_tokens": prompt_n + n_out}
    if not sim.vllm or sim.profile.prompt_tokens_details:
        usage["prompt_tokens_details"] = {"cached_tokens": cache_n}
    return timings, usage


async def _intake(sim: SimServer, text: str) -> None:
    """The modelled time the server reads and tokenizes a request before it can queue it."""
    if sim.profile.intake_ms_per_kb:
        await asyncio.sleep(len(text) / 1024 * sim.profile.intake_ms_per_kb / 1e3
                            * sim.profile.time_scale)


async def _stalls(sim: SimServer, mark: float) -> None:
    """Wait out the main-thread time the server spent copying states while this request
    ran (`dualpath.sim.slots`): llama-server decodes no slot meanwhile."""
    while (extra := sim.queue.stall_since(mark)) > 1e-6:
        mark += extra
        await asyncio.sleep(extra)


async def _admit(sim: SimServer, body: dict, text: str) -> tuple[int, float]:
    """Read a request, then wait for its slot; returns (slot, seconds it queued)."""
    await _intake(sim, text)
    queued = time.monotonic()
    slot = await sim.acquire(text, body.get("id_slot"))
    return slot, time.monotonic() - queued


async def _process(sim: SimServer, body: dict, text: str, prompt_n: int,
                   n_out: int) -> tuple[dict, dict, dict | None]:
    """Hold a slot for the modelled time of a non-streaming request."""
    slot, queued = await _admit(sim, body, text)
    try:
        cache_n, t_prefill, t_decode = _begin(sim, slot, body, text, prompt_n, n_out)
        mark = sim.queue.marks[slot]
        await asyncio.sleep((t_prefill + t_decode) * sim.profile.time_scale)
        await _stalls(sim, mark)
        return (*_finish(sim, prompt_n, cache_n, n_out, t_prefill, t_decode),
                vllm_dialect.request_metrics(sim.profile, queued, t_prefill, t_decode, n_out))
    finally:
        sim.release(slot)


async def _stream(sim, body, text, prompt_n, n_out, runaway, reply: Reply, meta):
    chunk = {**meta, "object": "chat.completion.chunk"}
    if sim.vllm:
        chunk["system_fingerprint"] = None      # vLLM: on the usage (or last) chunk only

    def event(**fields) -> bytes:
        return b"data: " + orjson.dumps({**chunk, **fields}) + b"\n\n"

    def delta(d: dict, finish=None) -> bytes:
        return event(choices=[{"index": 0, "finish_reason": finish, "delta": d}])

    p = sim.profile
    slot, queued = await _admit(sim, body, text)
    try:
        cache_n, t_prefill, t_decode = _begin(sim, slot, body, text, prompt_n, n_out)
        mark = sim.queue.marks[slot]
        async for ping in dialect.silence(p, t_prefill):
            yield ping
        # the first result carries the role (llama-server: content null; vLLM: ""), then
        # the first token
        yield delta({"role": "assistant", "content": "" if sim.vllm else None})
        yield delta(dialect.first_delta(p, body, reply.answer, reply.thinking))
        async for ping in dialect.silence(p, t_decode):
            yield ping
        await _stalls(sim, mark)
        if p.stream_error_share and random.random() < p.stream_error_share:
            # llama-server ends the stream at its error event; vLLM sends [DONE] after it
            yield b"data: " + orjson.dumps(dialect.stream_error(sim.vllm)) + b"\n\n"
            if sim.vllm:
                yield b"data: [DONE]\n\n"
            return
        timings, usage = _finish(sim, prompt_n, cache_n, n_out, t_prefill, t_decode)
    finally:
        sim.release(slot)
    for d in dialect.deltas(p, body, reply.answer, reply.thinking):
        yield delta(d)
    usage.update(dialect.reasoning_usage(p, body, reply.thinking_tokens))
    # As llama-server does: timings ride on the usage chunk when one is asked for.
    finish = {"choices": [{"index": 0, "finish_reason": "length" if runaway else "stop",
                           "delta": {}}]}
    extra = {"system_fingerprint": meta["system_fingerprint"]} if sim.vllm else {"timings": timings}
    metrics = vllm_dialect.request_metrics(sim.profile, queued, t_prefill, t_decode, n_out)
    if (body.get("stream_options") or {}).get("include_usage"):
        yield event(**finish)
        yield event(choices=[], usage=usage, **extra, **({"metrics": metrics} if metrics else {}))
    else:
        yield event(**finish, **extra)
    yield b"data: [DONE]\n\n"
