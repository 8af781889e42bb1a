"""A GPU's PCIe link as its slot sees it, read from the kernel's PCI sysfs.

On RDNA cards (Navi 1x to 4x, the R9700 among them) the GPU function sits behind the card's
own PCIe switch: slot port → the card's upstream port → its downstream port → GPU. The GPU
function's `current_link_speed`/`current_link_width` then describe the link inside the card
(32 GT/s x16 on a Navi 48 whatever slot it is in); the link to the slot is on the card's
upstream port. amdgpu_top and LACT read it there, climbing from the GPU past parents that
are PCI-to-PCI bridges (class 0x0604xx) of the GPU's own vendor, at most two (libdrm_amdgpu_sys
`BUS_INFO::get_system_pcie_port_sysfs_path`); LACT then caps the maximum at the slot port's
(its PR #592: a riser card otherwise read as the card's own maximum). dualpath does the same:
a card with no switch of its own is read on the GPU function, as before.

The kernel writes the files on both ends of a link; a port's `max_link_*` is its own
capability (LnkCap), so the most a link can train to is the smaller of its two ends'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_SPEED_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_CARD_SWITCH_PORTS = 2          # RDNA: the card's upstream and downstream switch ports


@dataclass(frozen=True)
class Link:
    """One end of a PCIe link: trained now and at most (None where a file is missing)."""

    address: str
    gen: int | None
    width: int | None
    gen_max: int | None
    width_max: int | None


@dataclass(frozen=True)
class SlotLink:
    """The card's link to its slot: the card's end (`card`), the slot's end (`slot`, None on
    a tree with no parent port, a test's flat card) and how many of the card's own switch
    ports sit between the GPU function and the slot (0: a card with no switch)."""

    card: Link
    slot: Link | None
    switch_ports: int
    card_end: Path              # the folder of the card's end (re-read for the link now)

    @property
    def gen_max(self) -> int | None:
        """The generation the link can reach: the smaller of its two ends'."""
        return _least(self.card.gen_max, self.slot.gen_max if self.slot else None)

    @property
    def width_max(self) -> int | None:
        return _least(self.card.width_max, self.slot.width_max if self.slot else None)


def _least(a: int | None, b: int | None) -> int | None:
    return a if b is None else b if a is None else min(a, b)


def gen_of(speed: str | None) -> int | None:
    """'16.0 GT/s PCIe' -> 4 (the generation whose per-lane rate that is)."""
    m = re.match(r"\s*([\d.]+)\s*GT/s", speed or "")
    return _SPEED_GEN.get(float(m.group(1))) if m else None


def _text(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None


def _int(p: Path) -> int | None:
    t = _text(p)
    return int(t) if t and t.isdigit() else None


def is_pci(d: Path) -> bool:
    """A PCI function's folder (`0000:01:00.0` holding its `vendor` file)."""
    return bool(_ADDRESS.match(d.name)) and (d / "vendor").is_file()


def link_at(d: Path) -> Link:
    """The link as the function at `d` reports it."""
    return Link(d.name, gen_of(_text(d / "current_link_speed")), _int(d / "current_link_width"),
                gen_of(_text(d / "max_link_speed")), _int(d / "max_link_width"))


def _card_port(d: Path, vendor: str | None) -> bool:
    """One of the card's own switch ports: a PCI-to-PCI bridge of the GPU's vendor."""
    return is_pci(d) and _text(d / "vendor") == vendor and \
        (_text(d / "class") or "").startswith("0x0604")


def slot_link(device: Path) -> SlotLink:
    """The link between the GPU at `device` (a PCI function's folder or a symlink to one,
    such as /sys/class/drm/card1/device) and its slot."""
    top = Path(device).resolve()
    vendor = _text(top / "vendor")
    above, ports = top.parent, 0
    while ports < _CARD_SWITCH_PORTS and _card_port(above, vendor):
        top, above, ports = above, above.parent, ports + 1
    return SlotLink(link_at(top), link_at(above) if is_pci(above) else None, ports, top)
