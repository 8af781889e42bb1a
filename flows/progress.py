"""Per-path progress for the flow's log: units done, calls, rate and ETA at a steady interval
(a worker's log is where a scheduled night is watched), forwarded to the CLI's bars too."""

from __future__ import annotations

import logging
import time

from dualpath.scheduler import Progress


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


class LoggedProgress:
    """A `Progress` that logs each path at most every `every_s` seconds (and at its end)."""

    def __init__(self, log: logging.Logger | logging.LoggerAdapter, every_s: float = 30.0,
                 forward: Progress | None = None):
        self.log, self.every_s, self.forward = log, every_s, forward
        self._start: dict[str, float] = {}
        self._last: dict[str, float] = {}

    def __call__(self, path: str, done: int, total: int, calls: int) -> None:
        now = time.monotonic()
        start = self._start.setdefault(path, now)
        if self.forward is not None:
            self.forward(path, done, total, calls)
        if done < total and now - self._last.get(path, start) < self.every_s:
            return
        self._last[path] = now
        elapsed = now - start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = _eta((total - done) / rate) if rate > 0 and done < total else "—"
        self.log.info("%s: %d/%d units, %d calls, %s elapsed, ETA %s", path, done, total,
                      calls, _eta(elapsed), eta if done < total else "done")
