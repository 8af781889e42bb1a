"""vLLM 0.33 (its wheel's source, file named at each fact).

It reports its model, model path and max_model_len in /v1/models and its version in
/version, but no slot count and no applied sampling: it takes every field it is sent, so the
request is the record. It batches what it gets (no slots to pin, nothing queued by dualpath).
Its counters carry the `vllm:` prefix and a `model_name` label.
"""

from __future__ import annotations

import re
from typing import Any

from dualpath.engines.argv import Derived, flags, port_clash, to_int
from dualpath.engines.base import SentSampling
from dualpath.engines.catalog import EngineFacts
from dualpath.engines.http import get_json, read_metrics
from dualpath.records import ServerIdentity

# penalties -> temperature -> min_p -> top_k/top_p (vllm/v1/sample/sampler.py,
# Sampler.sample), in llama-server's sampler names
VLLM_ORDER = ("penalties", "temperature", "min_p", "top_k", "top_p")

FACTS = EngineFacts(
    name="vllm", label="vLLM",
    reports=frozenset({"model", "model_path_contains", "n_ctx_per_slot", "build"}),
    cannot_report={
        "slots": "vLLM reports no slot count",
        "speculative": "vLLM shows speculative decoding only as vllm:spec_decode_* "
                       "counters; pin expect.build to its system_fingerprint, whose "
                       "config hash covers it"},
    sampling_fields=("top_k", "min_p", "repetition_penalty"),
    # its presence and frequency penalties count output tokens only (apply_penalties)
    sampler_order=VLLM_ORDER, penalty_window="output",
    reasoning_field="reasoning",
    # prompt_tokens_total counts cache hits too (vllm/v1/metrics/loggers.py); its prefill
    # and decode times are per-request histograms, overlapping under batching
    counters={"prompt_tokens": "vllm:prompt_tokens_total",
              "predicted_tokens": "vllm:generation_tokens_total",
              "prompt_seconds": "vllm:request_prefill_time_seconds_sum",
              "predicted_seconds": "vllm:request_decode_time_seconds_sum",
              "cached_tokens": "vllm:prompt_tokens_cached_total"},
    prompt_counts_cached=True,
    overflow_markers=("maximum context length",),
    # speculative decoding shows only in counters, which a read with stats off lacks
    identity_unsure=frozenset({"binary_sha256", "model_sha256", "speculative"}),
    simulated=True,
    # its counters are registered unless stats logging is off (vllm/v1/metrics/loggers.py)
    metrics_fix="remove --disable-log-stats from its launch",
    context_fix="raise --max-model-len",
    recognised_by='owned_by "vllm" in /v1/models, /version or vllm:* metrics')


