"""An engine proves what it is: a path's server must answer as the path's `engine` by its own
replies (`dualpath.engines.proof`), in `check --connect`, `doctor`, `doctor --launch`'s
identity step and the night, one line naming both engines and the fix."""

from __future__ import annotations

import httpx
import pytest

from dualpath.config import SimProfile
from dualpath.engines import engine
from dualpath.engines.base import Engine
from dualpath.engines.proof import ServerReplies, answers_as, engine_mismatch
from dualpath.sim.running import serve_in_thread
from tests.cli_run import run_cli
from tests.helpers import make_project

BUILDS = {"llama.cpp": "b9251-e2b129e1b", "vllm": "vllm-0.33.0", "sglang": "sglang-0.5.23"}
# the evidence each simulated dialect gives first, as its real server gives it
SAYS = {"llama.cpp": "its /props reports build_info 'b9251-e2b129e1b'",
        "vllm": 'its /v1/models says owned_by "vllm"',
        "sglang": 'its /v1/models says owned_by "sglang"'}


@pytest.fixture(scope="module")
def servers():
    running = {d: serve_in_thread(SimProfile(dialect=d, build=b)) for d, b in BUILDS.items()}
    yield {d: s.url for d, s in running.items()}
    for s in running.values():
        s.stop()


async def test_each_wrong_pairing_is_named_with_both_engines_and_the_fix(servers):
    """Every (configured engine, server) pair of the three served engines: the right one
    passes, each wrong one is one line; `openai` takes any server."""
    async with httpx.AsyncClient() as http:
        for server, url in servers.items():
            for configured in BUILDS:
                got = await engine_mismatch(http, url, configured)
                want = None if configured == server else (
                    f"config says engine {configured}, the server answers as {server} "
                    f"({SAYS[server]}); fix engine = \"{server}\" or the url")
                assert got == want, (server, configured)
            assert await engine_mismatch(http, url, "openai") is None


def _mock(routes: dict[str, object], metrics: str = "") -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics" and metrics:
            return httpx.Response(200, text=metrics)
        if request.url.path in routes:
            return httpx.Response(200, json=routes[request.url.path])
        return httpx.Response(404, json={"detail": "Not Found"})
    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


async def test_each_engine_is_known_by_its_own_endpoints_when_owned_by_is_another():
    """Behind a proxy that rewrites owned_by (here "proxy"), each engine is still known by
    what only it serves: llama-server's /props (server-context.cpp get_res_props), vLLM's
    /version {"version"} (serve/instrumentator/basic.py), SGLang's /get_server_info
    (http_server.py), and each one's /metrics prefix."""
    models = {"data": [{"id": "m", "owned_by": "proxy"}]}
    cases = [
        ({"/props": {"build_info": "b1-x", "total_slots": 4}}, "", "llama.cpp",
         "its /props reports build_info 'b1-x'"),
        ({"/version": {"version": "0.33.0"}}, "", "vllm", "its /version reports '0.33.0'"),
        ({"/get_server_info": {"version": "0.5.23", "frontend": "python"}}, "", "sglang",
         "its /get_server_info reports version '0.5.23'"),
        ({}, "sglang:num_running_reqs 0\n", "sglang", "its /metrics names sglang:* series"),
        ({}, "llamacpp:requests_processing 0\n", "llama.cpp",
         "its /metrics names llamacpp:* series"),
        # vLLM's dev-mode /server_info is not SGLang's
        ({"/server_info": {"vllm_config": "..."}, "/version": {"version": "0.33.0"}}, "",
         "vllm", "its /version reports '0.33.0'"),
    ]
    for routes, metrics, name, why in cases:
        async with _mock({"/v1/models": models, **routes}, metrics) as http:
            assert await answers_as(ServerReplies(http, "http://x")) == (name, why)


async def test_a_server_no_engine_knows_is_refused_for_a_specific_engine_only():
    """A server that answers only OpenAI's /v1/models proves nothing: a vllm path is refused
    (naming what vLLM would have shown), an openai path takes it; a server that answers
    nothing is left to the identity read, which says it is unreachable."""
    async with _mock({"/v1/models": {"data": [{"id": "m", "owned_by": "someone"}]}}) as http:
        assert await engine_mismatch(http, "http://x", "vllm") == (
            "config says engine vllm, the server does not answer as vLLM (no owned_by "
            "\"vllm\" in /v1/models, /version or vllm:* metrics); fix engine = \"openai\" "
            "(any OpenAI-compatible server) or the url")
        assert await engine_mismatch(http, "http://x", "openai") is None
    async with _mock({}) as http:
        assert await engine_mismatch(http, "http://x", "vllm") is None


def test_an_engine_that_forgets_a_required_method_cannot_exist():
    """`recognise`, `thinking_body` and `read_details` are abstract: a subclass without
    `recognise` fails when made, not silently at a night."""
    class Forgetful(Engine):
        facts = engine("openai").facts

        def thinking_body(self, thinking):
            return {}

        async def read_details(self, http, base_url, ident, model):
            return None

    with pytest.raises(TypeError, match="recognise"):
        Forgetful()


def test_the_registry_refuses_a_module_whose_engine_is_not_its_name(monkeypatch):
    from dualpath.engines import registry

    monkeypatch.setitem(registry._MODULES, "other", "openai")   # ENGINE.facts.name "openai"
    with pytest.raises(TypeError, match="facts.name is 'other'"):
        registry.engine("other")


