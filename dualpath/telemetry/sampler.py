"""A background thread that reads a path's GPUs while it scores, and what it saw.

Power is read `hz` times a second; the slower state (clocks, memory, limit, link, processes)
once a second. Joules come from the devices' energy counters where they have one (basis
`counter`), else from the sampled power × time (basis `sampled`). Samples are kept as at
most `max_samples` buckets: when a night outgrows them, neighbours are merged and the
bucket width doubles, so a 12-hour night costs as much storage as a 20-minute one.

A reader that fails (a GPU in reset, a driver that stops answering) never ends the thread or
the night: the failure is logged once, the reads are retried with a back-off (the period
doubling up to `MAX_BACKOFF_S`), every sample taken is kept, and the summary says what the
joules cover: whole (the counter spans a gap; sampled power holds its last value over one,
within the stated bound), or `stopped` ("sampling stopped at HH:MM:SS (why)") when the reader
never came back, in which case the night's joules are unknown, never the part read as if it
were the whole. A reader's fault is no disturbance: the run's label is left as it is.

A change against the first state read marks the run disturbed (`changes`): the power limit
changed, the link trained narrower (width only: NVIDIA and AMD drop the link's generation at
idle to save power, so a lower generation alone is no fault), or a process that was not on
the GPU when the night began holds memory on it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from dualpath.telemetry.readers import GpuState, link_text

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 5.0     # a failing reader is retried at least this often


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
    hz: float | None = None          # power samples per second taken
    error_j: float | None = None     # bound on the joules' error (sampled basis; None: counter)
    gap_s: float = 0.0               # seconds the reader failed (retried) and came back
    faults: str | None = None        # the reader's failures in words (None: none)
    stopped: str | None = None       # "sampling stopped at HH:MM:SS (why)": joules partial

    @property
    def mean_w(self) -> float | None:
        return self.joules / self.seconds if self.seconds > 0 else None


class Sampler:
    """Reads `source` on a thread between `start()` and `stop()`."""

    def __init__(self, source, hz: float = 10.0, max_samples: int = 2048,
                 state_every_s: float = 1.0, name: str = "?"):
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
        self.name = name
        self.variation = 0.0            # Σ|Δw|·Δt: the sampled integral's error bound
        self.gap_s = 0.0
        self.failing_since: tuple[float, float, str] | None = None   # (clock, wall, why)
        self.fault_count = 0
        self.first_fault: str | None = None

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
        wait = self.period
        while not self._stop.wait(wait):
            try:
                self._tick()
            except Exception as e:      # any reader fault: retried, never the thread's end
                wait = min(max(wait * 2, self.period), MAX_BACKOFF_S)
                self._failed(e)
                continue
            wait = self.period
            if time.monotonic() >= next_state:
                next_state = time.monotonic() + self.state_every
                try:
                    self._check(self.src.state())
                except Exception as e:  # the slower state read: no sample lost with it
                    self._failed(e, power=False)

    def _failed(self, e: Exception, power: bool = True) -> None:
        """Count a failed read; the first is logged (one line a night); a failed power read
        starts a gap that lasts until a read succeeds."""
        why = f"{type(e).__name__}: {e}"
        self.fault_count += 1
        if power and self.failing_since is None:
            self.failing_since = (self.clock(), time.time(), why)
        if self.first_fault is None:
            self.first_fault = why
            log.warning("path %s: GPU telemetry: the reader failed at %s (%s); retrying, "
                        "samples kept", self.name, _hms(time.time()), why)

    def _advance(self, w: float) -> float:
        """Integrate up to now with the last reading held, then take `w`; returns now."""
        now = self.clock()
        if self.failing_since is not None:      # back after a gap: held value over it
            self.gap_s += now - self.t_last
            self.failing_since = None
        self.integrated += self.w_last * (now - self.t_last)
        self.variation += abs(w - self.w_last) * (now - self.t_last)
        self.t_last, self.w_last = now, w
        return now

    def _tick(self) -> None:
        now = self._advance(self.src.power()[0])
        w = self.w_last
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
        """Stop the thread and say what it saw (never raises: a reader failing now is the
        summary's `stopped`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            w, e1 = self.src.power()
            self._advance(w)
        except Exception as e:         # noqa: BLE001 - a reader's fault is stated, not raised
            self._failed(e)
            e1 = None
        try:
            self._check(self.src.state())
        except Exception as e:         # noqa: BLE001
            self._failed(e, power=False)
        return self._summary(e1)

    def _summary(self, e1: float | None) -> Summary:
        seconds = self.clock() - self.t0
        counter = self.e0 is not None and e1 is not None
        buckets = [[b[0], b[1], b[2] / b[8] if b[8] else b[4], b[3], *b[5:8]]
                   for b in self.buckets]
        stopped = None
        if self.failing_since is not None:
            _, wall, why = self.failing_since
            stopped = f"sampling stopped at {_hms(wall)} ({why})"
        faults = None
        if self.fault_count:
            faults = (f"the reader failed {self.fault_count}× ({self.first_fault}); "
                      f"{self.gap_s:.1f} s without samples"
                      + (", the counter spans it" if counter else ", last value held"))
        # sampled: each interval's error is at most its change times its length (the power
        # moves between two reads by no more than it did across them, on a smooth load),
        # and a gap's at most its length times the peak
        error = None if counter else self.variation + self.gap_s * self.peak
        span = self.t_last - self.t0
        return Summary(self.src.kind, "counter" if counter else "sampled",
                       (e1 - self.e0) if counter else self.integrated, seconds, self.idle_w,
                       self.idle_s, self.samples, self.peak, list(self.changes), buckets,
                       self.samples / span if span > 0 else None, error, self.gap_s, faults,
                       stopped)


def _hms(wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(wall))


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
