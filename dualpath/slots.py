"""Slot pools: how many calls of a path are in flight, and on which server slot.

`SharedSlots` lets any call take any room: `slots` calls on the server's slots plus
`queue_depth` more waiting in the server's own queue, so a slot that frees starts its next
request at once instead of after a round trip through the harness. Units are admitted while
there is room nobody is about to ask for.

`PinnedSlots` (prefix affinity, llama-server `id_slot`) gives each admitted unit a slot of
its own: every call of the unit runs there, so the slot's prompt cache holds the unit's
shared context (system message, ticker header, prices, documents) and only what is new in
each call is prefilled. A unit's calls that are ready together wait at the harness by
default (`queue_depth` 0: at most `1 + queue_depth` sent to its slot at once); a new unit is
admitted when a slot has room for one (`units_per_slot`, default 1). Nothing is queued at a
busy slot because llama-server's cache update runs for a task named to a busy slot before it
is deferred, and copies that slot's whole state (~88 MiB at 5k tokens on an H200, ~50 ms) to
its RAM prompt cache on its main thread, so no slot launches or decodes meanwhile: one queued
call per slot made nights 4-12% longer there (bench/gpu/README.md). The slot idles between a
call's answer and the next call: the harness's part is ~0.2 ms, the server's intake ~10 ms,
plus any RAM-cache copies other slots' launches make meanwhile (`--cache-idle-slots`:
server-side occupancy 0.96; with `--cache-ram 0` on the server, 0.987). Two units per slot
fill those gaps but alternate two contexts in one slot's cache, and the queued unit's saved
context is loaded into the busy slot, where it is lost: 2.2x the prefill and a 7-11% longer
night. Once every unit is admitted, a slot with nothing running or queued takes any unit's
waiting call, so the night's last units spread over the slots. A unit's calls run one after
another on its slot, so its own latency can be longer than when its parallel calls spread
over several slots; what it saves is prefill, so which basis gains depends on the workload
(measured in bench/prefix.py and bench/gpu), which is why the switch is part of the
fingerprint.

Both serve waiting calls lowest priority value (oldest unit) first.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Callable


class _Waiters:
    """Futures served lowest priority first."""

    def __init__(self):
        self._heap: list[tuple[int, int, asyncio.Future]] = []
        self._seq = itertools.count()

    def pending(self) -> bool:
        return any(not f.done() for _, _, f in self._heap)

    async def wait(self, priority: int, give_back: Callable[[object], None]) -> object:
        """Wait to be woken; returns what the waker handed over."""
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (priority, next(self._seq), fut))
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                give_back(fut.result())   # handed over just as we were cancelled
            raise

    def wake_one(self, value: object = None) -> bool:
        while self._heap:
            _, _, fut = heapq.heappop(self._heap)
            if not fut.done():
                fut.set_result(value)
                return True
        return False


class SharedSlots:
    """At most `slots + queue_depth` calls in flight, on whichever slot the server picks."""

    def __init__(self, slots: int, queue_depth: int = 0):
        self.slots = slots
        self.free = slots + queue_depth
        self.no_more_units = False
        self._waiters = _Waiters()
        self.on_idle: Callable[[], None] | None = None

    def room_for_unit(self, starting: int) -> bool:
        """Whether a new unit would find room that no admitted unit is about to ask for."""
        return self.free > starting and not self._waiters.pending()

    def claim(self) -> int | None:
        return None

    def disown(self, home: int | None) -> None:
        pass

    async def acquire(self, priority: int, home: int | None = None) -> int | None:
        if self.free > 0 and not self._waiters.pending():
            self.free -= 1
        else:
            await self._waiters.wait(priority, lambda _: self._hand_on())
        return None

    def release(self, slot: int | None = None) -> None:
        self._hand_on()

    def _hand_on(self) -> None:
        if not self._waiters.wake_one():
            self.free += 1
            if self.on_idle is not None:
                self.on_idle()


class PinnedSlots:
    """Units own slots; every call of a unit is sent to its slot (see the module doc)."""

    def __init__(self, slots: int, queue_depth: int = 0, units_per_slot: int = 1):
        self.slots = slots
        self.per_slot = 1 + queue_depth
        self.units_per_slot = units_per_slot
        self.owners = [0] * slots
        self.no_more_units = False        # set by the scheduler once every unit is admitted
        self.load = [0] * slots
        self._waiters = [_Waiters() for _ in range(slots)]
        self.on_idle: Callable[[], None] | None = None

    def room_for_unit(self, starting: int) -> bool:
        return sum(self.units_per_slot - n for n in self.owners) > starting

    def claim(self) -> int:
        """The slot of a unit about to make its first call: the one with fewest units."""
        slot = self.owners.index(min(self.owners))
        self.owners[slot] += 1
        return slot

    def disown(self, home: int | None) -> None:
        """A unit finished: its slot takes the next unit."""
        if home is not None:
            self.owners[home] -= 1
            if self.on_idle is not None:
                self.on_idle()
            if self.no_more_units and self.load[home] == 0:
                self._lend(home)

    async def acquire(self, priority: int, home: int | None = None) -> int:
        if self.load[home] < self.per_slot and not self._waiters[home].pending():
            self.load[home] += 1
            return home
        spare = self._spare()
        if spare is not None:
            self.load[spare] += 1
            return spare
        given = await self._waiters[home].wait(
            priority, lambda lent: self.release(home if lent is None else lent))
        return home if given is None else given   # its own slot, or one lent to it

    def _spare(self) -> int | None:
        """Once no unit is left to admit, a slot with nothing running or queued takes any
        unit's call: the night's last units then spread over the slots instead of leaving
        them idle (the call lands on another unit's cache; llama-server's RAM prompt cache
        brings its own context back)."""
        if not self.no_more_units:
            return None
        idle = [i for i in range(self.slots) if self.load[i] == 0]
        return idle[0] if idle else None

    def release(self, slot: int | None = None) -> None:
        if not self._waiters[slot].wake_one():
            self.load[slot] -= 1
            if self.no_more_units and self.load[slot] == 0:
                self._lend(slot)


    def _lend(self, slot: int) -> None:
        """Hand an idle slot to a call waiting at another slot."""
        for waiters in self._waiters:
            if waiters.pending():
                self.load[slot] += 1
                waiters.wake_one(slot)
                return
