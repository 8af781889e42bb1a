"""Server-side slot occupancy from a llama-server log (`--log-prefix --log-timestamps`).

llama-server logs each slot's start of a task (`launch_slot_ ... processing task`) and its
end (`release ... stop processing`) with the time since it started (`M.SS.mmm.uuu`); the
simulated server (`dualpath.sim.slots`) writes the same lines. From them:

- occupancy = the slots' busy time (launch to release) / (slots x the window from the first
  launch to the last release): the share of slot time the server spent on tasks;
- idle gaps = on each slot, the time from a release to its next launch.

Both are what the server saw, whatever the client's clocks say.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LINE = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) I slot\s+(launch_slot_|release): "
                   r"id\s+(\d+) \| task (-?\d+) \| (processing task|stop processing)")


@dataclass
class SlotLog:
    """Busy intervals per slot, in seconds since the server started."""

    busy: dict[int, list[tuple[float, float]]]

    @property
    def tasks(self) -> int:
        return sum(len(v) for v in self.busy.values())

    def window(self) -> tuple[float, float]:
        spans = [iv for v in self.busy.values() for iv in v]
        return min(a for a, _ in spans), max(b for _, b in spans)

    def occupancy(self, slots: int | None = None) -> float:
        """Busy slot-seconds / (slots x (last release - first launch))."""
        lo, hi = self.window()
        n = slots or len(self.busy)
        total = sum(b - a for v in self.busy.values() for a, b in v)
        return total / (n * (hi - lo)) if hi > lo else float("nan")

    def gaps(self) -> list[float]:
        """Each slot's idle time between a release and its next launch, in seconds."""
        out = []
        for ivs in self.busy.values():
            out += [b[0] - a[1] for a, b in zip(ivs, ivs[1:])]
        return out

    def summary(self, slots: int | None = None) -> dict:
        g = sorted(self.gaps()) or [float("nan")]
        lo, hi = self.window()
        return {"tasks": self.tasks, "window_s": hi - lo, "occupancy": self.occupancy(slots),
                "gap_median_ms": statistics.median(g) * 1e3,
                "gap_p90_ms": g[min(len(g) - 1, int(0.9 * len(g)))] * 1e3,
                "gaps_over_250ms": sum(x > 0.25 for x in g),
                "idle_in_gaps_s": sum(x for x in g if x == x)}


def _seconds(m: re.Match) -> float:
    return int(m[1]) * 60 + int(m[2]) + int(m[3]) / 1e3 + int(m[4]) / 1e6


def read_slot_log(text: str, since: float = 0.0) -> SlotLog:
    """The busy intervals in a log's text (launches before `since` seconds are left out)."""
    busy: dict[int, list[tuple[float, float]]] = {}
    open_at: dict[int, float] = {}
    for raw in text.splitlines():
        m = _LINE.match(_ANSI.sub("", raw))
        if m is None:
            continue
        t, slot = _seconds(m), int(m[6])
        if m[5] == "launch_slot_":
            if t >= since:
                open_at[slot] = t
        elif slot in open_at:
            busy.setdefault(slot, []).append((open_at.pop(slot), t))
    for ivs in busy.values():
        ivs.sort()
    return SlotLog(busy)


def read_slot_log_file(path: str | Path, since: float = 0.0) -> SlotLog:
    return read_slot_log(Path(path).read_text(errors="replace"), since)
