"""A background thread that reads a path's GPUs while it scores, and what it saw.

Power is read `hz` times a second; the slower state (clocks, memory, limit, link, processes)
once a second. Joules come from the devices' energy counters where they have one (basis
`counter`), else from the sampled power × time (basis `sampled`). Samples are kept as at
most `max_samples` buckets: when a night outgrows them, neighbours are merged and the
bucket width doubles, so a 12-hour night costs as much storage as a 20-minute one.

A change against the first state read marks the run disturbed (`changes`): the power limit
changed, the link trained narrower (width only: NVIDIA and AMD drop the link's generation at
idle to save power, so a lower generation alone is no fault), or a process that was not on
the GPU when the night began holds memory on it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from dualpath.telemetry.readers import GpuState, link_text


@dataclass
class Summary:
    """What a path's GPUs did over one scoring segment."""

    source: str
    basis: str                   # counter | sampled
    joules: float
    seconds: float
    idle_w: float | None
    idle_s: float
    samples: int
    peak_w: float
    changes: list[str] = field(default_factory=list)
    buckets: list[list[float]] = field(default_factory=list)   # t_s, width_s, mean_w, max_w, mem_mb, sm_mhz, temp_c

    @property
    def mean_w(self) -> float | None:
        return self.joules / self.seconds if self.seconds > 0 else None


class Sampler:
    """Reads `source` on a thread between `start()` and `stop()`."""

    def __init__(self, source, hz: float = 10.0, max_samples: int = 2048,
                 state_every_s: float = 1.0):
        self.src, self.period, self.max = source, 1.0 / hz, max_samples
        self.state_every = state_every_s
        self.clock = getattr(source, "clock", time.monotonic)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.width = 1.0
        self.buckets: list[list[float]] = []
        self.baseline: list[GpuState] | None = None
        self.changes: list[str] = []
        self.samples = 0
        self.peak = 0.0
        self.idle_w: float | None = None
        self.idle_s = 0.0

    def measure_idle(self, seconds: float) -> float | None:
        """Mean board watts over `seconds` before the night (blocking): the idle floor."""
        if seconds <= 0:
            return None
        t0, e0 = self.clock(), self.src.power()[1]
        ws = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ws.append(self.src.power()[0])
            time.sleep(self.period)
        t1, e1 = self.clock(), self.src.power()[1]
        self.idle_s = t1 - t0
        self.idle_w = (e1 - e0) / self.idle_s if e0 is not None and e1 is not None \
            and self.idle_s > 0 else sum(ws) / len(ws)
        return self.idle_w

    def start(self) -> None:
        self.baseline = self.src.state()
        self.t0 = self.t_last = self.clock()
        w, self.e0 = self.src.power()
        self.w_last, self.integrated = w, 0.0
        self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        next_state = time.monotonic() + self.state_every
        while not self._stop.wait(self.period):
            self._tick()
            if time.monotonic() >= next_state:
                next_state += self.state_every
                self._check(self.src.state())

    def _tick(self) -> None:
        w, _ = self.src.power()
        now = self.clock()
        self.integrated += self.w_last * (now - self.t_last)
        self.t_last, self.w_last = now, w
        self.samples += 1
        self.peak = max(self.peak, w)
        t = now - self.t0
        if not self.buckets or t >= self.buckets[-1][0] + self.width:
            start = (t // self.width) * self.width
            self.buckets.append([start, self.width, 0.0, 0.0, w, None, None, None, 0])
            if len(self.buckets) > self.max:
                self._halve()
        b = self.buckets[-1]
        b[2] += w
        b[8] += 1
        b[3] = max(b[3], w)

    def _halve(self) -> None:
        """Merge neighbouring buckets: twice the width, half the count."""
        self.width *= 2
        merged: list[list] = []
        for b in self.buckets:
            start = (b[0] // self.width) * self.width
            if merged and merged[-1][0] == start:
                m = merged[-1]
                m[2] += b[2]
                m[8] += b[8]
                m[3] = max(m[3], b[3])
                m[5:8] = [x if x is not None else y for x, y in zip(b[5:8], m[5:8])]
            else:
                merged.append([start, self.width, *b[2:]])
        self.buckets = merged

    def _check(self, now: list[GpuState]) -> None:
        if self.buckets:
            b, s = self.buckets[-1], now[0]
            b[5:8] = [sum(x.mem_used_mb or 0 for x in now), s.sm_mhz, s.temp_c]
        for before, after in zip(self.baseline or [], now):
            for text in _changed(before, after):
                if text not in self.changes:
                    self.changes.append(text)

    def stop(self) -> Summary:
        """Stop the thread and say what it saw."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self._check(self.src.state())
        w, e1 = self.src.power()
        now = self.clock()
        self.integrated += self.w_last * (now - self.t_last)
        seconds = now - self.t0
        counter = self.e0 is not None and e1 is not None
        buckets = [[b[0], b[1], b[2] / b[8] if b[8] else b[4], b[3], *b[5:8]]
                   for b in self.buckets]
        return Summary(self.src.kind, "counter" if counter else "sampled",
                       (e1 - self.e0) if counter else self.integrated, seconds, self.idle_w,
                       self.idle_s, self.samples, self.peak, list(self.changes), buckets)


def _changed(before: GpuState, after: GpuState) -> list[str]:
    """What changed on one GPU since the night began, in words (empty: nothing that matters)."""
    out = []
    g = f"GPU {after.index}"
    if before.power_limit_w and after.power_limit_w and \
            abs(before.power_limit_w - after.power_limit_w) >= 1:
        out.append(f"power limit changed on {g}: {before.power_limit_w:.0f} → "
                   f"{after.power_limit_w:.0f} W")
    if before.pcie_width and after.pcie_width and after.pcie_width < before.pcie_width:
        out.append(f"PCIe link retrained narrower on {g}: "
                   f"{link_text(before.pcie_gen, before.pcie_width)} → "
                   f"{link_text(after.pcie_gen, after.pcie_width)}")
    for pid, mb in after.processes.items():
        if pid not in before.processes:
            out.append(f"another process (pid {pid}) on {g}, {mb:.0f} MiB")
    return out
