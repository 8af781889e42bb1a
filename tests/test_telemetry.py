"""GPU telemetry: the amdgpu reader against files shaped like its sysfs, GPUs attributed from
launch argv and env, the sampler's joules, bounded samples and the changes that disturb a
run, and a host with no counters saying "energy unknown" (never 0)."""

from __future__ import annotations

import time

import pytest

from dualpath.telemetry import NoCounters, Sampler, SimSource, unknown_text
from dualpath.telemetry.attribution import gpus_from_launch, shared_gpus
from dualpath.telemetry.readers import HwmonSource, open_source
from dualpath.telemetry.settings import SimPower


def amdgpu(root, card=1, power_uw=187_000_000, energy_uj=None, cap_uw=210_000_000,
           speed="16.0 GT/s PCIe", width=16):
    """A card as amdgpu's sysfs shows it (units as the kernel writes them)."""
    dev = root / f"card{card}" / "device"
    mon = dev / "hwmon" / "hwmon3"
    mon.mkdir(parents=True)
    (dev / "uevent").write_text("DRIVER=amdgpu\nPCI_ID=1002:7551\n")
    (dev / "mem_info_vram_total").write_text(str(32 * 2**30))
    (dev / "mem_info_vram_used").write_text(str(22 * 2**30))
    (dev / "current_link_speed").write_text(speed + "\n")
    (dev / "current_link_width").write_text(f"{width}\n")
    (dev / "max_link_speed").write_text("16.0 GT/s PCIe\n")
    (dev / "max_link_width").write_text("16\n")
    (mon / "power1_average").write_text(f"{power_uw}\n")
    (mon / "power1_cap").write_text(f"{cap_uw}\n")
    (mon / "temp1_input").write_text("61000\n")
    (mon / "freq1_input").write_text("2350000000\n")
    if energy_uj is not None:
        (mon / "energy1_input").write_text(f"{energy_uj}\n")
    return dev, mon


def test_the_amdgpu_reader_reads_its_sysfs_units(tmp_path):
    dev, mon = amdgpu(tmp_path, speed="8.0 GT/s PCIe", width=4)
    src = HwmonSource(None, tmp_path)
    (info,) = src.info()
    assert (info.power_limit_w, info.vram_total_mb) == (210.0, 32768.0)     # µW, bytes
    assert (info.pcie_gen_max, info.pcie_width_max) == (4, 16)              # 16 GT/s = Gen4
    assert src.power() == (187.0, None)        # no energy1_input: sampled power only
    (st,) = src.state()
    assert (st.pcie_gen, st.pcie_width, st.temp_c, st.sm_mhz) == (3, 4, 61.0, 2350.0)
    assert st.mem_used_mb == 22 * 1024


def test_the_amdgpu_energy_counter_is_used_where_the_kernel_has_one(tmp_path):
    dev, mon = amdgpu(tmp_path, energy_uj=5_000_000)
    src = HwmonSource([0], tmp_path)
    assert src.has_energy and src.power() == (187.0, 5.0)                  # µJ -> J
    s = Sampler(src, hz=50)
    s.start()
    (mon / "energy1_input").write_text("905000000\n")                       # +900 J
    time.sleep(0.1)
    out = s.stop()
    assert out.basis == "counter" and out.joules == pytest.approx(900.0)


def test_no_counters_is_energy_unknown_with_the_reason(tmp_path):
    with pytest.raises(NoCounters) as e:
        open_source(None, drm_root=tmp_path)
    assert "no amdgpu hwmon under" in str(e.value)
    assert unknown_text("gpu-box", str(e.value)).startswith(
        "energy unknown (no GPU counters on host gpu-box: ")


@pytest.mark.parametrize("argv, env, gpus", [
    (["-m", "m.gguf", "-np", "4"], {}, None),                              # every GPU
    (["-m", "m.gguf"], {"CUDA_VISIBLE_DEVICES": "1"}, [1]),
    (["-ts", "3,0,1"], {"CUDA_VISIBLE_DEVICES": "2,3,5"}, [2, 5]),           # zero share
    (["--device", "Vulkan1"], {"GGML_VK_VISIBLE_DEVICES": "1,0"}, [0]),     # renumbered
    (["-dev", "ROCm0,ROCm1"], {"HIP_VISIBLE_DEVICES": "3,2"}, [3, 2]),
    (["-sm", "none", "-mg", "1"], {}, [1]),
    (["--tensor-parallel-size", "2"], {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}, [4, 5]),
])
def test_gpus_come_from_the_launch_argv_and_env(argv, env, gpus):
    assert gpus_from_launch(argv, env) == gpus


