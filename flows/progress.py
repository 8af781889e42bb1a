"""Per-path progress for the flow's log: every `every_s` seconds from the night's start, one
line with each path's units done, calls, elapsed time from the night's start and ETA at the
path's own rate, the slower path named; a path's end is logged when it comes. Forwarded to
the CLI's bars too. (It logged only when a unit finished, timed from a path's first finished
unit: a real night's first line came ~3 min in, its elapsed time undercounted so the ETA was
about half the remaining time, and a path whose units ended together logged once, at its end,
as '4/4 … 0m00s elapsed'.)"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from dualpath.scheduler import Progress


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


class LoggedProgress:
    """A `Progress` that keeps each path's count; `line()` says where every path stands,
    `run()` logs it every `every_s` seconds until cancelled, and a path's end is logged
    when `__call__` sees it. `totals`: each path's planned units (paths yet to finish a
    unit show 0 of them)."""

    def __init__(self, log: logging.Logger | logging.LoggerAdapter, every_s: float = 30.0,
                 forward: Progress | None = None, totals: dict[str, int] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.log, self.every_s, self.forward, self.clock = log, every_s, forward, clock
        self.started = clock()                  # the night's start
        self.state = {p: (0, n, 0) for p, n in (totals or {}).items()}   # done, total, calls
        self.ended: dict[str, float] = {}

    def __call__(self, path: str, done: int, total: int, calls: int) -> None:
        self.state[path] = (done, total, calls)
        if self.forward is not None:
            self.forward(path, done, total, calls)
        if done >= total and path not in self.ended:
            self.ended[path] = self.clock() - self.started
            self.log.info("%s: %d/%d units, %d calls, done %s after the night's start", path,
                          done, total, calls, _eta(self.ended[path]))

    def _eta_s(self, path: str, elapsed: float) -> float | None:
        done, total, _ = self.state[path]
        if done >= total:
            return 0.0
        return (total - done) * elapsed / done if done and elapsed > 0 else None

    def line(self) -> str:
        """Where every path stands now, the slower one (the longest ETA) named."""
        elapsed = self.clock() - self.started
        etas = {p: self._eta_s(p, elapsed) for p in self.state}
        waiting = [p for p, e in etas.items() if e is None]
        slower = (waiting[0] if len(waiting) == 1 else None) if waiting else \
            max(etas, key=lambda p: etas[p]) if any(etas.values()) else None
        parts = []
        for p, (done, total, calls) in self.state.items():
            if done >= total:
                what = f"done at {_eta(self.ended.get(p, elapsed))}"
            elif etas[p] is None:
                what = "ETA — (no unit finished yet)"
            else:
                what = f"ETA {_eta(etas[p])} at its own rate"
            mark = " (slower)" if p == slower and len(self.state) > 1 and done < total else ""
            parts.append(f"{p}{mark} {done}/{total} units, {calls} calls, {what}")
        return f"{_eta(elapsed)} since the night's start: " + "; ".join(parts)

    async def run(self) -> None:
        """Log `line()` every `every_s` seconds, from the night's start, until cancelled."""
        while True:
            await asyncio.sleep(self.every_s)
            if self.state and len(self.ended) < len(self.state):
                self.log.info("%s", self.line())
