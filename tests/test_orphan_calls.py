"""No call outlives what it was made for, and none dies unseen.

A pipeline's `asyncio.gather` raises at its first failed call and leaves its other calls
running: the scheduler cancels and waits them out, so none retries on after the unit was
recorded nor writes a call into a finished unit. A request cancelled just as it failed (a
night's end, with the path's HTTP session closed: aiohttp's "Session is closed") has its error
taken, not printed by asyncio as "Task exception was never retrieved"."""

from __future__ import annotations

import asyncio
import gc

import httpx
import orjson

from dualpath.client import PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.pipeline import UnitInput
from dualpath.records import CallRecord, UnitResult
from dualpath.scheduler import PathRunner, Unit
from dualpath.transport import AiohttpTransport, Timeouts, _Heard

NIGHT = __import__("datetime").date(2027, 5, 3)


async def _gathered(unit: UnitInput, llm) -> str:
    fast, slow = await asyncio.gather(llm("fails", [{"role": "user", "content": "fail"}]),
                                      llm("slow", [{"role": "user", "content": "wait"}]))
    return slow


async def test_a_failed_call_cancels_its_gathered_siblings_before_the_unit_is_recorded():
    loop = asyncio.get_running_loop()
    unseen: list[str] = []
    loop.set_exception_handler(lambda _loop, ctx: unseen.append(ctx["message"]))
    slow_started = asyncio.Event()

    async def handle(request: httpx.Request) -> httpx.Response:
        if orjson.loads(request.content)["messages"][-1]["content"] == "fail":
            await slow_started.wait()        # the other call is in flight when this fails
            return httpx.Response(400, json={"error": {"message": "bad request",
                                                       "type": "invalid_request_error"}})
        slow_started.set()
        await asyncio.sleep(0.3)
        return httpx.Response(200, json={
            "model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": "late"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})

    records: list = []
    path = ServingPath(engine="sim", base_url="http://sim", model="m", slots=2,
                       max_attempts=1)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as http:
        client = PathClient("backup", path, Sampling(), http, "t/run")
        runner = PathRunner(client, _gathered, NIGHT, slots=2, sink=records.append,
                            inputs=lambda u: UnitInput(u.ticker, u.draw, NIGHT, ()),
                            base_seed=1)
        run = await runner.run_units([Unit("AAA", 1)])
    await asyncio.sleep(0.5)          # past the other call's answer, were it still running
    assert run.outcomes == {"call_failed": 1}
    # the unit's one journaled call is the failed one, and its result comes last
    kinds = [(type(r).__name__, getattr(r, "agent", None)) for r in records
             if isinstance(r, (CallRecord, UnitResult))]
    assert kinds == [("CallRecord", "fails"), ("UnitResult", None)]


async def test_a_request_cancelled_as_it_fails_leaves_no_unseen_error():
    loop = asyncio.get_running_loop()
    unseen: list[str] = []
    loop.set_exception_handler(lambda _loop, ctx: unseen.append(ctx["message"]))
    transport = AiohttpTransport(2)
    await transport.aclose()
    failed = asyncio.Event()

    async def on_closed_session():
        failed.set()
        raise RuntimeError("Session is closed")

    call = asyncio.create_task(transport._first_byte(on_closed_session(), Timeouts(1, 1),
                                                     _Heard()))
    await failed.wait()     # the request has failed; the call has not seen it yet
    call.cancel()
    await asyncio.gather(call, return_exceptions=True)
    assert call.cancelled()
    del call                # its traceback holds the request's task until here
    gc.collect()
    await asyncio.sleep(0)
    loop.set_exception_handler(None)
    assert unseen == []
