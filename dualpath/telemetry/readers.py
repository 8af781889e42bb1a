"""Readers of a GPU's own counters: NVML on NVIDIA, amdgpu's hwmon sysfs on AMD.

Each source reads a fixed set of GPUs and answers two questions: `power()` (fast, every
sample: board watts and the energy counter where the device has one) and `state()` (slower,
about once a second: clocks, memory, power limit, PCIe link, temperature, throttle reasons,
the processes on it). `info()` is what does not change while a server runs (model, driver,
VRAM total, the link's maximum). A host whose GPUs cannot be read raises `NoCounters` with
the reason, which the night stores as "energy unknown", never as 0 W.

NVML through `nvidia-ml-py` (NVIDIA's own bindings, kept in step with the driver; Zeus wraps
the same calls but adds a torch-centred monitor and its own daemon that a nightly harness
does not need). amdgpu through its sysfs files, so no ROCm install is needed on the host: the
files and units are the kernel's (`power1_average` µW, `energy1_input` µJ where the kernel
exposes it, `power1_cap` µW, the PCI device's `current_link_speed` "16.0 GT/s PCIe"), the
link read where the slot sees it (`telemetry.pci`: past an RDNA card's own PCIe switch).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from dualpath.telemetry.pci import link_at, slot_link


class NoCounters(Exception):
    """No readable GPU counters for a path on this host (the message says why)."""


@dataclass(frozen=True)
class GpuInfo:
    """What a GPU is: fixed while a server runs on it."""

    index: int
    name: str
    driver: str
    vram_total_mb: float | None
    power_limit_w: float | None
    pcie_gen_max: int | None          # the most the link reaches: card and slot together
    pcie_width_max: int | None
    uuid: str | None = None
    card_pcie_gen_max: int | None = None      # the card alone (None: not read apart)
    card_pcie_width_max: int | None = None
    link_read_at: str | None = None   # where the link was read, where not the GPU function


@dataclass(frozen=True)
class GpuState:
    """A GPU's slower readings (about once a second)."""

    index: int
    sm_mhz: float | None = None
    mem_mhz: float | None = None
    mem_used_mb: float | None = None
    power_limit_w: float | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    temp_c: float | None = None
    throttle: str | None = None            # the active reasons' names, comma-separated
    processes: dict = field(default_factory=dict)   # pid: MiB of VRAM (NVML only)


def link_text(gen: int | None, width: int | None) -> str | None:
    """A PCIe link as people write it: 'Gen4 x16'."""
    if gen is None and width is None:
        return None
    return f"Gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"


