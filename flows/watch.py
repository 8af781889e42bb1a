"""While a path is scored: is the server still the one we checked, and is anyone else on it?

`watch_server` runs two pollers beside the scheduler and, when the block ends, closes the
segment's `ServerSession` with the server's own counters, the sampling it applied, the load
that was not ours and whether its identity held. A poller that fails is logged and counted
as a lost check, never allowed to skip that record.

Identity is re-read on a timer and once more at the end: vLLM's replies carry no build, so
a server swapped behind the same port (another model, another build, another slot count)
shows only there. From the first re-read that differs, every response is contaminated; the
end record says after which moment earlier calls may have been too.

The server's own counters (/metrics) are read at the same times. A counter that goes down
means the server restarted on the same port: its counters no longer cover the session, so
the end record says how many restarts were seen (`dualpath:restarts` beside the counters in
`metrics_after_json`) and `runs --evidence` refuses to compare that session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import AsyncIterator

import httpx
import orjson

from dualpath.client import PathClient
from dualpath.config import Config
from dualpath.errors import DualpathError
from dualpath.engines import engine
from dualpath.identity import busy_slots, identity_drift, read_identity, read_metrics
from dualpath.records import ServerIdentity, SessionEnd
from dualpath.flows.connect import Endpoint

log = logging.getLogger(__name__)


class _State:
    def __init__(self) -> None:
        self.polls = self.excess_polls = self.max_excess = self.previous = 0
        self.identity_checks = 0
        self.last_good_wall, self.last_good_mono = time.time(), time.monotonic()
        self.lost_after: float | None = None
        self.lost_after_mono: float | None = None
        self.problem: str | None = None
        self.last_metrics: dict[str, float] | None = None
        self.restarts = 0
        self.first_restart_wall: float | None = None
        self.last_answer = time.monotonic()
        self.unanswered_s = 0.0


RESTARTS_KEY = "dualpath:restarts"
FIRST_RESTART_KEY = "dualpath:first_restart_wall"


def counters_went_down(before: dict[str, float] | None, now: dict[str, float] | None) -> list[str]:
    """The monotonic counters (`*_total`) lower now than before: a restarted server.
    vLLM's process start time changing says the same."""
    if not before or not now:
        return []
    down = [k for k, v in now.items() if k.endswith("_total") and v < before.get(k, 0.0)]
    start = "process_start_time_seconds"
    if start in before and start in now and now[start] != before[start]:
        down.append(start)
    return down


def _note_metrics(st: _State, now: dict[str, float] | None, path: str) -> None:
    """Count a restart when the counters went down since the last reading."""
    if now is None:
        return
    down = counters_went_down(st.last_metrics, now)
    if down:
        st.restarts += 1
        st.first_restart_wall = st.first_restart_wall or time.time()
        log.error("path %s: the server restarted on the same port (counters went down: %s); "
                  "its /metrics no longer cover this session", path, ", ".join(sorted(down)[:4]))
    st.last_metrics = now


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except asyncio.TimeoutError:
        pass


async def _answers(http, url: str) -> bool:
    """Whether the server answers at all: /health is served without waiting for a batch
    (llama-server, vLLM), so only a stopped, hung or absent server leaves it unanswered."""
    try:
        await http.get(f"{url}/health", timeout=10.0)
        return True
    except httpx.HTTPError:
        return False


def _note_answer(st: _State, answered: bool, every: float) -> None:
    """The longest stretch without an answer beyond one poll period (a SIGSTOPped server's
    pause: its calls' seconds include it, so its run's speed is not a measurement)."""
    now = time.monotonic()
    st.unanswered_s = max(st.unanswered_s, now - st.last_answer - every)
    if answered:
        st.last_answer = now