def test_two_paths_on_one_gpu_are_named(tmp_path):
    from types import SimpleNamespace as NS
    p = lambda **k: NS(engine="llama.cpp", launch=None, launch_env={}, **k)
    paths = {"main": p(gpus=[0]), "backup": p(gpus=[1]), "third": p(gpus=[1])}
    assert shared_gpus(paths, lambda n: "here") == {"backup": ["third"], "third": ["backup"]}
    assert shared_gpus(paths, lambda n: n) == {}       # each on its own host


def _sim(**kw):
    busy = {"n": 0}
    src = SimSource(SimPower(idle_w=30, w_per_busy_slot=40, **kw), 4, lambda: busy["n"])
    return src, busy


def test_the_simulated_gpu_draws_its_idle_floor_plus_busy_slots():
    src, busy = _sim()
    s = Sampler(src, hz=100)
    assert s.measure_idle(0.1) == pytest.approx(30.0, rel=1e-3)
    s.start()
    busy["n"] = 4
    time.sleep(0.3)
    out = s.stop()
    assert out.peak_w == 190.0 and out.basis == "counter"
    assert 0 < out.joules <= 190.0 * out.seconds + 1e-6
    assert out.changes == []


@pytest.mark.parametrize("change, expected", [
    (lambda src: setattr(src, "limit_w", 150.0),
     "power limit changed on GPU 0: 210 → 150 W"),
    (lambda src: setattr(src, "link", (4, 4)),
     "PCIe link retrained narrower on GPU 0: Gen4 x16 → Gen4 x4"),
    (lambda src: src.processes.update({4242: 2048.0}),
     "another process (pid 4242) on GPU 0, 2048 MiB"),
])
def test_a_change_mid_night_is_named(change, expected):
    src, _ = _sim()
    s = Sampler(src, hz=50, state_every_s=0.05)
    s.start()
    time.sleep(0.1)
    change(src)
    time.sleep(0.15)
    assert s.stop().changes == [expected]


def test_a_lower_link_generation_alone_is_no_change():
    """GPUs drop the link's generation at idle to save power: only a narrower link counts."""
    src, _ = _sim()
    s = Sampler(src, hz=50, state_every_s=0.05)
    s.start()
    src.link = (1, 16)
    time.sleep(0.15)
    assert s.stop().changes == []


def test_samples_stay_bounded_however_long_the_night():
    src, busy = _sim()
    s = Sampler(src, hz=10, max_samples=64)
    s.baseline, s.t0, s.t_last, s.e0, s.w_last, s.integrated = src.state(), 0.0, 0.0, 0.0, 30, 0
    t = {"now": 0.0}
    s.clock = lambda: t["now"]
    for i in range(12 * 3600 * 10):        # a 12-hour night at 10 Hz
        t["now"] = i / 10
        busy["n"] = i % 5
        s._tick()
    assert len(s.buckets) <= 64 and s.width == 1024.0
    assert sum(b[8] for b in s.buckets) == 12 * 3600 * 10      # every sample in a bucket


def _attached(**gpu):
    from dualpath.config import ServingPath

    return ServingPath(engine="llama.cpp", base_url="http://127.0.0.1:8081", model="m",
                       expect={"gpu": gpu} if gpu else {})


def _doctor_gpu(sp, root):
    from types import SimpleNamespace

    from dualpath.flows.doctor import gpu_checks
    return [(c.name, c.ok, c.note, c.detail) for c in
            gpu_checks(SimpleNamespace(paths={"backup": sp}), "backup", drm_root=root)]


def test_doctor_reads_an_amdgpu_card_and_warns_of_a_link_narrower_than_its_maximum(tmp_path):
    """A card trained x4 in a slot of x16 at idle (Gen1): the width is warned, not the
    generation; the pins hold (the generation is judged at its maximum)."""
    amdgpu(tmp_path, speed="2.5 GT/s PCIe", width=4)
    (tmp_path / "card1" / "device" / "product_name").write_text("AMD Radeon AI PRO R9700\n")
    sp = _attached(power_limit_w=210, vram_total_mb=32768)
    assert _doctor_gpu(sp, tmp_path) == [
        ("backup: GPU 0", True, True, "AMD Radeon AI PRO R9700, driver amdgpu, power limit "
         "210 W, link Gen1 x4 (max Gen4 x16), VRAM 32768 MiB"),
        ("backup: PCIe link", True, True, "warning: GPU 0: PCIe link runs x4 of its maximum "
         "x16 (width is judged: the generation drops at idle); reseat the card or move it to "
         "a full-width slot"),
        ("backup: GPU identity", True, False, "matches expect.gpu (power_limit_w = 210, "
         "vram_total_mb = 32768)")]


