"""What GPU telemetry costs the harness: the sampler thread at 10 Hz for 20 s over a source,
its CPU time as a share of one core (goal < 0.5%). Sources: the amdgpu reader over a sysfs
tree shaped like an R9700's (tests/sysfs_trees.py: the GPU behind its card's own PCIe
switch, its link read at the card's upstream port once a second; each read opens and parses
the files as on a real host), the simulated GPU, and NVML where this host has it.

usage: python bench/telemetry.py [--seconds 20] [--hz 10]
"""
from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dualpath.telemetry import NoCounters, Sampler, SimSource  # noqa: E402
from dualpath.telemetry.readers import HwmonSource, NvmlSource  # noqa: E402
from dualpath.telemetry.settings import SimPower  # noqa: E402
from tests.sysfs_trees import amd_card  # noqa: E402


def cpu_share(src, seconds: float, hz: float) -> tuple[float, int]:
    s = Sampler(src, hz)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    s.start()
    time.sleep(seconds)
    out = s.stop()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return cpu / seconds, out.samples


def main() -> None:
    a = argparse.ArgumentParser()
    a.add_argument("--seconds", type=float, default=20.0)
    a.add_argument("--hz", type=float, default=10.0)
    args = a.parse_args()
    root = Path(tempfile.mkdtemp())
    amd_card(root)                  # amdgpu has no energy1_input: power is integrated
    sources = {"amdgpu hwmon (sysfs files)": HwmonSource(None, root / "class" / "drm"),
               "simulated GPU": SimSource(SimPower(), 4, lambda: 2)}
    try:
        sources["NVML"] = NvmlSource(None)
    except NoCounters as e:
        print(f"NVML: not measured here ({e})")
    for name, src in sources.items():
        share, n = cpu_share(src, args.seconds, args.hz)
        print(f"sampler at {args.hz:g} Hz, {name}: {100 * share:.3f}% of a core "
              f"({n} samples in {args.seconds:g} s; goal < 0.5%)")


if __name__ == "__main__":
    main()
