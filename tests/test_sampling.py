"""Sampling the same in effect: what each engine is sent, what each reports applying, and the
one difference that cannot be closed, named wherever runs are compared."""

from __future__ import annotations

import orjson

from dualpath.config import Sampling, load_config
from dualpath.sampling import (VLLM_ORDER, applied_differences, applied_from_request,
                               config_differences, declared_differences, sampling_body)
from dualpath.sim.fleet import SimFleet
from dualpath.flows.report import run_warnings
from tests.helpers import ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader


def test_llama_server_is_sent_vllms_sampler_order_and_nothing_vllm_lacks():
    b = sampling_body("llama.cpp", Sampling(), 5)
    # temperature before min-p/top-k/top-p, as vLLM's sampler applies it; no dry, xtc,
    # typical-p or top-n-sigma (vLLM has none); mirostat and dynamic temperature off
    assert b["samplers"] == ["penalties", "temperature", "min_p", "top_k", "top_p"]
    assert (b["mirostat"], b["dynatemp_range"], b["repeat_penalty"]) == (0, 0.0, 1.0)
    assert b["repeat_last_n"] == b["max_tokens"] == 4096
    assert b["chat_template_kwargs"] == {"enable_thinking": False}
    assert b["reasoning_format"] == "deepseek" and b["seed"] == 5


def test_vllm_is_sent_the_same_values_under_its_names():
    llama, vllm = (sampling_body(d, Sampling(thinking="on"), 5) for d in ("llama.cpp", "vllm"))
    for k in ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
              "max_tokens", "seed", "chat_template_kwargs"):
        assert llama[k] == vllm[k], k
    assert vllm["repetition_penalty"] == 1.0 and vllm["include_reasoning"] is True
    assert "samplers" not in vllm and "repeat_last_n" not in vllm
    assert "chat_template_kwargs" not in sampling_body("openai", Sampling(), None)


def test_the_prompt_in_llama_servers_penalty_window_is_a_declared_difference():
    both = ["vllm", "llama.cpp"]
    [d] = declared_differences(Sampling(presence_penalty=1.5), both)
    assert d.startswith("presence_penalty 1.5: llama-server's penalty window")
    assert "vLLM penalises output tokens only" in d and "presence_penalty = 0" in d
    assert declared_differences(Sampling(presence_penalty=0.0), both) == []
    assert declared_differences(Sampling(), ["llama.cpp", "llama.cpp"]) == []


def test_applied_sampling_compares_the_chain_order_too():
    vllm = applied_from_request(sampling_body("vllm", Sampling(), None))
    llama = {"temperature": 0.699999988079071, "top_p": 0.800000011920929, "top_k": 20,
             "min_p": 0.0, "presence_penalty": 1.5, "frequency_penalty": 0.0,
             "repeat_penalty": 1.0, "repeat_last_n": 4096, "samplers": list(VLLM_ORDER)}
    assert applied_differences(llama, vllm) == []
    default_chain = {**llama, "samplers": ["penalties", "top_k", "top_p", "min_p", "temperature"]}
    assert applied_differences(default_chain, vllm) == [
        "sampler order: penalties, top_k, top_p, min_p, temperature vs "
        "penalties, temperature, min_p, top_k, top_p"]


def test_the_shipped_example_samples_alike_and_says_why():
    from tests.test_config import EXAMPLE

    cfg = load_config(EXAMPLE)
    assert cfg.sampling.presence_penalty == 0.0 and cfg.sampling.thinking == "off"
    assert config_differences(cfg) == []
    text = EXAMPLE.read_text()
    assert "no llama-server setting keeps the prompt out" in text


def test_a_night_records_what_both_paths_applied_and_compares_them(tmp_path):
    """The simulated pair (main: vLLM dialect, backup: llama-server) scores a night: the
    vLLM path's applied sampling is recorded from its requests, llama-server's read back
    from /slots, and the two compare equal; the penalty window is named as declared."""
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        applied = dict(con.execute("SELECT path, effective_sampling_json FROM server_sessions")
                       .fetchall())
        warnings = run_warnings(con)
        sent = [orjson.loads(r[0]) for r in con.execute(
            "SELECT t.text FROM calls c JOIN texts t ON t.hash = c.request_hash "
            "WHERE c.path = 'backup' LIMIT 1").fetchall()]
    main, backup = orjson.loads(applied["main"]), orjson.loads(applied["backup"])
    assert main["samplers"] == backup["samplers"] == list(VLLM_ORDER)
    assert main["penalty_window"] == "output" and backup["repeat_last_n"] == 4096
    assert applied_differences(main, backup) == []
    assert not any("sampled differently" in w for w in warnings)
    assert sent[0]["samplers"] == list(VLLM_ORDER)
    [declared] = config_differences(cfg)           # the demo keeps presence_penalty 1.5
    assert declared.startswith("presence_penalty 1.5")


def test_check_runs_and_the_drafted_plan_name_the_declared_difference(tmp_path):
    """The demo config keeps presence_penalty 1.5: `check`, `runs` and `prereg draft` each
    name what that does differently on the two engines."""
    from tests.cli_run import run_cli as dualpath      # in process: the same output

    cfg_path, cfg, nights = make_project(tmp_path, tickers=5, draws=1, nights=1)
    [declared] = config_differences(cfg)
    check = dualpath("check", "-c", str(cfg_path))
    assert check.returncode == 0
    flat = " ".join((check.stdout + check.stderr).split())
    assert "thinking: off (the same on every path)" in flat
    assert f"declared difference: {declared}" in flat
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    runs = dualpath("runs", "-c", str(cfg_path))
    assert runs.returncode == 0 and "declared difference: presence_penalty 1.5" in " ".join(
        (runs.stdout + runs.stderr).split())
    plan = tmp_path / "plan.toml"
    draft = dualpath("prereg", "draft", str(plan), "-c", str(cfg_path), "--first-night",
                     nights[0].isoformat(), "--nights", "10")
    assert draft.returncode == 0, draft.stderr
    assert f"# declared difference: {declared}\n" in plan.read_text()
    from dualpath.prereg import load_plan
    assert load_plan(plan).experiment == cfg.experiment.name     # the comments are only that


def test_engines_with_different_fixed_sampler_orders_are_declared(monkeypatch):
    """An engine whose order cannot be set apart from another's (min-p before or after
    top-p) is a declared difference where both samplers act; none where one is off."""
    from dataclasses import replace

    from dualpath.engines import registry
    from dualpath.engines.openai import OpenAI

    other = OpenAI()
    other.facts = replace(other.facts, name="other", label="Other",
                          sampler_order=("penalties", "temperature", "top_k", "top_p", "min_p"))
    monkeypatch.setitem(registry._MODULES, "other", "openai")
    monkeypatch.setitem(registry._LOADED, "other", other)
    s = Sampling(min_p=0.05, top_p=0.95, presence_penalty=0.0)
    [d] = declared_differences(s, ["vllm", "other"])
    assert d == ("sampler order with min_p 0.05 and top_p 0.95: vLLM: penalties, temperature, "
                 "min_p, top_k, top_p; Other: penalties, temperature, top_k, top_p, min_p; the "
                 "engines cannot be told each other's order, so they sample from different "
                 "distributions; min_p = 0 or top_p = 1 makes both sample alike")
    assert declared_differences(Sampling(min_p=0.0, top_p=0.95), ["vllm", "other"]) == []
    assert declared_differences(s, ["vllm", "llama.cpp"]) == []     # llama.cpp sends vLLM's
