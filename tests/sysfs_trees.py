"""Sysfs trees shaped like real machines', for the GPU readers' tests.

The shape is the kernel's: PCI functions nest under /sys/devices/pci0000:00 as the bus
does (root port → the card's upstream switch port → its downstream port → GPU), each with
`vendor`, `device`, `class` and its link files; /sys/bus/pci/devices and /sys/class/drm are
relative symlinks into that tree; amdgpu's hwmon and drm/cardN sit under the GPU function,
and cardN/device links back to it. Values and units as the kernel writes them (µW, bytes,
"16.0 GT/s PCIe"). IDs are a Radeon AI PRO R9700's (Navi 48 `1002:7551`, its switch ports
`1002:1478`/`1002:1479`) on an AMD host (root port `1022:1483`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

GEN = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
       5: "32.0 GT/s PCIe"}


@dataclass
class Card:
    """What a test changes mid-night: the GPU's hwmon and its card's end of the slot link."""

    sysfs: Path
    gpu: Path           # the GPU function's folder
    hwmon: Path
    card_end: Path      # where the slot link is read: the upstream port, or the GPU itself


def _function(d: Path, vendor: str, device: str, klass: str, now: tuple[int, int],
              most: tuple[int, int]) -> Path:
    d.mkdir(parents=True)
    for name, value in [("vendor", vendor), ("device", device), ("class", klass),
                        ("current_link_speed", GEN[now[0]]), ("current_link_width", now[1]),
                        ("max_link_speed", GEN[most[0]]), ("max_link_width", most[1])]:
        (d / name).write_text(f"{value}\n")
    return d


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(target, link.parent))


def amd_card(sysfs: Path, *, switch: bool = True, slot: tuple[int, int] = (3, 4),
             slot_max: tuple[int, int] | None = None, card_max: tuple[int, int] = (5, 16),
             card: int = 1, power_uw: int = 187_000_000, cap_uw: int = 210_000_000,
             energy_uj: int | None = None) -> Card:
    """An amdgpu card in a slot whose link trains at `slot` (generation, width) and reaches
    `slot_max` (default: `slot`). `switch`: an RDNA card, the GPU behind its own PCIe switch
    (the link inside the card at the card's maximum); else the GPU function on the slot."""
    port = _function(sysfs / "devices" / "pci0000:00" / "0000:00:01.1", "0x1022", "0x1483",
                     "0x060400", slot, slot_max or slot)
    now = (min(slot[0], card_max[0]), min(slot[1], card_max[1]))
    if switch:
        up = _function(port / "0000:01:00.0", "0x1002", "0x1478", "0x060400", now, card_max)
        down = _function(up / "0000:02:00.0", "0x1002", "0x1479", "0x060400", card_max,
                         card_max)
        gpu = _function(down / "0000:03:00.0", "0x1002", "0x7551", "0x030000", card_max,
                        card_max)
        functions, card_end = [up, down, gpu], up
    else:
        gpu = _function(port / "0000:01:00.0", "0x1002", "0x7551", "0x030000", now, card_max)
        functions, card_end = [gpu], gpu
    audio = _function(gpu.with_name(gpu.name[:-1] + "1"), "0x1002", "0xab40", "0x040300",
                      card_max, card_max)       # the card's HDMI audio: a sibling, no bridge
    for f in [port, *functions, audio]:
        _link(sysfs / "bus" / "pci" / "devices" / f.name, f)
    (gpu / "uevent").write_text(f"DRIVER=amdgpu\nPCI_ID=1002:7551\nPCI_SLOT_NAME={gpu.name}\n")
    (gpu / "product_name").write_text("AMD Radeon AI PRO R9700\n")
    (gpu / "mem_info_vram_total").write_text(f"{32 * 2**30}\n")
    (gpu / "mem_info_vram_used").write_text(f"{22 * 2**30}\n")
    mon = gpu / "hwmon" / "hwmon3"
    mon.mkdir(parents=True)
    for name, value in [("name", "amdgpu"), ("power1_average", power_uw),
                        ("power1_cap", cap_uw), ("temp1_input", 61000),
                        ("freq1_input", 2350000000)]:
        (mon / name).write_text(f"{value}\n")
    if energy_uj is not None:
        (mon / "energy1_input").write_text(f"{energy_uj}\n")
    drm = gpu / "drm" / f"card{card}"
    drm.mkdir(parents=True)
    _link(drm / "device", gpu)
    _link(sysfs / "class" / "drm" / f"card{card}", drm)
    return Card(sysfs, gpu, mon, card_end)
