"""The slot-filling scheduler: keeps a path's slots busy (pools in `dualpath.slots`).

Units (ticker x draw) are admitted in draw-major order, so every ticker's draw 1 finishes
before any draw 2 starts and a night cut short still holds complete draws. A unit's next call
starts as soon as its own dependencies finish; whenever a slot would sit idle because no
admitted unit has a call ready, one more unit is admitted. Waiting calls get slots oldest unit
first, so extra units only fill gaps and a unit's own latency stays close to its chain length.

The scheduler knows nothing about storage: every `CallRecord`, `UnitStart` and `UnitResult`
goes to a `sink` callable the caller provides. A sink that fails is a harness failure: the
path-run stops at once and `run_units` raises `HarnessError` (never filed as a unit's
failure, which would blame the user's pipeline or the server).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import traceback
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, Callable, Iterable

from dualpath.errors import CallFailed, HarnessError
from dualpath.grades import parse_grade_async
from dualpath.pipeline import Pipeline, UnitInput
from dualpath.slots import PinnedSlots, SharedSlots
from dualpath.records import (CALL_FAILED, CONTAMINATED, GRADED, INPUT_FAILED, PARSE_FAILED,
                              PIPELINE_FAILED, CallRecord, UnitResult, UnitStart)

if TYPE_CHECKING:
    from dualpath.client import PathClient

Sink = Callable[[CallRecord | UnitStart | UnitResult], None]
Progress = Callable[[str, int, int, int], None]   # (path, units done, units total, calls)


def derive_seed(base: int, night: date, ticker: str, draw: int, agent: str) -> int:
    """A stable per-call seed: draws differ, reruns repeat."""
    key = f"{base}|{night.isoformat()}|{ticker}|{draw}|{agent}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "little") & 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class Unit:
    """One ticker x draw to score."""

    ticker: str
    draw: int


def draw_major(tickers: Iterable[str], draws: int) -> list[Unit]:
    """Every ticker's draw 1, then every ticker's draw 2, ..."""
    tickers = list(tickers)
    return [Unit(t, d) for d in range(1, draws + 1) for t in tickers]


@dataclass
class PathRun:
    """Counts of one path-run segment as it goes."""

    path: str
    units_total: int
    units_done: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    calls_failed: int = 0
    runaway: int = 0
    start_mono: float = 0.0
    end_mono: float = 0.0
    start_wall: float = 0.0
    end_wall: float = 0.0
    stopped_early: bool = False

    @property
    def units_measured(self) -> int:
        """Units that ended in a measurement (graded or parse_failed)."""
        return self.outcomes.get(GRADED, 0) + self.outcomes.get(PARSE_FAILED, 0)

    @property
    def complete(self) -> bool:
        """Every unit of this segment was scored and measured."""
        return self.units_measured == self.units_total and not self.stopped_early


class _UnitLLM:
    """The `LLM` a pipeline sees for one unit: seeds, slots, records, failures."""

    json_grades: bool

    def __init__(self, runner: "PathRunner", unit: Unit, attempt: int, priority: int):
        self.runner, self.unit, self.attempt, self.priority = runner, unit, attempt, priority
        self.json_grades = runner.client.path.grade_format == "json"
        self.calls = 0
        self.home: int | None = None      # the slot whose prompt cache holds this unit
        self.contaminated: str | None = None
        self.runaway_outputs: set[str] = set()
        self.in_flight: set[asyncio.Task] = set()   # the tasks its calls run in

    async def settle(self) -> None:
        """Cancel and wait out the calls a pipeline left running: `asyncio.gather` raises at
        its first failed call and leaves the others going, so after the unit ended they
        retried on a server that was gone until the path closed its HTTP session, and
        died unseen ("Task exception was never retrieved … Session is closed")."""
        me = asyncio.current_task()
        left = [t for t in self.in_flight if t is not me and not t.done()]
        for t in left:
            t.cancel()
        if left:
            await asyncio.gather(*left, return_exceptions=True)

    async def __call__(self, agent: str, messages: list[dict[str, str]], *,
                       json_schema: dict[str, Any] | None = None) -> str:
        task = asyncio.current_task()
        self.in_flight.add(task)
        try:
            return await self._call(agent, messages, json_schema)
        finally:
            self.in_flight.discard(task)

    async def _call(self, agent: str, messages: list[dict[str, str]],
                    json_schema: dict[str, Any] | None) -> str:
        r = self.runner
        # the call's number is taken before any await: a parallel stage's calls run side
        # by side and would otherwise read each other's increment
        self.calls += 1
        seq = self.calls
        seed = None
        if r.sampling_seeded:
            seed = derive_seed(r.base_seed, r.night, self.unit.ticker, self.unit.draw, agent)
        if seq == 1:
            r.starting -= 1   # this unit no longer counts as about to ask for a slot
            self.home = r.pool.claim()
        slot = await r.pool.acquire(self.priority, self.home)
        # here, not at the top: the client's transport (aiohttp) is ~0.2 s of the start of
        # every command that only plans a night or lists runs (`Unit` is imported for that)
        from dualpath.client import ChatRequest

        req = ChatRequest(agent=agent, messages=messages, ticker=self.unit.ticker,
                          draw=self.unit.draw, unit_attempt=self.attempt, call_seq=seq,
                          seed=seed, json_schema=json_schema, id_slot=slot)
        try:
            rec = await r.client.chat(req)
        finally:
            r.pool.release(slot)
        r.on_call(rec)
        if rec.contaminated:
            self.contaminated = self.contaminated or rec.contaminated
        if rec.runaway:
            self.runaway_outputs.add(rec.output_text)
        if not rec.ok:
            raise CallFailed(rec)
        return rec.output_text


class PathRunner:
    """Scores a list of units on one path with a full set of slots."""

    def __init__(self, client: PathClient, pipeline: Pipeline, night: date, *,
                 slots: int, sink: Sink, inputs: Callable[[Unit], UnitInput],
                 queue_depth: int = 0, pin_slots: bool = False, units_per_slot: int = 1,
                 base_seed: int = 0, seeded: bool = True, progress: Progress | None = None,
                 attempts: dict[Unit, int] | None = None, deadline_mono: float | None = None):
        self.client, self.pipeline, self.night = client, pipeline, night
        self.pool = (PinnedSlots(slots, queue_depth, units_per_slot) if pin_slots
                     else SharedSlots(slots, queue_depth))
        self.sink, self.inputs, self.progress = sink, inputs, progress
        self.base_seed, self.sampling_seeded = base_seed, seeded
        self.attempts = attempts or {}
        self.deadline_mono = deadline_mono
        self.run: PathRun | None = None
        self.harness_error: BaseException | None = None
        self._all_done: asyncio.Event | None = None

    def on_call(self, rec: CallRecord) -> None:
        run = self.run
        run.calls += 1
        run.calls_failed += not rec.ok
        run.runaway += rec.runaway
        self.emit(rec)

    def emit(self, record: CallRecord | UnitStart | UnitResult) -> None:
        """Hand a record to the sink; a failing sink stops the whole path-run."""
        if self.harness_error is not None:
            raise HarnessError(f"path-run stopped: {self.harness_error}")
        try:
            self.sink(record)
        except Exception as e:
            self.harness_error = e
            self.run.stopped_early = True
            if self._all_done is not None:
                self._all_done.set()      # run_units cancels the other units and raises
            raise HarnessError(f"recording failed: {type(e).__name__}: {e}") from e

    async def run_units(self, units: list[Unit]) -> PathRun:
        """Run every unit; returns the counts (every record went to the sink)."""
        run = self.run = PathRun(self.client.name, len(units))
        run.start_mono, run.start_wall = time.monotonic(), time.time()
        pending = iter(enumerate(units))
        tasks: set[asyncio.Task] = set()
        all_done = self._all_done = asyncio.Event()
        loop = asyncio.get_running_loop()

        def admit() -> None:
            if self.deadline_mono is not None and time.monotonic() > self.deadline_mono:
                run.stopped_early = True
                return
            nxt = next(pending, None)
            if nxt is None:
                self.pool.no_more_units = True
                return
            task = loop.create_task(self._unit(*nxt))
            tasks.add(task)
            task.add_done_callback(finished)

        def finished(task: asyncio.Task) -> None:
            tasks.discard(task)
            fill()

        def fill() -> None:
            # Deferred one loop turn: a unit whose call just ended gets the chance to ask
            # for its next slot before a new unit is let in.
            loop.call_soon(_fill_now)

        def _fill_now() -> None:
            # Admitted units that have not yet asked for their first slot count as demand.
            while self.pool.room_for_unit(self.starting) and not run.stopped_early:
                before = len(tasks)
                admit()
                if len(tasks) == before:
                    break
                self.starting += 1
            if not tasks:
                all_done.set()

        self.starting = 0
        self.pool.on_idle = fill
        _fill_now()
        try:
            await all_done.wait()
        finally:
            # On cancel, stop admitting and wait for every unit to unwind here, while the HTTP
            # client is still open: a unit must never be recorded as failed by our own shutdown.
            run.stopped_early = run.stopped_early or not all_done.is_set()
            for t in list(tasks):
                t.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            run.end_mono, run.end_wall = time.monotonic(), time.time()
        if self.harness_error is not None:
            raise HarnessError(f"path {run.path}: recording failed after {run.units_done} "
                               f"unit(s): {type(self.harness_error).__name__}: "
                               f"{self.harness_error}") from self.harness_error
        return run

    async def _unit(self, priority: int, unit: Unit) -> None:
        run = self.run
        attempt = self.attempts.get(unit, 0) + 1
        llm = _UnitLLM(self, unit, attempt, priority)
        start_wall, start_mono = time.time(), time.monotonic()
        grade = detail = text = None
        try:
            self.emit(UnitStart(run_id=self.client.run_id, path=self.client.name,
                                ticker=unit.ticker, draw=unit.draw, unit_attempt=attempt,
                                start_wall=start_wall))
            outcome, grade, detail, text = await self._score(unit, llm)
        except HarnessError:
            return      # the run is stopping; this unit stays started-but-unfinished
        finally:
            if llm.calls == 0:
                self.starting -= 1
            self.pool.disown(llm.home)
        res = UnitResult(run_id=self.client.run_id, path=self.client.name, ticker=unit.ticker,
                         draw=unit.draw, unit_attempt=attempt, start_wall=start_wall,
                         start_mono=start_mono, end_wall=time.time(), end_mono=time.monotonic(),
                         n_calls=llm.calls, outcome=outcome, grade=grade,
                         failure_detail=detail, final_text=text)
        try:
            self.emit(res)
        except HarnessError:
            return
        run.units_done += 1
        run.outcomes[outcome] = run.outcomes.get(outcome, 0) + 1
        if self.progress:
            self.progress(run.path, run.units_done, run.units_total, run.calls)

    async def _score(self, unit: Unit, llm: _UnitLLM) -> tuple[str, int | None, str | None, str | None]:
        """(outcome, grade, detail, final text) of one unit; harness errors propagate."""
        try:
            unit_input = self.inputs(unit)
        except Exception as e:
            return INPUT_FAILED, None, _one_line(e), None
        try:
            try:
                text = await self.pipeline(unit_input, llm)
            finally:
                await llm.settle()      # no call of the unit outlives it
        except CallFailed as e:
            return (CONTAMINATED if llm.contaminated else CALL_FAILED), None, str(e), None
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a user pipeline's bug must not end the night
            if self.harness_error is not None:
                raise HarnessError(str(self.harness_error)) from e
            return PIPELINE_FAILED, None, _one_line(e), None
        if self.harness_error is not None:
            raise HarnessError(str(self.harness_error))
        if llm.contaminated:
            return CONTAMINATED, None, f"answered by another server: {llm.contaminated}", text
        if text in llm.runaway_outputs:
            # a final answer cut off at max_tokens is not an answer, whatever it ends with
            return PARSE_FAILED, None, "final answer stopped at max_tokens (runaway)", text
        parsed = await parse_grade_async(text)    # a long answer: off the event loop
        if parsed.grade is None:
            return PARSE_FAILED, None, parsed.failure, text
        return GRADED, parsed.grade, None, text


def _one_line(e: BaseException) -> str:
    return "".join(traceback.format_exception_only(e)).strip()[:2000]