class NvmlSource:
    """NVIDIA GPUs by NVML index."""

    kind = "nvml"

    def __init__(self, indices: list[int] | None):
        try:
            import pynvml
        except ImportError:
            raise NoCounters("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
        self.nv = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise NoCounters(f"NVML could not start: {e}") from None
        count = pynvml.nvmlDeviceGetCount()
        self.indices = list(range(count)) if indices is None else list(indices)
        bad = [i for i in self.indices if not 0 <= i < count]
        if not count or bad:
            pynvml.nvmlShutdown()
            raise NoCounters(f"NVML sees {count} GPU(s); the path names GPU(s) {bad}")
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in self.indices]
        self.has_energy = all(self._energy(h) is not None for h in self.handles)

    def _try(self, fn, *args):
        try:
            return fn(*args)
        except self.nv.NVMLError:
            return None

    def _energy(self, h) -> float | None:
        mj = self._try(self.nv.nvmlDeviceGetTotalEnergyConsumption, h)
        return None if mj is None else mj / 1e3

    def info(self) -> list[GpuInfo]:
        nv, out = self.nv, []
        driver = self._try(nv.nvmlSystemGetDriverVersion) or "?"
        for i, h in zip(self.indices, self.handles):
            mem = self._try(nv.nvmlDeviceGetMemoryInfo, h)
            limit = self._try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
            out.append(GpuInfo(i, _text(self._try(nv.nvmlDeviceGetName, h)) or "?",
                               _text(driver), mem.total / 2**20 if mem else None,
                               limit / 1e3 if limit is not None else None,
                               self._try(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
                               self._try(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
                               _text(self._try(nv.nvmlDeviceGetUUID, h))))
        return out

    def power(self) -> tuple[float, float | None]:
        """Board watts summed over the GPUs, and their energy counters' sum in J (or None)."""
        w = 0.0
        for h in self.handles:
            mw = self._try(self.nv.nvmlDeviceGetPowerUsage, h)
            w += (mw or 0) / 1e3
        if not self.has_energy:
            return w, None
        es = [self._energy(h) for h in self.handles]
        return w, None if None in es else sum(es)

    def state(self) -> list[GpuState]:
        nv, out = self.nv, []
        for i, h in zip(self.indices, self.handles):
            mem = self._try(nv.nvmlDeviceGetMemoryInfo, h)
            limit = self._try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
            procs = self._try(nv.nvmlDeviceGetComputeRunningProcesses, h) or []
            out.append(GpuState(
                i, self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
                mem.used / 2**20 if mem else None, limit / 1e3 if limit is not None else None,
                self._try(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
                self._try(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
                self._try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                self._throttle(h),
                {p.pid: (p.usedGpuMemory or 0) / 2**20 for p in procs}))
        return out

    def _throttle(self, h) -> str | None:
        fn = getattr(self.nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(self.nv, "nvmlDeviceGetCurrentClocksThrottleReasons")
        bits = self._try(fn, h)
        if bits is None:
            return None
        names = [n[len("nvmlClocksThrottleReason"):] for n in dir(self.nv)
                 if n.startswith("nvmlClocksThrottleReason") and not n.endswith(("All", "None"))
                 and isinstance(getattr(self.nv, n), int) and bits & getattr(self.nv, n)]
        return ",".join(sorted(set(names))) or None

    def close(self) -> None:
        self._try(self.nv.nvmlShutdown)


def _text(v) -> str | None:
    return v.decode() if isinstance(v, bytes) else v


class HwmonSource:
    """AMD GPUs through amdgpu's sysfs: `root` is /sys/class/drm (a test's tmp dir)."""

    kind = "hwmon"

    def __init__(self, indices: list[int] | None, root: Path | str = "/sys/class/drm"):
        cards = sorted((p for p in Path(root).glob("card[0-9]*") if p.name[4:].isdigit()
                        and any((p / "device" / "hwmon").glob("hwmon*"))),
                       key=lambda p: int(p.name[4:]))      # an empty hwmon/ is no card
        cards = [c for c in cards if _read(c / "device" / "uevent", "").find("amdgpu") >= 0]
        if not cards:
            raise NoCounters(f"no amdgpu hwmon under {root}")
        self.indices = list(range(len(cards))) if indices is None else list(indices)
        bad = [i for i in self.indices if not 0 <= i < len(cards)]
        if bad:
            raise NoCounters(f"amdgpu shows {len(cards)} GPU(s); the path names GPU(s) {bad}")
        self.devs = [cards[i] / "device" for i in self.indices]
        self.mons = [next(iter(sorted((d / "hwmon").glob("hwmon*")))) for d in self.devs]
        if not all((m / "power1_average").exists() or (m / "power1_input").exists()
                   for m in self.mons):
            raise NoCounters(f"amdgpu under {root} exposes no power1_average")
        self.has_energy = all((m / "energy1_input").exists() for m in self.mons)
        self.card_ends = [slot_link(d).card_end for d in self.devs]
        self.sysfs = Path(root).parent.parent       # /sys of /sys/class/drm

    def info(self) -> list[GpuInfo]:
        out = []
        for i, d, m in zip(self.indices, self.devs, self.mons):
            vram = _num(d / "mem_info_vram_total")
            cap = _num(m / "power1_cap")
            link = slot_link(d)
            out.append(GpuInfo(i, _read(d / "product_name") or "AMD GPU (amdgpu)",
                               _read(self.sysfs / "module/amdgpu/version") or "amdgpu",
                               vram / 2**20 if vram is not None else None,
                               cap / 1e6 if cap is not None else None,
                               link.gen_max, link.width_max, None,
                               link.card.gen_max, link.card.width_max,
                               f"the card's upstream port {link.card.address}"
                               if link.switch_ports else None))
        return out

    def power(self) -> tuple[float, float | None]:
        """Board watts summed over the GPUs and their energy counters' sum in J (or None);
        raises `OSError` when a GPU's power cannot be read (a GPU in reset or gone from the
        bus): a missing reading is no reading, never 0 W."""
        w = 0.0
        for m in self.mons:
            uw = _num(m / "power1_average")
            uw = uw if uw is not None else _num(m / "power1_input")
            if uw is None:
                raise OSError(f"no power reading in {m} (power1_average, power1_input)")
            w += uw / 1e6
        if not self.has_energy:
            return w, None
        es = [_num(m / "energy1_input") for m in self.mons]
        return w, None if None in es else sum(es) / 1e6

    def state(self) -> list[GpuState]:
        out = []
        for i, d, m, top in zip(self.indices, self.devs, self.mons, self.card_ends):
            used, cap = _num(d / "mem_info_vram_used"), _num(m / "power1_cap")
            sclk, mclk, temp = _num(m / "freq1_input"), _num(m / "freq2_input"), _num(m / "temp1_input")
            link = link_at(top)         # the card's end of its link to the slot
            out.append(GpuState(i, sclk / 1e6 if sclk else None, mclk / 1e6 if mclk else None,
                                used / 2**20 if used is not None else None,
                                cap / 1e6 if cap is not None else None,
                                link.gen, link.width, temp / 1e3 if temp is not None else None))
        return out

    def close(self) -> None:
        pass


def _read(p: Path, default: str | None = None) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return default


def _num(p: Path) -> float | None:
    try:
        return float(_read(p))
    except (TypeError, ValueError):
        return None


def _int(p: Path) -> int | None:
    v = _num(p)
    return int(v) if v is not None else None


KINDS = {"nvidia": "nvml", "amd": "hwmon"}


def open_source(indices: list[int] | None, vendor_hint: str | None = None,
                drm_root: Path | str | None = None):
    """The source that reads `indices` on this host, or raises `NoCounters` with every
    source's reason. With a vendor (`nvidia`: NVML, `amd`: amdgpu) only that one is asked.
    Without one, the host's only kind; a host with both (the user's 5090 beside an R9700)
    is refused rather than guessed: GPU 0 is another card in each driver's numbering, and
    NVML first read the backup's joules off the main path's card."""
    kinds = ([KINDS[vendor_hint]] if vendor_hint else
             ["hwmon", "nvml"] if drm_root else ["nvml", "hwmon"])   # reasons in that order
    found, reasons = [], []
    for kind in kinds:
        try:
            found.append(NvmlSource(indices) if kind == "nvml"
                         else HwmonSource(indices, drm_root or "/sys/class/drm"))
        except NoCounters as e:
            reasons.append(str(e))
        except OSError as e:
            reasons.append(f"{kind}: {e}")
    if len(found) == 1:
        return found[0]
    for src in found:
        src.close()
    if found:
        raise NoCounters("this host has NVIDIA and AMD GPUs and nothing says whose this path "
                         "uses; set [paths.X] gpu_vendor = \"nvidia\" or \"amd\" (and gpus, "
                         "counted in that vendor's order)")
    raise NoCounters("; ".join(reasons))


def host_name() -> str:
    return os.uname().nodename
