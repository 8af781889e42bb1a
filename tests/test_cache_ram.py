"""llama-server's RAM prompt cache under prefix affinity: `--cache-ram 0` in the launches
dualpath ships, named by `check` where a launch leaves it on, and advised by `doctor` for an
attached server whose process shows it on (/props does not say: tools/server/server-context.cpp
of llama.cpp 11434 lists no cache setting there)."""

from __future__ import annotations

import asyncio
import os
import site
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dualpath.config import ServingPath, load_config
from dualpath.engines.llama_cpp import llama_cache_ram
from dualpath.launch_args import launch_warnings

ROOT = Path(__file__).resolve().parents[1]
ARGV = ["llama-server", "-m", "/m/q.gguf", "--port", "8080", "-np", "4", "-c", "16384"]
ADVICE = ("llama-server keeps its RAM prompt cache on ({how}): with prefix affinity each "
          "unit's context stays in its slot, and the cache only copies idle slots' state to "
          "RAM on the server's main thread at every new request (with unified KV it also "
          "clears them); add \"--cache-ram\", \"0\"")


@pytest.mark.parametrize("argv, env, mib, how", [
    (ARGV, {}, 8192, "no --cache-ram: llama-server keeps 8192 MiB"),     # common/common.h
    (ARGV + ["--cache-ram", "0"], {}, 0, "--cache-ram 0"),
    (ARGV + ["-cram", "-1"], {}, -1, "-cram -1"),                         # common/arg.cpp
    (ARGV, {"LLAMA_ARG_CACHE_RAM": "0"}, 0, "LLAMA_ARG_CACHE_RAM=0"),
    (ARGV + ["--cache-ram", "512"], {"LLAMA_ARG_CACHE_RAM": "0"}, 512, "--cache-ram 512")])
def test_the_cache_size_a_launch_gives(argv, env, mib, how):
    got = llama_cache_ram(argv, env)
    assert (got.value, got.how) == (mib, how)


def test_a_launch_that_keeps_the_cache_is_named_only_when_units_are_pinned():
    sp = ServingPath(engine="llama.cpp", base_url="http://127.0.0.1:8080", model="q", launch=ARGV)
    assert launch_warnings(sp) == [ADVICE.format(how="no --cache-ram: llama-server keeps "
                                                     "8192 MiB")]
    assert launch_warnings(sp, prefix_affinity=False) == []
    off = sp.model_copy(update={"launch": ARGV + ["--cache-ram", "0"]})
    assert launch_warnings(off) == []


def test_the_shipped_llama_launches_turn_the_cache_off():
    for name in ("deploy/dualpath.example.toml", "dualpath/example.toml",
                 "deploy/local-llama.toml"):
        cfg = load_config(ROOT / name)
        for sp in cfg.paths.values():
            if sp.engine == "llama.cpp" and sp.launch:
                assert llama_cache_ram(sp.launch, dict(sp.launch_env)).value == 0, name


def test_check_shows_the_cache_warning_for_a_launch_that_keeps_it(tmp_path):
    text = (ROOT / "deploy" / "dualpath.example.toml").read_text()
    # the launches' model files must exist (`check` refuses a missing one)
    (tmp_path / "qwen3.6-27b").mkdir()
    (tmp_path / "Qwen3.6-35B-A3B-Q4_K_M.gguf").write_bytes(b"GGUF")
    cfg = tmp_path / "dualpath.toml"
    cfg.write_text(text.replace('"--slots", "--cache-ram", "0"]', '"--slots"]')
                   .replace("/models/", f"{tmp_path}/"))
    r = subprocess.run([sys.executable, "-m", "dualpath", "check", "-c", str(cfg)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "warning: " + ADVICE.format(how="no --cache-ram: llama-server keeps 8192 MiB") in out


def _attached(tmp_path, env: dict[str, str]):
    """A stand-in llama-server (the simulated one, its argv[0] named as the real binary's),
    and a config whose backup path attaches to it."""
    from tests.helpers import make_project

    cfg_path = make_project(tmp_path, tickers=2, draws=1, nights=1)[0]
    ready = tmp_path / "out.txt"
    # named llama-server, Python finds no venv from its argv[0]: its packages on the path
    paths = os.pathsep.join([str(ROOT), *site.getsitepackages()])
    proc = subprocess.Popen(["bash", "-c", f"exec -a llama-server {sys.executable} -m "
                             "dualpath.sim --slots 2 --profile '{\"time_scale\": 0.0001}' "
                             f"> {ready}"], env={**os.environ, **env, "PYTHONPATH": paths},
                            cwd=ROOT)
    for _ in range(300):
        if "listening on" in (ready.read_text() if ready.exists() else ""):
            break
        time.sleep(0.1)
    url = ready.read_text().split("listening on ")[1].strip()
    text = cfg_path.read_text()
    backup = text[text.index("[paths.backup]"):text.index("[warehouse]")]
    cfg_path.write_text(text.replace(backup, f'[paths.backup]\nengine = "llama.cpp"\n'
                                     f'base_url = "{url}"\nmodel = "x"\n\n'))
    return proc, load_config(cfg_path)


@pytest.mark.parametrize("env, advised", [({}, True), ({"LLAMA_ARG_CACHE_RAM": "0"}, False)])
def test_doctor_advises_it_for_an_attached_server_that_keeps_the_cache(tmp_path, env, advised):
    from dualpath.flows.doctor import _path_checks

    proc, cfg = _attached(tmp_path, env)
    try:
        checks = asyncio.run(_path_checks(cfg, "backup", None))
    finally:
        proc.terminate()
        proc.wait(10)
    # the GPU notes (what this host's GPU reads) are another check's
    notes = [(c.name, c.detail) for c in checks if c.note and not c.name.endswith(": GPU")]
    want = [("backup: slots pinned", ADVICE.format(how="no --cache-ram: llama-server keeps "
                                                       "8192 MiB"))]
    assert notes == (want if advised else [])