def _attached(tmp_path, url: str, engine_name: str):
    backup = {"engine": engine_name, "base_url": url, "model": "qwen3.6-35b-a3b", "slots": 4}
    cfg_path, _, _ = make_project(tmp_path, tickers=5, draws=1, nights=1,
                                  paths={"backup": backup})
    return cfg_path


def test_check_connect_and_nightly_refuse_an_sglang_path_on_a_llama_server(tmp_path, servers):
    cfg_path = _attached(tmp_path, servers["llama.cpp"], "sglang")
    line = ("error: path backup: config says engine sglang, the server answers as llama.cpp (its "
            "/props reports build_info 'b9251-e2b129e1b'); fix engine = \"llama.cpp\" or the "
            "url\n")
    assert "offline check" in run_cli("check", "-c", cfg_path).stdout   # offline: passes
    for args in (("check", "--connect"), ("nightly",)):
        r = run_cli(*args, "-c", cfg_path, columns=300)
        assert (r.returncode, r.stderr) == (2, line), args
    assert not list(tmp_path.rglob("journal.jsonl"))          # nothing scored


def test_check_connect_passes_the_right_engine(tmp_path, servers):
    r = run_cli("check", "--connect", "-c", _attached(tmp_path, servers["vllm"], "vllm"),
                columns=300)
    assert r.returncode == 0 and "connected: path backup's server answers as vllm; " in r.stdout
    r = run_cli("check", "--connect", "-c", _attached(tmp_path, "http://127.0.0.1:9", "vllm"),
                columns=300)
    assert r.returncode == 0 and ("connected: path backup's server does not answer at "
                                  "http://127.0.0.1:9;") in r.stdout


def test_doctor_names_the_wrong_engine_instead_of_passing_identity(tmp_path, servers):
    cfg_path = _attached(tmp_path, servers["sglang"], "vllm")
    r = run_cli("doctor", "-c", cfg_path, columns=400)
    assert r.returncode == 1
    assert ("✗ backup: engine: config says engine vllm, the server answers as sglang (its "
            "/v1/models says owned_by \"sglang\"); fix engine = \"sglang\" or the url") in r.stdout
    assert "backup: identity" not in r.stdout


async def test_the_night_refuses_a_launched_or_attached_server_of_another_engine(tmp_path,
                                                                                 servers):
    """`check_identity`, which every night (and a launched path's server) passes through."""
    from dualpath.config import load_config
    from dualpath.errors import EngineMismatch
    from dualpath.flows.runner import check_identity

    cfg = load_config(_attached(tmp_path, servers["vllm"], "llama.cpp"))
    async with httpx.AsyncClient() as http:
        with pytest.raises(EngineMismatch, match=r"^path backup: config says engine "
                           r"llama.cpp, the server answers as vllm"):
            await check_identity(cfg, "backup", http, servers["vllm"])


def test_each_serving_engine_says_how_it_is_known_and_how_its_server_is_fixed():
    """What a message about a serving engine's server needs, declared by the engine (the
    doctor and the sweep gave llama-server's -c and --metrics advice to every engine)."""
    serving = [engine(n).facts for n in ("llama.cpp", "vllm", "sglang")]
    assert [f.context_fix for f in serving] == [
        "raise -c (llama-server splits it over the -np slots)", "raise --max-model-len",
        "raise --context-length"]
    assert [f.metrics_fix for f in serving] == [
        "add --metrics to its launch", "remove --disable-log-stats from its launch",
        "add --enable-metrics to its launch"]
    assert all(f.recognised_by and not f.any_server for f in serving)


def test_a_server_that_reports_no_sampling_applies_its_own_engines_order():
    """`SentSampling.sent_sampling` records the engine's sampler order and penalty window
    from its facts: it wrote vLLM's order for any engine on that base."""
    from dataclasses import replace

    from dualpath.config import Sampling
    from dualpath.engines.base import SentSampling

    class Other(SentSampling):
        facts = replace(engine("vllm").facts, name="other", sampler_order=("top_k", "temperature"),
                        penalty_window="prompt and output")

        def thinking_body(self, thinking):
            return {}

        async def read_details(self, http, base_url, ident, model):
            return None

        async def recognise(self, replies):
            return None

    sent = Other().sent_sampling(Sampling(top_k=20, min_p=0.05))
    assert (sent["samplers"], sent["penalty_window"]) == (["top_k", "temperature"],
                                                          "prompt and output")
    assert (sent["top_k"], sent["min_p"], sent["repeat_penalty"]) == (20, 0.05, 1.0)
    assert engine("sglang").sent_sampling(Sampling())["samplers"] == \
        ["penalties", "temperature", "top_k", "top_p", "min_p"]


async def test_doctor_launch_rehearsal_stops_at_the_wrong_engine(tmp_path, servers):
    """`doctor --launch`'s identity step, on the server it launched or attached to: no
    identity pins or calls are tried on another engine's server."""
    from dualpath.config import load_config
    from dualpath.flows.dryrun import rehearse_path

    cfg = load_config(_attached(tmp_path, servers["llama.cpp"], "vllm"))
    checks = await rehearse_path(cfg, "backup", tmp_path / "logs")
    assert [(c.name, c.ok) for c in checks][-1] == ("backup: engine", False)
    assert checks[-1].detail.startswith("config says engine vllm, the server answers as "
                                        "llama.cpp (its /props reports build_info ")
    assert not any(c.name.endswith(("identity", "short call")) for c in checks)
