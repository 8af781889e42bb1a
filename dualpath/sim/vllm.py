"""What the simulated server says where vLLM 0.33 says it differently from llama-server: its
`system_fingerprint`, its /metrics counters and its per-request `metrics` (each written from
the vllm 0.33.0 wheel's source, file named at each)."""

from __future__ import annotations

import hashlib

from dualpath.config import SimProfile


def fingerprint(profile: SimProfile) -> str:
    """`vllm-<version>-<8 hex of its config hash>` (vllm/entrypoints/serve/utils/
    fingerprint.py, mode 'full', no parallelism): the hash changes with the model and config."""
    config = f"{profile.model_alias}|{profile.n_ctx}|{profile.speculative}"
    return (f"vllm-{profile.build.removeprefix('vllm-')}-"
            f"{hashlib.sha256(config.encode()).hexdigest()[:8]}")


def metrics_text(c, profile: SimProfile) -> str:
    """/metrics (vllm/v1/metrics/loggers.py): `prompt_tokens_total` counts every prompt token,
    cache hits included, `prompt_tokens_cached_total` the hits; `spec_decode_*` exist only
    with a speculative config (vllm/v1/spec_decode/metrics.py). `c`: the server's counters."""
    label = f'{{model_name="{profile.model_alias}"}}'
    rows = [("num_requests_running", "gauge", c.processing),
            ("num_requests_waiting", "gauge", c.deferred),
            ("prompt_tokens_total", "counter", c.prompt_tokens + c.cached_tokens),
            ("prompt_tokens_cached_total", "counter", c.cached_tokens),
            ("generation_tokens_total", "counter", c.predicted_tokens),
            ("request_success_total", "counter", c.requests),
            # histogram sums, as vLLM exports them (the _count series are left out)
            ("request_prefill_time_seconds_sum", "counter", round(c.prompt_seconds, 6)),
            ("request_decode_time_seconds_sum", "counter", round(c.predicted_seconds, 6))]
    if profile.speculative:
        rows += [("spec_decode_num_drafts_total", "counter", 0),
                 ("spec_decode_num_draft_tokens_total", "counter", 0),
                 ("spec_decode_num_accepted_tokens_total", "counter", 0)]
    out = []
    for name, kind, value in rows:
        out += [f"# TYPE vllm:{name} {kind}", f"vllm:{name}{label} {float(value)}"]
    return "\n".join(out) + "\n"


def request_metrics(profile: SimProfile, queued_s: float, t_prefill: float, t_decode: float,
                    n_out: int) -> dict | None:
    """A response's `metrics` (PerRequestMetrics, build_per_request_timing_metrics in
    vllm/entrypoints/generate/base/serving.py) in modelled ms; None unless the profile enables
    it (--enable-per-request-metrics) and the server speaks vLLM."""
    if not (profile.dialect == "vllm" and profile.per_request_metrics):
        return None
    return {"time_to_first_token_ms": t_prefill * 1e3, "generation_time_ms": t_decode * 1e3,
            "queue_time_ms": queued_s / profile.time_scale * 1e3,
            "mean_itl_ms": t_decode * 1e3 / (n_out - 1) if n_out > 1 else None,
            "tokens_per_second": n_out / (t_prefill + t_decode) if t_prefill + t_decode else None,
            "speculative_decoding": None}
