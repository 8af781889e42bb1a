"""The scheduler and the built-in pipeline against a simulated llama-server over real HTTP."""

from datetime import date

import itertools

import httpx
import orjson

from dualpath.client import PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.market import SyntheticMarket
from dualpath.pipeline import AGENTS, UnitInput, builtin
from dualpath.records import CallRecord, UnitResult, UnitStart
from dualpath.scheduler import PathRunner, Unit, derive_seed, draw_major

MARKET = SyntheticMarket(7, n_tickers=12)
NIGHT = MARKET.nights(1)[0]


def inputs(unit: Unit) -> UnitInput:
    h = MARKET.history(unit.ticker, NIGHT, 30)
    return UnitInput(unit.ticker, unit.draw, NIGHT, tuple(zip(h["date"], h["adj_close"])))


async def run_path(url, units, slots, pipeline=builtin, stream=False, grade_format="text",
                   queue_depth=0, pin=False):
    records = []
    path = ServingPath(engine="sim", base_url=url, model="m", slots=slots, stream=stream,
                       grade_format=grade_format)
    async with httpx.AsyncClient() as http:
        client = PathClient("backup", path, Sampling(), http, "t/run")
        runner = PathRunner(client, pipeline, NIGHT, slots=slots, sink=records.append,
                            inputs=inputs, base_seed=1, queue_depth=queue_depth, pin_slots=pin)
        run = await runner.run_units(units)
    return run, records


def test_draw_major_order():
    units = draw_major(["A", "B", "C"], 2)
    assert [(u.ticker, u.draw) for u in units] == [("A", 1), ("B", 1), ("C", 1),
                                                   ("A", 2), ("B", 2), ("C", 2)]


def test_seeds_differ_by_draw_and_repeat_on_rerun():
    s = derive_seed(1, date(2027, 1, 4), "AAA", 1, "trader")
    assert s == derive_seed(1, date(2027, 1, 4), "AAA", 1, "trader")
    assert s != derive_seed(1, date(2027, 1, 4), "AAA", 2, "trader")
    assert s != derive_seed(1, date(2027, 1, 5), "AAA", 1, "trader")


async def test_in_flight_never_exceeds_slots_and_reaches_them(sim_server):
    srv = sim_server(slots=8)                    # the server could take 8 at once
    run, records = await run_path(srv.url, draw_major(MARKET.tickers[:6], 2), slots=3)
    assert srv.sim.counters.peak_processing == 3  # dualpath kept exactly 3 in flight
    assert srv.sim.counters.deferred == 0
    assert run.complete and run.units_done == 12 and run.calls == 12 * 17


async def test_a_queued_request_waits_at_the_server_not_in_the_harness(sim_server):
    srv = sim_server(slots=3)
    run, records = await run_path(srv.url, draw_major(MARKET.tickers[:6], 2), slots=3,
                                  queue_depth=1)
    c = srv.sim.counters
    assert c.peak_processing == 3                 # never more than the server's slots busy
    assert run.complete and run.calls == 12 * 17
    # four requests were in flight at once, so the fourth waited in the server's queue
    calls = [r for r in records if isinstance(r, CallRecord)]
    edges = sorted([(r.start_mono, 1) for r in calls] + [(r.end_mono, -1) for r in calls])
    peak = max(itertools.accumulate(d for _, d in edges))
    assert peak == 4


