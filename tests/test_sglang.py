"""SGLang as one engine module (`dualpath.engines.sglang`) and a simulated dialect
(`dualpath.sim.sglang`). Every fixture is taken from the sglang 0.5.23 wheel's source
(`pip download --no-deps sglang==0.5.23`), the file named at each (paths under sglang/srt/)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.engines import counter_names, engine
from dualpath.launch_args import identity_plan, launch_warnings, pin_disagreements
from dualpath.replay import probe
from dualpath.retry import status_fault
from dualpath.sampling import config_differences, declared_differences, sampling_body
from tests.cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "deploy" / "dualpath.example.toml"
SGL = engine("sglang")
LAUNCH = ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-8B",
          "--served-model-name", "qwen3-8b", "--context-length", "32768", "--host",
          "127.0.0.1", "--port", "30001", "--enable-metrics", "--reasoning-parser", "qwen3"]


def path(**kw) -> ServingPath:
    base = dict(engine="sglang", base_url="http://127.0.0.1:30001", model="qwen3-8b",
                launch=LAUNCH)
    return ServingPath(**{**base, **kw})


def test_the_request_uses_sglangs_own_field_names():
    """entrypoints/openai/protocol.py, ChatCompletionRequest: top_k, min_p and
    repetition_penalty are SRT extras (unsent: the model's generation_config decides,
    to_sampling_params); separate_reasoning and chat_template_kwargs steer the thinking;
    a JSON schema goes in response_format (no llama.cpp json_schema, no id_slot)."""
    body = sampling_body("sglang", Sampling(top_k=20, min_p=0.05, thinking="off"), 3)
    assert {k: body[k] for k in ("top_k", "min_p", "repetition_penalty", "seed")} == \
        {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.0, "seed": 3}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["separate_reasoning"] is True
    assert not {"samplers", "repeat_last_n", "reasoning_format", "include_reasoning"} & set(body)
    client = PathClient("p", path(), Sampling(), None, "r")
    req = ChatRequest("a", [], "T", 1, 1, 1, json_schema={"type": "object"}, id_slot=2)
    sent = client.body(req)
    assert sent["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert "id_slot" not in sent and "json_schema" not in sent


def test_a_config_pins_only_what_sglang_reports():
    """/v1/models (id, max_model_len), /model_info (model_path) and /server_info (version,
    speculative_algorithm) in entrypoints/http_server.py; no slot count anywhere."""
    assert path(expect={"model": "qwen3-8b", "n_ctx_per_slot": 32768, "build": "sglang-0.5.23",
                        "speculative": False, "model_path_contains": "Qwen3"}).expect.build
    with pytest.raises(ValueError, match=r"expect.slots \(SGLang reports no slot count"):
        path(expect={"slots": 4})
    sim = ServingPath(engine="sim", model="m", sim={"dialect": "sglang"})
    assert sim.dialect == "sglang" and sim.server_queue_depth == 0
    assert not sim.pins_slots(True)          # it batches: nothing to pin a unit to


def test_check_derives_the_pins_from_the_sglang_argv():
    """Flag names of arg_groups/fields/ (model.py --model-path, alias --model; serving.py
    --served-model-name, --port default 30000; spec.py --speculative-algorithm)."""
    sp = path(expect={"model": "qwen3-8b", "n_ctx_per_slot": 32768, "speculative": False})
    assert pin_disagreements(sp) == []
    assert identity_plan(sp) == [
        "expect (sglang reports every pin): model=\"qwen3-8b\" (launch: --served-model-name "
        "qwen3-8b), n_ctx_per_slot=32768 (launch: --context-length 32768 (per request)), "
        "speculative=false (launch: no --speculative-algorithm)"]
    wrong = path(expect={"n_ctx_per_slot": 16384, "speculative": True})
    assert pin_disagreements(wrong) == [
        "expect.n_ctx_per_slot = 16384, but the launch gives 32768: write n_ctx_per_slot = "
        "32768 (--context-length 32768 (per request))",
        "expect.speculative = true, but the launch gives false: write speculative = false "
        "(no --speculative-algorithm)"]
    default_port = [a for a in LAUNCH if a not in ("--port", "30001")]
    assert pin_disagreements(path(launch=default_port)) == [
        "the launch argv listens on --port 30000 but base_url is http://127.0.0.1:30001: "
        "make them the same port"]
    assert launch_warnings(path()) == []
    [warn] = launch_warnings(path(launch=[a for a in LAUNCH if a != "--enable-metrics"]))
    assert "no --enable-metrics" in warn


def test_dualpath_check_shows_an_sglang_path(tmp_path):
    # the backup's launch model file must exist (`check` refuses a missing one)
    (tmp_path / "Qwen3.6-35B-A3B-Q4_K_M.gguf").write_bytes(b"GGUF")
    text = EXAMPLE.read_text().replace("/models/", f"{tmp_path}/")
    main = text[text.index("[paths.main]"):text.index("[paths.backup]")]
    cfg = tmp_path / "dualpath.toml"
    cfg.write_text(text.replace(main, "[paths.main]\nengine = \"sglang\"\n"
                                "base_url = \"http://127.0.0.1:30001\"\nmodel = \"qwen3-8b\"\n"
                                f"launch = {LAUNCH!r}\n".replace("'", '"')
                                + "[paths.main.expect]\nmodel = \"qwen3-8b\"\n"
                                "n_ctx_per_slot = 32768\n\n"))
    r = run_cli("check", "-c", cfg)
    assert r.returncode == 0, r.stdout + r.stderr
    out = " ".join(r.stdout.split())
    assert ("expect (sglang reports every pin): model=\"qwen3-8b\" (launch: "
            "--served-model-name qwen3-8b), n_ctx_per_slot=32768") in out


async def test_identity_busy_requests_and_counters_from_the_simulated_sglang(sim_server):
    srv = sim_server(dialect="sglang", model_alias="qwen3-8b", build="sglang-0.5.23",
                     n_ctx=32768, speculative=True, context_tokens=0)
    async with httpx.AsyncClient() as http:
        ident = await SGL.read_identity(http, srv.url)
        before = await engine("sglang").read_identity(http, srv.url)
        from dualpath.identity import read_metrics
        m0 = await read_metrics(http, srv.url)
        client = PathClient("p", path(base_url=srv.url, model="any-name"),
                            Sampling(thinking="on"), http, "r")
        rec = await client.chat(ChatRequest("a", [{"role": "user", "content": "x" * 400}],
                                            "T", 1, 1, 1, seed=1))
        m1 = await read_metrics(http, srv.url)
        busy = await SGL.busy_slots(http, srv.url)
        assert (await http.get(f"{srv.url}/version")).status_code == 404
    assert (ident.engine, ident.model, ident.model_path, ident.n_ctx_per_slot, ident.build,
            ident.speculative, ident.slots) == \
        ("sglang", "qwen3-8b", "/models/qwen3-8b", 32768, "sglang-0.5.23", True, None)
    assert before.build == ident.build
    assert rec.ok and rec.system_fingerprint is None and rec.response_model == "qwen3-8b"
    deltas = SGL.counter_deltas(m0, m1)
    assert deltas["predicted_tokens"] == rec.completion_tokens
    assert deltas["prompt_tokens"] == rec.prompt_tokens - (rec.cached_tokens or 0)
    assert busy == 0


async def test_thinking_arrives_apart_in_reasoning_content(sim_server):
    """ChatMessage / DeltaMessage.reasoning_content (entrypoints/openai/protocol.py)."""
    srv = sim_server(dialect="sglang", model_alias="q", build="sglang-0.5.23", thinks=True,
                     context_tokens=0)
    async with httpx.AsyncClient() as http:
        for stream in (False, True):
            r = await http.post(f"{srv.url}/v1/chat/completions", json={
                "model": "q", "stream": stream, "messages": [{"role": "user", "content": "hi"}],
                **sampling_body("sglang", Sampling(thinking="on"), 1)})
            text = r.text
            assert '"reasoning_content"' in text and '"reasoning":' not in text
            assert "system_fingerprint" not in text


async def test_the_older_get_endpoints_are_read_where_the_new_ones_are_absent():
    """/get_model_info and /get_server_info: the deprecated names (http_server.py)."""
    answers = {"/v1/models": {"data": [{"id": "q", "max_model_len": 8192}]},
               "/get_model_info": {"model_path": "/m/q"},
               "/get_server_info": {"version": "0.4.9", "speculative_algorithm": None}}

    def handler(request):
        got = answers.get(request.url.path)
        return httpx.Response(200, json=got) if got else httpx.Response(404, json={})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        ident = await SGL.read_identity(http, "http://s")
    assert (ident.model_path, ident.build, ident.speculative) == ("/m/q", "sglang-0.4.9", False)


def test_a_prompt_over_the_context_is_a_context_overflow():
    """managers/tokenizer_manager.py (_validate_one_request) raises ValueError, answered by
    serving_base.py's create_error_response as an ErrorResponse with status 400."""
    body = ('{"object": "error", "message": "The input (40000 tokens) is longer than the '
            "model's context length (32768 tokens).\", \"type\": \"BadRequest\", "
            '"param": null, "code": 400}')
    f = status_fault(400, body, {})
    assert (f.kind, f.transient) == ("context_overflow", False)
    assert "longer than the model's context length" in f.detail


