"""A simulated path's GPU: idle floor plus watts per busy slot, read like a real one.

Busy slots are the path's calls in flight (capped at its slots), read from the client; its
clock is the simulated server's modelled seconds (real seconds ÷ `time_scale`), so a demo
night at a compressed clock reports the joules of the night it models. Tests drive it by
hand (`busy`, `events`) to change its power limit, link or processes mid-night.
"""

from __future__ import annotations

import time
from typing import Callable

from dualpath.telemetry.readers import GpuInfo, GpuState
from dualpath.telemetry.settings import SimPower


class SimSource:
    """One simulated GPU."""

    kind = "sim"
    has_energy = True

    def __init__(self, power: SimPower, slots: int, busy: Callable[[], int],
                 time_scale: float = 1.0, index: int = 0):
        self.p, self.slots, self.busy, self.scale, self.index = power, slots, busy, time_scale, index
        self.limit_w = power.power_limit_w
        self.link = (4, 16)
        self.processes: dict[int, float] = {1: power.vram_total_mb * 0.8}
        self.extra_w = 0.0
        self._t = self.clock()
        self._joules = 0.0

    def clock(self) -> float:
        """Modelled seconds."""
        return time.monotonic() / self.scale

    def watts(self) -> float:
        busy = max(0, min(self.slots, int(self.busy())))
        return min(self.limit_w, self.p.idle_w + self.p.w_per_busy_slot * busy + self.extra_w)

    def info(self) -> list[GpuInfo]:
        return [GpuInfo(self.index, self.p.name, "sim", float(self.p.vram_total_mb),
                        self.p.power_limit_w, 4, 16)]

    def power(self) -> tuple[float, float | None]:
        now, w = self.clock(), self.watts()
        self._joules += w * (now - self._t)
        self._t = now
        return w, self._joules

    def state(self) -> list[GpuState]:
        used = sum(self.processes.values())
        return [GpuState(self.index, 1800.0, 1000.0, used, self.limit_w, *self.link, 55.0,
                         None, dict(self.processes))]

    def close(self) -> None:
        pass