class Vllm(SentSampling):
    facts = FACTS

    def thinking_body(self, thinking: str) -> dict[str, Any]:
        return {"chat_template_kwargs": {"enable_thinking": thinking == "on"},
                "include_reasoning": True}

    async def recognise(self, replies) -> str | None:
        # ModelCard.owned_by = "vllm" (entrypoints/serve/engine/protocol.py); /version is
        # {"version": ...} alone (entrypoints/serve/instrumentator/basic.py)
        if why := await replies.named("vllm", "vllm:"):
            return why
        version = await replies.json("/version")
        if isinstance(version, dict) and set(version) == {"version"}:
            return f"its /version reports {version['version']!r}"
        return None

    async def read_details(self, http, base_url: str, ident: ServerIdentity,
                           model: dict) -> None:
        ident.model_path = model.get("root")
        ident.n_ctx_per_slot = model.get("max_model_len")
        version = await get_json(http, f"{base_url}/version")
        if version:
            ident.build = f"vllm-{version.get('version')}"
            ident.raw["version"] = version
        ident.speculative = speculative(await read_metrics(http, base_url))

    async def busy_slots(self, http, base_url: str) -> int | None:
        m = await read_metrics(http, base_url)
        running = (m or {}).get("vllm:num_requests_running")
        return None if running is None else int(running)

    def build_matches(self, want: str, got: str | None) -> bool:
        # /version gives `vllm-<version>`; a pinned whole system_fingerprint
        # (`vllm-0.33.0-<hash>`) matches it by its version here, then reply by reply
        return (got is not None and want.startswith(got + "-")) or want == got

    def fingerprint_pin(self, build, fingerprint):
        # `vllm-<version>[-tpN...]-<config hash>` (vllm/entrypoints/serve/utils/
        # fingerprint.py): pinned whole when the path's expect gives it, else taken from the
        # first reply that carries one, which must be of the version /version reported
        if build and fingerprint and fingerprint.startswith(build + "-"):
            return fingerprint, build
        return None, build

    def derive_launch(self, argv, env, base_url):
        return launch_identity(argv, base_url)

    def launch_warnings(self, argv: list[str]) -> list[str]:
        if "--host" not in flags(argv, {"--host"}):
            return ["the vLLM launch sets no --host, so vLLM listens on every interface: add "
                    "\"--host\", \"127.0.0.1\" (or the address you mean)"]
        return []

    def thinking_caveat(self, name: str, path) -> str | None:
        if path.launch and "--reasoning-parser" not in " ".join(path.launch):
            return (f"thinking on path {name}: its vLLM launch has no --reasoning-parser, "
                    "so the thinking arrives inline (<think>…</think>) and dualpath "
                    "splits it out; its tokens are estimated from characters, not "
                    "counted by the server")
        return None


def speculative(metrics: dict[str, float] | None) -> bool | None:
    """vLLM registers its vllm:spec_decode_* counters only when speculative decoding is on;
    None when /metrics shows no vllm: series at all (logging of stats off)."""
    if not metrics or not any(k.startswith("vllm:") for k in metrics):
        return None
    return any(k.startswith("vllm:spec_decode_") for k in metrics)


# ------------------------------------------------------------------ its launch argv
# vLLM 0.33 (`vllm/engine/arg_utils.py`, `vllm/utils/argparse_utils.py`): `/v1/models` reports
# the first `--served-model-name` (default: the model tag) with the tag as `root` and
# `--max-model-len` (`32k` = 32,000, `32K` = 32,768) as `max_model_len`.

def _human_int(text: str) -> int | None:
    """vLLM's `human_readable_int`: 1k = 1,000, 1K = 1,024, 25.6k = 25,600."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if not m:
        return to_int(text.strip())
    number, suffix = m.groups()
    mult = ({"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}.get(suffix)
            or {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix])
    return int(float(number) * mult)


_VLLM_FLAGS = {"--model", "--served-model-name", "--max-model-len", "--port",
               "--speculative-config", "--host"}


def launch_identity(argv: list[str], base_url: str | None) -> tuple[dict[str, Derived], list[str]]:
    """What `vllm serve MODEL ...` will report on /v1/models, and argv/URL contradictions."""
    found = flags(argv, _VLLM_FLAGS)
    tag = found.get("--model")
    if tag is None and "serve" in argv:
        rest = argv[argv.index("serve") + 1:]
        tag = rest[0] if rest and not rest[0].startswith("-") else None
    out: dict[str, Derived] = {}
    served = found.get("--served-model-name")
    if served:
        out["model"] = Derived(served, f"--served-model-name {served}")
    elif tag:
        out["model"] = Derived(tag, f"no --served-model-name: vLLM serves it as {tag}")
    if tag:
        out["model_path"] = Derived(tag, f"model {tag} (/v1/models root)")
    mml = found.get("--max-model-len")
    length = _human_int(mml) if mml else None
    if length and length > 0:
        out["n_ctx_per_slot"] = Derived(length, f"--max-model-len {mml} (vLLM: per request)")
    return out, port_clash(found.get("--port"), base_url)


ENGINE = Vllm()