async def test_the_verify_probe_runs_on_sglang(sim_server):
    srv = sim_server(dialect="sglang", model_alias="q", build="sglang-0.5.23", context_tokens=0,
                     time_scale=1e-3)
    async with httpx.AsyncClient() as http:
        pr = await probe(http, srv.url, "sglang", "q", 200, 16, time_scale=1e-3)
    assert pr.error is None and pr.prefill_tps and pr.decode_tps


def test_warehouse_and_sweep_counters_include_sglangs():
    """observability/metrics_collector.py: sglang:prompt_tokens_total counts every prompt
    token of a finished request (the tokenizer manager passes its prompt_tokens), cache hits
    included; sglang:cached_tokens_total holds the hits."""
    assert "sglang:prompt_tokens_total" in counter_names("prompt_tokens")
    assert "sglang:generation_tokens_total" in counter_names("predicted_tokens")
    before = {"sglang:prompt_tokens_total": 0.0, "sglang:generation_tokens_total": 0.0,
              "sglang:cached_tokens_total": 0.0}
    after = {"sglang:prompt_tokens_total": 1000.0, "sglang:generation_tokens_total": 300.0,
             "sglang:cached_tokens_total": 600.0}
    from dualpath.flows.sweep import counter_deltas
    assert counter_deltas(before, after, "sglang") == {"prompt_tokens": 400.0,
                                                       "predicted_tokens": 300.0}


