"""Settings of GPU telemetry (`[telemetry]`), of the energy price (`[cost]`) and of a
simulated GPU's power model (`[paths.X.power]`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from dualpath.strict import StrictModel


class TelemetrySettings(StrictModel):
    """How each path's GPUs are read while it scores (`dualpath.telemetry`)."""

    enabled: bool = Field(True, description="Read the path's GPUs during the night (energy, "
                          "power, clocks, memory, PCIe link); off: no energy is measured.")
    hz: float = Field(10.0, gt=0, le=100, description="Power samples per second.")
    idle_s: float = Field(5.0, ge=0, le=600, description="Seconds of power read before the "
                          "first unit starts, with the server loaded and idle: the night's "
                          "idle floor.")
    max_samples: int = Field(2048, ge=16, le=65536, description="Most stored power samples per "
                             "path and night: a longer night's samples are merged pairwise "
                             "(each stored sample is a mean over its span), so a night stays "
                             "well under 1 MB in the warehouse.")
    sysfs: str = Field("/sys", min_length=1, description="Where the kernel's sysfs is "
                       "mounted: AMD GPUs are read under its class/drm and their PCIe link "
                       "from its PCI devices. /sys on the GPU's host; a container that "
                       "mounts the host's elsewhere names that folder.")

    def drm_root(self) -> Path | None:
        """The DRM class folder to read amdgpu cards from (None: this host's own)."""
        return None if self.sysfs.rstrip("/") in ("", "/sys") else Path(self.sysfs) / "class" / "drm"


class CostSettings(StrictModel):
    """What energy costs (optional): the headline's energy line then adds money."""

    price_per_kwh: float | None = Field(None, ge=0, description="Price of one kWh of board "
                                        "energy; unset: energy is shown in kWh only.")
    currency: str = Field("", max_length=8, description="Currency written after the price "
                          "(e.g. 'KRW', 'USD'); empty: none.")


class SimPower(StrictModel):
    """Power model of a simulated path's GPU: idle floor plus watts per busy slot."""

    idle_w: float = Field(30.0, ge=0, le=5000, description="Board watts with the model loaded "
                          "and no slot busy.")
    w_per_busy_slot: float = Field(40.0, ge=0, le=5000, description="Watts added per busy slot.")
    name: str = Field("simulated GPU", description="The model name the simulated GPU reports.")
    power_limit_w: float = Field(210.0, gt=0, le=5000, description="Its power limit (the "
                                 "modelled draw is capped there).")
    vram_total_mb: int = Field(32768, ge=1, description="Its VRAM, in MiB.")
