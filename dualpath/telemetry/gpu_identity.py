"""A path's GPUs as part of its identity: what they are (model, driver, power limit, PCIe
link, VRAM), read through the telemetry readers, compared with `[paths.X.expect.gpu]`.

The PCIe link is the one between the card and its slot (`telemetry.pci`: an RDNA card's own
switch is looked past). Its generation is judged at its maximum, the smaller of the card's
and the slot's (a link drops to a lower generation at idle to save power, so the current
generation says nothing about the slot); the width is judged as trained now (a card in an
x4 slot, or a link retrained narrower, stays narrow).
"""

from __future__ import annotations

from dataclasses import dataclass

from dualpath.telemetry.readers import GpuInfo, GpuState, NoCounters, host_name, link_text


@dataclass(frozen=True)
class GpuReading:
    """One GPU's identity fields, as read now."""

    info: GpuInfo
    state: GpuState

    @property
    def power_limit_w(self) -> float | None:
        return self.state.power_limit_w if self.state.power_limit_w is not None \
            else self.info.power_limit_w

    @property
    def pcie(self) -> str | None:
        """The link as a pin writes it: maximum generation, current width."""
        gen = self.info.pcie_gen_max if self.info.pcie_gen_max is not None else self.state.pcie_gen
        width = self.state.pcie_width if self.state.pcie_width is not None \
            else self.info.pcie_width_max
        return link_text(gen, width) if gen is not None and width is not None else None

    @property
    def pcie_width(self) -> int | None:
        """The link's width as trained now (its maximum where it cannot be read now)."""
        return self.state.pcie_width if self.state.pcie_width is not None \
            else self.info.pcie_width_max


def read_gpus(sp, base_url: str | None, drm_root=None) -> list[GpuReading]:
    """The GPUs path `sp` uses, read now (raises `NoCounters` with the reason)."""
    from dualpath.telemetry import source_for

    try:
        src = source_for(sp, base_url, drm_root=drm_root)
        try:
            infos, states = src.info(), src.state()
        finally:
            src.close()
    except NoCounters:
        raise
    except Exception as e:        # a reader's fault is a GPU not read, not a crashed doctor
        raise NoCounters(f"the GPU reader failed: {type(e).__name__}: {e}") from None
    if not infos:
        raise NoCounters("the source lists no GPU")
    return [GpuReading(i, s) for i, s in zip(infos, states)]


def _w(v: float | None) -> str:
    return "?" if v is None else f"{v:g} W"


def gpu_line(r: GpuReading) -> str:
    """'NAME, driver D, power limit 210 W, link Gen4 x16 (max Gen4 x16), VRAM 32768 MiB'; a
    card whose own maximum the slot does not reach, or whose link is read past its own
    switch, says so in the brackets."""
    i, s = r.info, r.state
    now = link_text(s.pcie_gen, s.pcie_width) or "?"
    most = link_text(i.pcie_gen_max, i.pcie_width_max) or "?"
    card = link_text(i.card_pcie_gen_max, i.card_pcie_width_max)
    if card and card != most:
        most += f"; the card {card}"
    if i.link_read_at:
        most += f", read at {i.link_read_at}"
    vram = "?" if i.vram_total_mb is None else f"{i.vram_total_mb:.0f} MiB"
    return (f"{i.name}, driver {i.driver}, power limit {_w(r.power_limit_w)}, "
            f"link {now} (max {most}), VRAM {vram}")


def narrow_links(readings: list[GpuReading]) -> list[str]:
    """Each GPU whose link runs narrower than its maximum width, or whose slot gives it
    fewer lanes than the card has (the seed's lesson: a GPU stuck in a Gen3 x4 slot)."""
    out = []
    for r in readings:
        i, w = r.info, r.state.pcie_width
        if w is not None and i.pcie_width_max is not None and w < i.pcie_width_max:
            out.append(f"GPU {i.index}: PCIe link runs x{w} of its maximum x{i.pcie_width_max} "
                       "(width is judged: the generation drops at idle); reseat the card or "
                       "move it to a full-width slot")
        elif i.card_pcie_width_max and i.pcie_width_max and \
                i.pcie_width_max < i.card_pcie_width_max:
            out.append(f"GPU {i.index}: the slot gives the card "
                       f"{link_text(i.pcie_gen_max, i.pcie_width_max)} of its "
                       f"{link_text(i.card_pcie_gen_max, i.card_pcie_width_max)}; move it to "
                       f"a slot of x{i.card_pcie_width_max}")
    return out


