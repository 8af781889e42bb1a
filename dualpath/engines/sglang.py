"""SGLang 0.5.23 (its wheel's source, the file named at each fact; paths under sglang/srt/).

Its OpenAI-compatible server (`entrypoints/http_server.py`) reports the served model and its
context length in /v1/models (`id`, `max_model_len`), the model path in /model_info and the
version and resolved launch settings (`speculative_algorithm`) in /server_info; the older
/get_model_info and /get_server_info answer the same (deprecated aliases). It reports no
slots and no applied sampling, and batches what it gets. /metrics (`sglang:` names, only with
--enable-metrics, `observability/metrics_collector.py`): `prompt_tokens_total` counts every
prompt token of a finished request, cache hits included (`cached_tokens_total` holds them,
one series per cache source). Its replies carry no `system_fingerprint`.
"""

from __future__ import annotations

from typing import Any

from dualpath.engines.argv import Derived, flags, port_clash
from dualpath.engines.base import SentSampling
from dualpath.engines.catalog import EngineFacts
from dualpath.engines.http import get_json, read_metrics
from dualpath.records import ServerIdentity

# penalties (a logits processor) -> temperature -> top_k -> top_p -> min_p
# (layers/sampler.py, Sampler.forward: top_k_renorm_prob, top_p_renorm_prob,
# min_p_sampling_from_probs), in llama-server's sampler names
SGLANG_ORDER = ("penalties", "temperature", "top_k", "top_p", "min_p")

FACTS = EngineFacts(
    name="sglang", label="SGLang",
    reports=frozenset({"model", "model_path_contains", "n_ctx_per_slot", "build",
                       "speculative"}),
    cannot_report={"slots": "SGLang reports no slot count (max_running_requests is a cap "
                            "on its batch)"},
    # SRT extras of ChatCompletionRequest (entrypoints/openai/protocol.py); unsent, top_k,
    # min_p and repetition_penalty come from the model's generation_config
    # (to_sampling_params: user value > generation_config > defaults)
    sampling_fields=("top_k", "min_p", "repetition_penalty"),
    sampler_order=SGLANG_ORDER,
    # presence/frequency penalties count output tokens (sampling/penaltylib/
    # presence_penalty.py, _cumulate_output_tokens)
    penalty_window="output",
    reasoning_field="reasoning_content",       # ChatMessage / DeltaMessage
    counters={"prompt_tokens": "sglang:prompt_tokens_total",
              "predicted_tokens": "sglang:generation_tokens_total",
              "cached_tokens": "sglang:cached_tokens_total"},
    prompt_counts_cached=True,
    # managers/tokenizer_manager.py, _validate_one_request, answered as a 400
    overflow_markers=("longer than the model's context length",
                      "exceeds the model's maximum context length"),
    identity_unsure=frozenset({"binary_sha256", "model_sha256"}),
    simulated=True,
    metrics_fix="add --enable-metrics to its launch",
    context_fix="raise --context-length",
    recognised_by='owned_by "sglang" in /v1/models, /server_info version or sglang:* metrics')


class SGLang(SentSampling):
    facts = FACTS

    def thinking_body(self, thinking: str) -> dict[str, Any]:
        # the thinking apart in reasoning_content (with a --reasoning-parser), streamed too
        return {"chat_template_kwargs": {"enable_thinking": thinking == "on"},
                "separate_reasoning": True}

    def probe_body(self) -> dict[str, Any]:
        return {"ignore_eos": True}            # ChatCompletionRequest.ignore_eos

    async def recognise(self, replies) -> str | None:
        # ModelCard.owned_by = "sglang" (entrypoints/openai/protocol.py); /server_info (or
        # its /get_ alias) carries "version" (entrypoints/http_server.py); vLLM's own
        # /server_info (dev mode) carries vllm_config instead
        if why := await replies.named("sglang", "sglang:"):
            return why
        for endpoint in ("/server_info", "/get_server_info"):
            info = await replies.json(endpoint)
            if isinstance(info, dict) and "version" in info and "vllm_config" not in info:
                return f"its {endpoint} reports version {info['version']!r}"
        return None

    async def read_details(self, http, base_url: str, ident: ServerIdentity,
                           model: dict) -> None:
        ident.n_ctx_per_slot = model.get("max_model_len")
        info = await _either(http, base_url, "model_info") or {}
        ident.model_path = info.get("model_path")
        server = await _either(http, base_url, "server_info") or {}
        ident.raw.update(model_info=info, server_info=server)
        if server.get("version"):
            ident.build = f"sglang-{server['version']}"
        if "speculative_algorithm" in server:
            ident.speculative = server["speculative_algorithm"] is not None

    async def busy_slots(self, http, base_url: str) -> int | None:
        running = (await read_metrics(http, base_url) or {}).get("sglang:num_running_reqs")
        return None if running is None else int(running)

    def derive_launch(self, argv, env, base_url):
        found = flags(argv, {"--model-path", "--model", "--served-model-name",
                              "--context-length", "--port", "--speculative-algorithm"})
        out: dict[str, Derived] = {}
        path = found.get("--model-path") or found.get("--model")
        served = found.get("--served-model-name")
        if served or path:
            out["model"] = Derived(served or path, f"--served-model-name {served}" if served
                                   else f"no --served-model-name: SGLang serves it as {path}")
        if path:
            out["model_path"] = Derived(path, f"--model-path {path} (/model_info)")
        if (n := found.get("--context-length")) and n.isdigit():
            out["n_ctx_per_slot"] = Derived(int(n), f"--context-length {n} (per request)")
        algo = found.get("--speculative-algorithm")
        out["speculative"] = Derived(algo is not None, f"--speculative-algorithm {algo}" if algo
                                     else "no --speculative-algorithm")
        # SGLang listens on 30000 unless told (arg_groups/fields/serving.py)
        return out, port_clash(found.get("--port") or "30000", base_url)

    def launch_warnings(self, argv: list[str]) -> list[str]:
        if "--enable-metrics" not in argv:
            return ["the SGLang launch has no --enable-metrics, so /metrics is off: no server "
                    "counters (prefill, decode, cache hits) and no load watch; add "
                    "\"--enable-metrics\""]
        return []

    def thinking_caveat(self, name: str, path) -> str | None:
        if path.launch and "--reasoning-parser" not in " ".join(path.launch):
            return (f"thinking on path {name}: its SGLang launch has no --reasoning-parser, "
                    "so the thinking arrives inline (<think>…</think>) and dualpath "
                    "splits it out; its tokens are estimated from characters, not "
                    "counted by the server")
        return None


async def _either(http, base_url: str, name: str) -> dict | None:
    """/<name>, else the older /get_<name> (the same handler, kept as a deprecated alias)."""
    got = await get_json(http, f"{base_url}/{name}")
    return got if got is not None else await get_json(http, f"{base_url}/get_{name}")


ENGINE = SGLang()