async def _watch_load(http, url: str, dialect: str, client: PathClient, st: _State,
                      stop: asyncio.Event, every: float) -> None:
    """More busy slots than dualpath has in flight means someone else is on the server."""
    while not stop.is_set():
        _note_answer(st, await _answers(http, url), every)
        held = client.in_flight
        busy = await busy_slots(http, url, dialect)
        if busy is not None:
            st.polls += 1
            # the server counted at some moment of the read: a call of ours that ended
            # meanwhile (its answer read before the poll's, on a busy machine) was still ours
            excess = max(busy - max(held, client.in_flight), 0)
            # A slot is released a moment after its response reaches us: only excess seen
            # on two polls in a row counts as someone else's load.
            if excess and st.previous:
                st.excess_polls += 1
                st.max_excess = max(st.max_excess, min(excess, st.previous))
            st.previous = excess
        await _sleep_or_stop(stop, every)


async def _check_identity(http, url: str, dialect: str, before: ServerIdentity,
                          client: PathClient, st: _State) -> None:
    try:
        now = await read_identity(http, url, dialect)
    except DualpathError:
        return      # a server that does not answer is not evidence of another server
    problem = identity_drift(before, now)
    st.identity_checks += 1
    if problem is None:
        if st.problem is None:
            st.last_good_wall, st.last_good_mono = time.time(), time.monotonic()
        return
    if st.problem is None:
        st.problem, st.lost_after = problem, st.last_good_wall
        st.lost_after_mono = st.last_good_mono
        client.identity_problem = problem
        log.error("path %s: %s", client.name, problem)


async def _watch_identity(http, url, dialect, before, client, st, stop, every) -> None:
    while not stop.is_set():
        await _sleep_or_stop(stop, every)
        if not stop.is_set():
            await _check_identity(http, url, dialect, before, client, st)
            _note_metrics(st, await _quiet(read_metrics(http, url)), client.name)


async def _stop(task: asyncio.Task, what: str) -> None:
    try:
        await task
    except Exception as e:   # a failed poller is a lost check, never a lost end record
        log.warning("%s poller failed: %s: %s", what, type(e).__name__, e)


@contextlib.asynccontextmanager
async def watch_server(cfg: Config, work, ep: Endpoint, ident: ServerIdentity,
                       http: httpx.AsyncClient, client: PathClient, journal) -> AsyncIterator[None]:
    """Poll load and identity while the block runs; write the session's end record after."""
    sp = cfg.paths[work.path]
    url, dialect = ep.base_url, sp.dialect
    st, stop = _State(), asyncio.Event()
    before = await _quiet(read_metrics(http, url))
    st.last_metrics = before
    tasks = {"load": asyncio.create_task(
                 _watch_load(http, url, dialect, client, st, stop, sp.load_poll_s)),
             "identity": asyncio.create_task(
                 _watch_identity(http, url, dialect, ident, client, st, stop,
                                 sp.identity_poll_s))}
    try:
        yield
    finally:
        stop.set()
        for what, task in tasks.items():
            await _stop(task, what)
        _note_answer(st, False, sp.load_poll_s)     # a silence still open at the end
        await _quiet(_check_identity(http, url, dialect, ident, client, st))
        after = await _quiet(read_metrics(http, url))
        _note_metrics(st, after, client.name)
        if st.restarts:       # kept beside the counters they invalidate
            after = {**(after or {}), RESTARTS_KEY: float(st.restarts),
                     FIRST_RESTART_KEY: st.first_restart_wall}
        applied = await _quiet(engine(dialect).applied_sampling(http, url, client.sampling))
        journal.write(SessionEnd(
            session_id=f"{work.run_id}#{work.segment}", stopped_wall=time.time(),
            stopped_mono=time.monotonic(), identity_lost_after_mono=st.lost_after_mono,
            metrics_before_json=_dumps(before), metrics_after_json=_dumps(after),
            effective_sampling_json=_dumps(applied), load_polls=st.polls,
            external_load_polls=st.excess_polls, external_load_max=st.max_excess,
            identity_checks=st.identity_checks, identity_lost_after_wall=st.lost_after,
            identity_problem=st.problem, unanswered_s=round(max(st.unanswered_s, 0.0), 3)))


async def _quiet(coro):
    """Evidence that cannot be read is absent evidence, not a failed night."""
    try:
        return await coro
    except (DualpathError, httpx.HTTPError) as e:
        log.warning("server evidence unavailable: %s", e)
        return None


def _dumps(obj) -> str | None:
    return None if obj is None else orjson.dumps(obj, default=str).decode()
