"""Whose driver reads a path's GPUs. The user's host has an RTX 5090 (main, NVML) and an
R9700 (backup, amdgpu): NVML was asked first, so the backup's joules would have been read off
the 5090. A path now names its vendor, or its launch does; on a host with both and nothing
said, energy is unknown with the fix, never another card's."""

from __future__ import annotations

import pytest

from dualpath.config_paths import ServingPath
from dualpath.telemetry import readers
from dualpath.telemetry.attribution import path_vendor
from dualpath.telemetry.readers import HwmonSource, NoCounters, open_source
from tests.sysfs_trees import amd_card


def _path(**kw) -> ServingPath:
    return ServingPath(engine="llama.cpp", base_url="http://127.0.0.1:8080", model="m", **kw)


@pytest.mark.parametrize("kw, vendor", [
    ({"gpu_vendor": "amd", "launch": ["llama-server", "--device", "CUDA0"]}, "amd"),  # said
    ({"launch": ["llama-server", "--device", "ROCm0"]}, "amd"),
    ({"launch": ["llama-server"], "launch_env": {"HIP_VISIBLE_DEVICES": "0"}}, "amd"),
    ({"launch": ["vllm", "serve", "m"], "launch_env": {"CUDA_VISIBLE_DEVICES": "1"}}, "nvidia"),
    ({"launch": ["llama-server", "--device", "Vulkan0"]}, None),   # Vulkan: either vendor
    ({"launch": ["llama-server"], "launch_env": {"GGML_VK_VISIBLE_DEVICES": "0"}}, None),
    ({"launch": ["llama-server", "--device", "CUDA0"],
      "launch_env": {"HIP_VISIBLE_DEVICES": "0"}}, None),          # contradicts itself
    ({}, None)])
def test_a_paths_vendor_comes_from_its_setting_or_what_its_launch_says_for_sure(kw, vendor):
    assert path_vendor(_path(**kw)) == vendor


class _FakeNvml:
    """This host's NVIDIA card, as NVML would open it (no NVIDIA driver on the test host)."""
    kind = "nvml"
    closed = 0

    def __init__(self, indices):
        self.indices = indices

    def close(self):
        _FakeNvml.closed += 1


def test_a_host_with_both_vendors_reads_only_the_one_named(tmp_path, monkeypatch):
    amd_card(tmp_path)
    drm = tmp_path / "class" / "drm"
    monkeypatch.setattr(readers, "NvmlSource", _FakeNvml)
    with pytest.raises(NoCounters, match=r"this host has NVIDIA and AMD GPUs and nothing says "
                                         r"whose this path uses; set \[paths.X\] gpu_vendor"):
        open_source([0], None, drm_root=drm)
    assert _FakeNvml.closed == 1                 # the source opened in passing is closed
    assert isinstance(open_source([0], "amd", drm_root=drm), HwmonSource)
    assert isinstance(open_source([0], "nvidia", drm_root=drm), _FakeNvml)


def test_a_host_with_one_vendor_needs_no_setting(tmp_path):
    """No NVIDIA driver here: the R9700 alone is read; a path that names nvidia gets none."""
    amd_card(tmp_path)
    drm = tmp_path / "class" / "drm"
    assert isinstance(open_source([0], None, drm_root=drm), HwmonSource)
    with pytest.raises(NoCounters):
        open_source([0], "nvidia", drm_root=drm)