def _same(name: str, want, got) -> bool:
    if name == "power_limit_w":
        return abs(want - got) <= 0.5
    if name == "vram_total_mb":
        return abs(want - got) <= 1
    return want == got


def _toml(name: str, v) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    return f"{round(v)}" if name == "vram_total_mb" or float(v).is_integer() else f"{v:g}"


def gpu_differences(readings: list[GpuReading], pin, path: str) -> list[str]:
    """Each pinned field a GPU of path `path` reads otherwise, with the value to write when
    the GPU is the one meant (empty: every pin holds, or nothing is pinned)."""
    if pin is None:
        return []
    out = []
    for r in readings:
        got_of = {"model": r.info.name, "driver": r.info.driver,
                  "power_limit_w": r.power_limit_w, "pcie": r.pcie,
                  "pcie_width": r.pcie_width,
                  "vram_total_mb": r.info.vram_total_mb}
        for name, got in got_of.items():
            want = getattr(pin, name)
            if want is None or (got is not None and _same(name, want, got)):
                continue
            fix = (f"; if this GPU is the one meant, write {name} = {_toml(name, got)} under "
                   f"[paths.{path}.expect.gpu]") if got is not None else ""
            out.append(f"gpu.{name}: expected {_toml(name, want)}, GPU {r.info.index} reads "
                       f"{'nothing' if got is None else _toml(name, got)}{fix}")
    return out


def pinned_text(pin) -> str | None:
    """The GPU pins as a config writes them (None: nothing pinned)."""
    if pin is None:
        return None
    set_ = {k: v for k, v in pin.model_dump().items() if v is not None}
    return ", ".join(f"{k} = {_toml(k, v)}" for k, v in set_.items()) or None


def gpu_pin_lines(name: str, sp, drm_root=None) -> list[tuple[str, bool]]:
    """For `dualpath check`: the path's GPU pins, then each that a GPU readable on this host
    reads otherwise (True: a warning). No server is contacted."""
    shown = pinned_text(sp.expect.gpu)
    if shown is None:
        return []
    try:
        diffs = gpu_differences(read_gpus(sp, sp.base_url, drm_root), sp.expect.gpu, name)
    except NoCounters as e:
        return [(f"expect.gpu: {shown} (not readable here: {e}; `dualpath doctor` checks it "
                 "on the GPU's host)", False)]
    return [(f"expect.gpu: {shown}" + ("" if diffs else " (the GPUs read so now)"), False)] + \
        [(d, True) for d in diffs]


def require_gpu_pins(sp, path: str, base_url: str | None, drm_root=None) -> None:
    """Before a night scores path `path`: raise `IdentityError` naming each GPU pin its GPUs
    read otherwise, with the value to write, as a server that is not the one the path
    expects is refused (a pin that cannot be checked, the GPU unreadable here, refuses too)."""
    from dualpath.errors import IdentityError

    shown = pinned_text(sp.expect.gpu)
    if shown is None:
        return
    try:
        readings = read_gpus(sp, base_url, drm_root)
    except NoCounters as e:
        raise IdentityError(path, [f"gpu: pinned ({shown}) but {unknown_gpu(str(e))}; score "
                                   f"the path on the GPU's host, or remove [paths.{path}."
                                   "expect.gpu]"]) from None
    if diffs := gpu_differences(readings, sp.expect.gpu, path):
        raise IdentityError(path, diffs)


def unknown_gpu(reason: str) -> str:
    return f"GPU unknown (on host {host_name()}: {reason})"