def test_sglangs_sampler_order_and_a_missing_reasoning_parser_are_declared():
    """layers/sampler.py: temperature, then top-k, top-p, min-p renormalised in turn."""
    [order] = declared_differences(Sampling(min_p=0.05, top_p=0.95, presence_penalty=0.0),
                                   ["vllm", "sglang"])
    assert re.search(r"vLLM: penalties, temperature, min_p, top_k, top_p; SGLang: "
                     r"penalties, temperature, top_k, top_p, min_p", order)

    class Cfg:
        sampling = Sampling(thinking="on", presence_penalty=0.0, min_p=0.0)
        paths = {"main": path(launch=LAUNCH[:-2])}
    [caveat] = config_differences(Cfg)
    assert caveat.startswith("thinking on path main: its SGLang launch has no "
                             "--reasoning-parser")


def test_doctor_launch_rehearses_a_night_on_a_launched_sglang_path(tmp_path):
    """The main path an SGLang server (the simulated dialect, launched by its argv as a real
    one would be): launched, identity matched (build from /server_info), both calls made,
    its sampling named as sent since SGLang reports none."""
    import json
    import socket

    from tests.helpers import make_project

    cfg_path = make_project(tmp_path, tickers=2, draws=1, nights=1)[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    profile = json.dumps({"dialect": "sglang", "model_alias": "qwen3-8b",
                          "build": "sglang-0.5.23", "time_scale": 1e-4, "context_tokens": 0})
    launch = [sys.executable, "-m", "dualpath.sim", "--host", "127.0.0.1", "--port", str(port),
              "--slots", "2", "--profile", profile]
    text = cfg_path.read_text()
    main = text[text.index("[paths.main]"):text.index("[paths.backup]")]
    cfg_path.write_text(text.replace(main, (
        f'[paths.main]\nengine = "sglang"\nmodel = "qwen3-8b"\nslots = 2\n'
        f'base_url = "http://127.0.0.1:{port}"\nlaunch = {json.dumps(launch)}\n'
        '[paths.main.expect]\nmodel = "qwen3-8b"\nbuild = "sglang-0.5.23"\n'
        'speculative = false\n\n')))
    r = subprocess.run([sys.executable, "-m", "dualpath", "doctor", "--launch", "-c",
                        str(cfg_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"✓ main: server: launched at http://127.0.0.1:{port}" in r.stdout
    assert ("✓ main: identity: matches expect (model qwen3-8b, build sglang-0.5.23, slots not "
            "reported, n_ctx_per_slot 131072)") in r.stdout
    assert "✓ main: sampling applied: sglang does not report the sampling it applied; sent " \
        "temperature=0.7" in r.stdout
    assert "✓ main: grade call: grade" in r.stdout and "10 of 10 checks passed" in r.stdout


# entrypoints/openai/protocol.py ModelCard (no permission list, owned_by "sglang");
# http_server.py available_models: root is the served name, max_model_len the context
SGLANG_CARD_KEYS = {"id", "object", "created", "owned_by", "root", "parent", "max_model_len"}


def test_models_say_sglang_and_there_is_no_version_endpoint(sim_server):
    """What tells SGLang from vLLM (`dualpath.engines.proof`): the simulated SGLang had
    answered /v1/models as vLLM does (owned_by "vllm")."""
    url = sim_server(dialect="sglang", build="sglang-0.5.23", model_alias="qwen3-8b").url
    card, = httpx.get(f"{url}/v1/models").json()["data"]
    assert set(card) == SGLANG_CARD_KEYS
    assert (card["owned_by"], card["root"]) == ("sglang", "qwen3-8b")
    assert httpx.get(f"{url}/version").status_code == 404
    assert httpx.get(f"{url}/server_info").json()["version"] == "0.5.23"