async def test_pinned_calls_keep_to_their_units_slot_and_hit_its_cache(sim_server):
    srv = sim_server(slots=2)
    units = draw_major(MARKET.tickers[:4], 1)
    run_on, on = await run_path(srv.url, units, slots=2, queue_depth=1, pin=True)
    calls = [r for r in on if isinstance(r, CallRecord)]
    slots = [orjson.loads(r.request_json)["id_slot"] for r in calls]
    assert set(slots) == {0, 1} and run_on.complete
    # every call after a unit's first reuses the shared ticker context when on its home slot
    by_unit: dict = {}
    for c, slot in zip(calls, slots):
        by_unit.setdefault(c.ticker, []).append((c.call_seq, slot, c.cache_n))
    home_hits = [n for seq in by_unit.values() for (k, slot, n) in sorted(seq)[1:]
                 if slot == sorted(seq)[0][1]]
    # mostly the modelled context (8200 tokens) is cached; a call of another unit in between
    # can evict it
    assert home_hits and sorted(home_hits)[len(home_hits) // 2] > 8000
    srv2 = sim_server(slots=2)
    _, off = await run_path(srv2.url, units, slots=2, queue_depth=1, pin=False)
    share = lambda recs: (sum(r.cache_n for r in recs if isinstance(r, CallRecord))
                          / sum(r.cache_n + r.prompt_n for r in recs if isinstance(r, CallRecord)))
    assert all("id_slot" not in r.request_json for r in off if isinstance(r, CallRecord))
    # off, llama-server's RAM prompt cache (on by default) brings a unit's context back on
    # whichever slot its call lands, but not when two of its calls land at once
    assert share(on) > 0.9 and share(on) > share(off)   # measured 0.94 vs 0.88


async def test_pinned_slots_left_without_a_unit_take_the_last_units_calls(sim_server):
    srv = sim_server(slots=4)
    run, records = await run_path(srv.url, [Unit(MARKET.tickers[0], 1)], slots=4, pin=True)
    calls = [r for r in records if isinstance(r, CallRecord)]
    desks = {orjson.loads(r.request_json)["id_slot"] for r in calls
             if r.agent in ("technical", "fundamental", "news_sentiment", "sector_macro")}
    assert run.complete and len(desks) == 4      # the one unit's four desks ran side by side


async def test_units_start_draw_major_and_every_unit_makes_17_calls(sim_server):
    srv = sim_server(slots=4)
    run, records = await run_path(srv.url, draw_major(MARKET.tickers[:5], 2), slots=4)
    starts = [(r.ticker, r.draw) for r in records if isinstance(r, UnitStart)]
    assert starts == [(u.ticker, u.draw) for u in draw_major(MARKET.tickers[:5], 2)]
    calls = [r for r in records if isinstance(r, CallRecord)]
    by_unit: dict = {}
    for c in calls:
        by_unit.setdefault((c.ticker, c.draw), []).append(c)
    assert len(by_unit) == 10
    for unit_calls in by_unit.values():
        assert sorted(c.agent for c in unit_calls) == sorted(AGENTS)
        first = {c.agent: c for c in unit_calls}
        # DAG order: nothing starts before the data summary ends; the check comes last
        assert all(c.start_mono >= first["data_summary"].end_mono
                   for c in unit_calls if c.agent != "data_summary")
        assert first["consistency_check"].start_mono >= first["portfolio_manager"].end_mono
        assert all(c.prompt_n is not None and c.predicted_ms > 0 for c in unit_calls)
    results = [r for r in records if isinstance(r, UnitResult)]
    assert all(r.grade in (1, 2, 3, 4, 5) for r in results)
    assert all(r.n_calls == 17 for r in results)


async def test_streaming_against_real_http_records_first_token(sim_server):
    srv = sim_server(slots=2, time_scale=1e-3)
    run, records = await run_path(srv.url, [Unit("SYN000", 1)], slots=2, stream=True)
    calls = [r for r in records if isinstance(r, CallRecord)]
    assert len(calls) == 17
    assert all(c.start_mono < c.first_token_mono <= c.end_mono for c in calls)
    assert run.outcomes == {"graded": 1}


async def test_json_grades_are_requested_and_parsed(sim_server):
    srv = sim_server(slots=2)
    run, records = await run_path(srv.url, [Unit("SYN001", 1)], slots=2, grade_format="json")
    pm = [r for r in records if isinstance(r, CallRecord) and r.agent == "portfolio_manager"]
    assert '"json_schema"' in pm[0].request_json and pm[0].output_text.startswith("{")
    assert run.outcomes == {"graded": 1}


async def test_malformed_answers_are_parse_failures_with_raw_text(sim_server):
    srv = sim_server(slots=2, malformed_share=1.0, runaway_share=0.0)
    run, records = await run_path(srv.url, [Unit("SYN000", 1), Unit("SYN001", 1)], slots=2)
    results = [r for r in records if isinstance(r, UnitResult)]
    assert [r.outcome for r in results] == ["parse_failed"] * 2
    assert all(r.grade is None and "lean" in r.final_text for r in results)
    assert run.outcomes == {"parse_failed": 2} and run.complete  # answered: measured


async def test_a_failing_user_pipeline_fails_its_unit_not_the_run(sim_server):
    srv = sim_server(slots=2)

    async def flaky(unit: UnitInput, llm) -> str:
        await llm("only", [{"role": "user", "content": f"TICKER: {unit.ticker}"}])
        if unit.ticker == "SYN001":
            raise ValueError("bug in user code")
        return "FINAL GRADE: 3"

    run, records = await run_path(srv.url, draw_major(["SYN000", "SYN001", "SYN002"], 1), 2, flaky)
    results = {r.ticker: r for r in records if isinstance(r, UnitResult)}
    assert results["SYN001"].outcome == "pipeline_failed"
    assert "bug in user code" in results["SYN001"].failure_detail
    assert results["SYN000"].grade == results["SYN002"].grade == 3
    assert run.calls == 3 and run.units_done == 3 and not run.complete


async def test_a_context_overflow_fails_the_unit_unretried(sim_server):
    srv = sim_server(slots=2, context_tokens=10**6)   # every prompt exceeds the context
    run, records = await run_path(srv.url, [Unit("SYN000", 1)], slots=2)
    res = [r for r in records if isinstance(r, UnitResult)][0]
    assert res.outcome == "call_failed" and "exceed_context_size_error" in res.failure_detail
    assert run.calls == 1 and run.calls_failed == 1


async def test_a_server_5xx_fails_the_unit_as_a_server_error(sim_server):
    """A 500 from the server (through the fault proxy, on the unit's first call, with no
    retry left) fails that unit as call_failed naming the HTTP 500; the run goes on."""
    from dualpath.sim.proxy import FaultProxy

    srv = sim_server(slots=1)
    with FaultProxy(srv.url, every=1) as proxy:
        proxy.inject("http500", 1)
        path = ServingPath(engine="sim", base_url=proxy.url, model="m", slots=1, max_attempts=1)
        records = []
        async with httpx.AsyncClient() as http:
            client = PathClient("backup", path, Sampling(), http, "t/run")
            runner = PathRunner(client, builtin, NIGHT, slots=1, sink=records.append,
                                inputs=inputs, base_seed=1)
            run = await runner.run_units([Unit("SYN000", 1), Unit("SYN001", 1)])
    assert proxy.injected["http500"] == 1
    res = {r.ticker: r for r in records if isinstance(r, UnitResult)}
    assert res["SYN000"].outcome == "call_failed" and "http_500" in res["SYN000"].failure_detail
    assert res["SYN001"].outcome == "graded"
    failed = [r for r in records if isinstance(r, CallRecord) and not r.ok]
    assert [(r.http_status, r.error_kind) for r in failed] == [(500, "http_500")]
    assert run.calls_failed == 1


async def test_streamed_calls_reuse_their_connections(sim_server):
    """A stream read only to [DONE] leaves its body unread and the connection is dropped."""
    srv = sim_server(slots=2, time_scale=1e-4)
    path = ServingPath(engine="sim", base_url=srv.url, model="m", slots=2, stream=True)
    async with httpx.AsyncClient() as http:
        client = PathClient("backup", path, Sampling(), http, "t/run")
        runner = PathRunner(client, builtin, NIGHT, slots=1, sink=lambda r: None,
                            inputs=inputs, base_seed=1)
        await runner.run_units([Unit("SYN000", 1)])
        pool = http._transport._pool
        assert len(pool.connections) == 1                # 17 calls, one connection


async def test_sim_slots_follow_llama_servers_queue():
    """A task naming a busy slot waits for it; a release pops the first task naming that
    slot, else the first deferred (which, naming a busy slot, is deferred again); id_slot
    wraps modulo the slot count; a free slot is picked by prompt similarity."""
    import asyncio

    from dualpath.sim.slots import ServerSlots
    q = ServerSlots(2, ram_cache=False)
    assert await q.acquire("aaaa", 0) == 0
    assert await q.acquire("bbbb", 3) == 1                 # 3 % 2
    wait_0 = asyncio.ensure_future(q.acquire("cccc", 0))
    wait_any = asyncio.ensure_future(q.acquire("dddd", None))
    await asyncio.sleep(0)
    assert not wait_0.done() and not wait_any.done()
    q.release(1)                   # no task names slot 1: the first deferred (slot 0's) is
    await asyncio.sleep(0)         # popped, deferred again; slot 1 stays idle
    assert not wait_0.done() and not wait_any.done() and not q.slots[1].busy
    q.release(0)
    assert await wait_0 == 0
    q.release(0)                   # the task for any slot takes the free slot
    assert await wait_any in (0, 1)
    q = ServerSlots(2, ram_cache=False)
    for slot in (await q.acquire("x" * 100, 0), await q.acquire("y" * 100, 1)):
        q.cached(slot, "x" * 100 if slot == 0 else "y" * 100)
        q.release(slot)
    assert await q.acquire("y" * 100 + "z", None) == 1    # the similar prompt's slot


async def test_pinned_slots_take_units_per_slot_units_and_lend_idle_slots_at_the_end():
    import asyncio

    from dualpath.slots import PinnedSlots
    pool = PinnedSlots(2, queue_depth=0, units_per_slot=2)
    homes = [pool.claim() for _ in range(4)]
    assert sorted(homes) == [0, 0, 1, 1] and not pool.room_for_unit(0)
    assert await pool.acquire(0, 0) == 0              # slot 0 busy with a unit's call
    waiting = asyncio.ensure_future(pool.acquire(1, 0))   # the other unit of slot 0 waits
    await asyncio.sleep(0)
    assert not waiting.done()
    pool.no_more_units = True
    pool.disown(1)
    pool.disown(1)                 # slot 1 has no unit and nothing running: lent at once
    assert await waiting == 1


async def test_sim_server_copies_states_on_its_main_thread_as_llama_server_does():
    """A launch saves every idle slot whose state is new since its release; a task named to a
    busy slot saves that slot's state; a task for any slot that finds none free saves
    nothing; while a copy runs no task launches; `--cache-ram 0` copies nothing."""
    import asyncio
    import time

    from dualpath.sim.slots import ServerSlots
    q = ServerSlots(2, save_s_per_kb=0.05)            # 50 ms per KB: 5 KB = 0.25 s
    a, b = "a" * 5120, "b" * 5120
    for text, slot in ((a, 0), (b, 1)):
        assert await q.acquire(text, slot) == slot
        q.cached(slot, text)
    assert q.saves == 0
    q.release(1)                   # slot 1 idle with a new state
    t0 = time.monotonic()
    q.release(0)
    assert await q.acquire(a + "1", 0) == 0          # its launch copies idle slot 1 ...
    assert q.saves == 1
    assert await q.acquire(b + "1", 1) == 1          # ... and the next launch waits for it
    assert time.monotonic() - t0 >= 0.2
    saves = q.saves
    busy = asyncio.ensure_future(q.acquire(a + "2", 0))   # named to busy slot 0: copies it
    await asyncio.sleep(0)
    assert q.saves == saves + 1 and not busy.done()
    anywhere = asyncio.ensure_future(q.acquire("c" * 100, None))   # none free: no copy
    await asyncio.sleep(0)
    assert q.saves == saves + 1 and not anywhere.done()
    busy.cancel()
    anywhere.cancel()
    await asyncio.gather(busy, anywhere, return_exceptions=True)

    off = ServerSlots(2, ram_cache=False, save_s_per_kb=0.05)
    for text, slot in ((a, 0), (b, 1)):
        await off.acquire(text, slot)
        off.cached(slot, text)
    off.release(1)
    off.release(0)
    await off.acquire(a + "1", 0)
    await off.acquire(b + "1", 0 + 1)
    waiting = asyncio.ensure_future(off.acquire(a + "2", 0))
    await asyncio.sleep(0)
    assert off.saves == 0 and not waiting.done()
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)


def test_prefix_affinity_queues_nothing_at_llama_servers_slots_by_default():
    """With prefix affinity no request waits at a busy slot unless queue_depth says so (a
    request named to a busy llama-server slot makes it copy that slot's state on its main
    thread); slots shared keep one queued; a set queue_depth is kept either way."""
    path = ServingPath(engine="llama.cpp", base_url="http://127.0.0.1:1", model="m", slots=4)
    assert path.queue_depth_for(True) == 0 and path.queue_depth_for(False) == 1
    set1 = path.model_copy(update={"queue_depth": 1})
    assert set1.queue_depth_for(True) == 1 and set1.queue_depth_for(False) == 1
    vllm = path.model_copy(update={"engine": "vllm"})
    assert vllm.queue_depth_for(True) == 0 and vllm.queue_depth_for(False) == 0
