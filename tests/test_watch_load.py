"""The load watcher counts someone else's requests, not its own calls that ended while it
read the server: on a starved harness a call's answer can be read before the poll's, and
the server's count then includes a call the client no longer holds (the loaded demo flagged
a vLLM run 'shared: up to 2 request(s) … were not this run's' with nobody else there)."""

from __future__ import annotations

import asyncio

import httpx

from dualpath.flows.watch import _State, _watch_load


class _Client:
    in_flight = 0


def _polls(polls: list[tuple[int, int, int]]) -> _State:
    """Each poll (before, busy, after): dualpath holds `before` calls when the poll starts,
    the server reports `busy` slots, and the client holds `after` once the read returns;
    the watcher stops after the last poll."""
    client, st, stop = _Client(), _State(), asyncio.Event()
    it = iter(polls)
    current: list[tuple[int, int, int]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            current[:] = [next(it, (0, 0, 0))]
            client.in_flight = current[0][0]
            return httpx.Response(200, json={"status": "ok"})
        _, busy, client.in_flight = current[0]
        if not any(current[0]):
            stop.set()
        return httpx.Response(200, json=[{"id": i, "is_processing": i < busy}
                                         for i in range(8)])

    async def go():
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            await _watch_load(http, "http://server", "llama.cpp", client, st, stop, 0.001)
    asyncio.run(go())
    return st


def test_calls_that_ended_during_the_read_are_not_someone_elses():
    # 4 in flight when each poll starts, 2 when it returns, the server counted all 4: ours
    st = _polls([(4, 4, 2)] * 4)
    assert st.polls == 5 and st.excess_polls == 0 and st.max_excess == 0


def test_requests_beyond_what_dualpath_held_throughout_are_someone_elses():
    # 6 busy while dualpath held 4 before and after the read, on consecutive polls
    st = _polls([(4, 6, 4)] * 3)
    assert st.polls == 4 and st.excess_polls == 2 and st.max_excess == 2
