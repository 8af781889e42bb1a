"""The default queue depth under prefix affinity follows the launched llama-server's RAM
prompt cache: 1 with `--cache-ram 0` (nothing is copied), 0 otherwise."""
from dualpath.config_paths import ServingPath
from dualpath.engines.llama_cpp import ram_cache_off

LAUNCH = ["llama-server", "-m", "m.gguf", "-np", "4"]


def _path(**kw):
    return ServingPath(engine="llama.cpp", base_url="http://127.0.0.1:1", model="m", slots=4, **kw)


def test_ram_cache_off_reads_the_argv_and_env_as_llama_cpp_does():
    assert ram_cache_off(LAUNCH + ["--cache-ram", "0"])
    assert ram_cache_off(LAUNCH + ["-cram", "0"]) and ram_cache_off(LAUNCH + ["--cache-ram=0"])
    assert not ram_cache_off(LAUNCH) and not ram_cache_off(None)
    assert not ram_cache_off(LAUNCH + ["--cache-ram", "8192"])
    assert ram_cache_off(LAUNCH, {"LLAMA_ARG_CACHE_RAM": "0"})
    assert not ram_cache_off(LAUNCH + ["--cache-ram", "-1"], {"LLAMA_ARG_CACHE_RAM": "0"})


def test_pinned_default_is_1_on_a_cache_ram_0_server_and_0_otherwise():
    assert _path(launch=LAUNCH + ["--cache-ram", "0"]).queue_depth_for(True) == 1
    assert _path(launch=LAUNCH, launch_env={"LLAMA_ARG_CACHE_RAM": "0"}).queue_depth_for(True) == 1
    assert _path(launch=LAUNCH).queue_depth_for(True) == 0
    assert _path().queue_depth_for(True) == 0          # attached: /props does not say
    assert _path(launch=LAUNCH + ["--cache-ram", "0"], queue_depth=0).queue_depth_for(True) == 0
    assert _path(launch=LAUNCH + ["--cache-ram", "0"]).queue_depth_for(False) == 1