def test_a_pinned_cap_and_link_that_read_otherwise_are_named_with_the_values_to_write(tmp_path):
    """A 210 W cap pinned, 250 W in power1_cap; Gen4 x16 pinned, the card at x4."""
    amdgpu(tmp_path, cap_uw=250_000_000, width=4)
    checks = _doctor_gpu(_attached(power_limit_w=210, pcie="Gen4 x16"), tmp_path)
    assert checks[-1] == (
        "backup: GPU identity", False, False,
        "gpu.power_limit_w: expected 210, GPU 0 reads 250; if this GPU is the one meant, "
        "write power_limit_w = 250 under [paths.backup.expect.gpu]; gpu.pcie: expected "
        '"Gen4 x16", GPU 0 reads "Gen4 x4"; if this GPU is the one meant, write pcie = '
        '"Gen4 x4" under [paths.backup.expect.gpu]')


def test_a_path_with_no_readable_gpu_says_gpu_unknown_with_the_reason(tmp_path, monkeypatch):
    """No amdgpu card and no NVML (made so here, whatever this host has)."""
    from dualpath.telemetry import readers

    def no_nvml(indices):
        raise NoCounters("NVML could not start: NVML Shared Library Not Found")
    monkeypatch.setattr(readers, "NvmlSource", no_nvml)
    reason = (f"GPU unknown (on host {readers.host_name()}: no amdgpu hwmon under {tmp_path}; "
              "NVML could not start: NVML Shared Library Not Found)")
    assert _doctor_gpu(_attached(), tmp_path) == [("backup: GPU", True, True, reason)]
    assert _doctor_gpu(_attached(power_limit_w=210), tmp_path) == [
        ("backup: GPU", False, False, f"{reason}; pinned: power_limit_w = 210")]


def test_a_gpu_pin_is_accepted_whatever_the_engine_reports_and_dumps_as_before():
    """The GPU is read from its counters, not the engine: an 'openai' path may pin it; an
    unpinned expect dumps without a gpu key (a preregistration's hash is unchanged)."""
    from dualpath.config import ServingPath

    sp = ServingPath(engine="openai", base_url="http://127.0.0.1:8081", model="m",
                     expect={"gpu": {"pcie": "Gen4 x16"}})
    assert sp.expect.gpu.pcie == "Gen4 x16"
    assert "gpu" not in _attached().expect.model_dump(mode="json")


def test_a_card_whose_hwmon_folder_is_empty_is_no_card_not_a_crash(tmp_path):
    (tmp_path / "card0" / "device" / "hwmon").mkdir(parents=True)
    (tmp_path / "card0" / "device" / "uevent").write_text("DRIVER=amdgpu\n")
    with pytest.raises(NoCounters) as e:
        HwmonSource(None, tmp_path)
    assert str(e.value) == f"no amdgpu hwmon under {tmp_path}"


def test_check_shows_a_pin_it_cannot_read_here_as_left_to_doctor(tmp_path, monkeypatch):
    from dualpath.telemetry import readers
    from dualpath.telemetry.gpu_identity import gpu_pin_lines

    def no_nvml(indices):
        raise NoCounters("NVML could not start: NVML Shared Library Not Found")
    monkeypatch.setattr(readers, "NvmlSource", no_nvml)
    assert gpu_pin_lines("backup", _attached(pcie="Gen4 x16"), tmp_path) == [(
        f'expect.gpu: pcie = "Gen4 x16" (not readable here: no amdgpu hwmon under {tmp_path}; '
        "NVML could not start: NVML Shared Library Not Found; `dualpath doctor` checks it on "
        "the GPU's host)", False)]
    assert gpu_pin_lines("backup", _attached()) == []


def test_a_reader_that_fails_is_gpu_unknown_not_a_crash(tmp_path, monkeypatch):
    from dualpath.telemetry.readers import HwmonSource as Real

    amdgpu(tmp_path)
    monkeypatch.setattr(Real, "state", lambda self: 1 / 0)
    (name, ok, note, detail), = _doctor_gpu(_attached(), tmp_path)
    assert (name, ok, note) == ("backup: GPU", True, True)
    assert detail.endswith(": the GPU reader failed: ZeroDivisionError: division by zero)")
