"""What the simulated servers say, written from the engines' source.

llama-server (llama.cpp build 11434, `tools/server/`): errors `{"error": {code, message,
type}}` (`server-common.cpp`, `format_error_response`; a context overflow adds n_prompt_tokens
and n_ctx), per-slot context padded to a multiple of 256 (`src/llama-context.cpp`: n_ctx
padded, divided by the slots, padded again), sampling parameters as `task_params::to_json`
prints them (float32 values, the sampler chain by name), `/metrics` 501 without `--metrics`,
thinking in `reasoning_content` (`server-chat.cpp`), an SSE comment ping `:` after
`sse_ping_interval` (30 s) of silence and an error mid-stream as a `data: {"error": ...}`
event that ends the stream without `[DONE]` (`server-context.cpp`).

vLLM 0.33.0 (`vllm/entrypoints/`): errors `{"error": {message, type, param, code}}`
(`serve/exception_handling/error_response.py`), a context overflow a 400 BadRequestError whose
message carries `(parameter=input_tokens, value=N)` (`renderers/params.py`), max_model_len
checked per request (`serve/utils/api_utils.py`, `get_max_tokens`: the output is capped at
max_model_len - prompt), thinking in `reasoning` with `--reasoning-parser` (and counted in
`usage.completion_tokens_details.reasoning_tokens`), inline `<think>` without one, an error
mid-stream as a `data: {"error": ...}` event followed by `[DONE]`
(`openai/chat_completion/serving.py`), keep-alive comments only with
`--sse-keep-alive-interval` (`serve/utils/sse_keep_alive.py`).
"""

from __future__ import annotations

import asyncio
import re
import struct
from dataclasses import dataclass

from dualpath.grades import LABELS

# llama-server's /props `default_generation_settings.params` on a build without sampling
# flags (read from the real server the tests build).
LLAMA_PARAMS = {
    "seed": 4294967295, "temperature": 0.8, "dynatemp_range": 0.0, "dynatemp_exponent": 1.0,
    "top_k": 40, "top_p": 0.95, "min_p": 0.05, "top_n_sigma": -1.0, "xtc_probability": 0.0,
    "xtc_threshold": 0.1, "typical_p": 1.0, "repeat_last_n": 64, "repeat_penalty": 1.0,
    "presence_penalty": 0.0, "frequency_penalty": 0.0, "dry_multiplier": 0.0, "dry_base": 1.75,
    "dry_allowed_length": 2, "dry_penalty_last_n": 64, "mirostat": 0, "mirostat_tau": 5.0,
    "mirostat_eta": 0.1, "adaptive_target": -1.0, "adaptive_decay": 0.9, "max_tokens": -1,
    "n_predict": -1, "n_keep": 0, "n_discard": 0, "ignore_eos": False, "stream": False,
    "n_probs": 0, "min_keep": 0, "chat_format": "Content-only", "reasoning_format": "none",
    "reasoning_in_content": False, "generation_prompt": "",
    "samplers": ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc",
                 "temperature"],
    "speculative.types": "none", "timings_per_token": False, "post_sampling_probs": False,
    "backend_sampling": False, "lora": []}
# request field -> the params key it sets (`server-schema.cpp` aliases)
_ALIASES = {"max_completion_tokens": "n_predict", "max_tokens": "n_predict"}
LLAMA_SAMPLER_NAMES = {"penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p",
                       "xtc", "temperature", "infill", "adaptive_p"}

LLAMA_PING, VLLM_PING = b":\n\n", b": keep-alive\n\n"
METRICS_OFF = {"error": {"code": 501, "message": "This server does not support metrics "
                         "endpoint. Start it with `--metrics`", "type": "not_supported_error"}}
_VLLM_TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError",
               503: "ServiceUnavailableError"}


def f32(v):
    """A float as llama-server prints it (float32 widened to double)."""
    if isinstance(v, float):
        return struct.unpack("f", struct.pack("f", v))[0]
    return v


def n_ctx_per_slot(n_ctx: int, slots: int) -> int:
    """llama-server's context per slot without unified KV: -c padded to 256, split over the
    slots, padded to 256 again (-c 110000 -np 4 -> 27648)."""
    pad = lambda n: (n + 255) // 256 * 256
    return pad(pad(n_ctx) // slots)


def applied_params(body: dict, base: dict) -> dict:
    """The params a slot reports after a request: the server's, overridden by the request."""
    out = dict(base)
    for key, value in body.items():
        key = _ALIASES.get(key, key)
        if key in out and key != "samplers":
            out[key] = f32(value)
    if key_n := out.get("n_predict"):
        out["max_tokens"] = key_n
    if isinstance(body.get("samplers"), list):
        out["samplers"] = [s for s in body["samplers"] if s in LLAMA_SAMPLER_NAMES]
    if "reasoning_format" in body:
        out["reasoning_format"] = body["reasoning_format"]
    return out


def error(vllm: bool, status: int, message: str, kind: str | None = None,
          param: str | None = None, **extra) -> dict:
    """An error body as the engine writes it."""
    if vllm:
        return {"error": {"message": message, "type": kind or _VLLM_TYPES.get(status, "Error"),
                          "param": param, "code": status}}
    return {"error": {"code": status, "message": message,
                      "type": kind or "invalid_request_error", **extra}}


def context_error(vllm: bool, prompt_n: int, n_ctx: int) -> dict:
    """The 400 of a prompt longer than the context (llama-server's slot / vLLM's model)."""
    if vllm:
        return error(True, 400, f"This model's maximum context length is {n_ctx} tokens. "
                     f"However, your prompt contains {prompt_n} input tokens, which exceeds "
                     "this limit even without any output tokens. Please reduce the length of "
                     f"the input prompt. (parameter=input_tokens, value={prompt_n})",
                     param="input_tokens")
    return error(False, 400, f"request ({prompt_n} tokens) exceeds the available context size "
                 f"({n_ctx} tokens), try increasing it", "exceed_context_size_error",
                 n_prompt_tokens=prompt_n, n_ctx=n_ctx)


def model_not_found(model) -> dict:
    """vLLM's 404 for a model name it does not serve (`openai/models/serving.py`)."""
    return error(True, 404, f"The model `{model}` does not exist.", "NotFoundError", "model")


def stream_error(vllm: bool) -> dict:
    """The error event of a generation that failed mid-stream."""
    if vllm:
        return error(True, 500, "Generation failed: the engine stopped this request",
                     "InternalServerError")
    return error(False, 500, "decode failed: the slot stopped this request", "server_error")


# ---------------------------------------------------------------- thinking


def _enabled(body: dict) -> bool:
    kwargs = body.get("chat_template_kwargs")
    enabled = kwargs.get("enable_thinking", True) if isinstance(kwargs, dict) else True
    return enabled is not False


def thinks(profile, body: dict) -> bool:
    """Whether the simulated model thinks on this request: a thinking model does unless the
    chat template is told `enable_thinking = false`, as Qwen3's templates are (one that
    `thinks_when_off` does anyway)."""
    return profile.thinks and (_enabled(body) or profile.thinks_when_off)


def apart(profile, body: dict) -> bool:
    """Whether the engine returns the thinking in its own field (else inline). vLLM's qwen3
    parser with thinking off starts in its CONTENT state (vllm/parser/qwen3.py, 0.33.0
    `qwen3_config(thinking=False)`): the thinking stays in the content."""
    if profile.dialect == "vllm":
        return (profile.reasoning_parser and body.get("include_reasoning", True) is not False
                and _enabled(body))
    return body.get("reasoning_format", "deepseek") != "none"


def _inline(profile, body: dict, thinking: str, answer: str, stream: bool) -> str:
    """Thinking left in the content, in the shape the template and the parser leave it (see
    `dualpath.thinking`): a generation cut off while thinking never closes the block."""
    if profile.dialect == "vllm" and profile.reasoning_parser and not _enabled(body):
        # the parser keeps <think> and drops </think>: a whole reply is returned as generated
        close = "\n</think>\n\n" if not stream else "\n\n\n"
        return f"<think>\n{thinking}{close}{answer}" if answer else f"<think>\n{thinking}"
    if profile.template_opens_think and _enabled(body):
        return f"{thinking}\n</think>\n\n{answer}" if answer else thinking
    return f"<think>\n{thinking}\n</think>\n\n{answer}" if answer else f"<think>\n{thinking}"


def message(profile, body: dict, answer: str, thinking: str) -> dict:
    """The assistant message of a whole (non-streamed) reply."""
    msg = {"role": "assistant", "content": answer}
    if not thinking:
        return msg
    if not apart(profile, body):
        return {"role": "assistant", "content": _inline(profile, body, thinking, answer, False)}
    field = "reasoning" if profile.dialect == "vllm" else "reasoning_content"
    return {**msg, field: thinking}


def deltas(profile, body: dict, answer: str, thinking: str) -> list[dict]:
    """The deltas a reply streams after its first one, thinking first: in the dialect's own
    field, or inline as text."""
    if not thinking:
        return [{"content": answer[1:]}] if len(answer) > 1 else []
    if not apart(profile, body):
        text = _inline(profile, body, thinking, answer, True)
        return [{"content": text[i:i + 40]} for i in range(8, len(text), 40)]
    field = "reasoning" if profile.dialect == "vllm" else "reasoning_content"
    half = len(thinking) // 2
    return [{field: thinking[half:]}, {"content": answer}]


def first_delta(profile, body: dict, answer: str, thinking: str) -> dict:
    """The first generated delta (the first token): thinking when the model thinks."""
    if not thinking:
        return {"content": answer[:1]}
    if not apart(profile, body):
        return {"content": _inline(profile, body, thinking, answer, True)[:8]}
    field = "reasoning" if profile.dialect == "vllm" else "reasoning_content"
    return {field: thinking[:len(thinking) // 2]}


def reasoning_usage(profile, body: dict, thinking_tokens: int) -> dict:
    """The usage fields that count the thinking: vLLM with a reasoning parser only, and only
    what it parsed as thinking (none with thinking off)."""
    if profile.dialect == "vllm" and apart(profile, body):
        return {"completion_tokens_details": {"reasoning_tokens": thinking_tokens}}
    return {}


@dataclass(frozen=True, slots=True)
class Reply:
    """What the simulated model generates for one request: the answer and its thinking."""

    answer: str
    thinking: str = ""
    thinking_tokens: int = 0


def reply(profile, body: dict, header, answer: str, runaway: bool, n_out: int) -> Reply:
    """The answer with, when the model thinks on this request, its thinking (a runaway
    thinking model never gets to answer). Before a grade it drafts another grade in the
    answer's own format: a grade read from the thinking instead of the answer is wrong."""
    if not thinks(profile, body):
        return Reply(answer)
    lines = [f"The committee wants a view on {header[1] if header else 'this stock'}; "
             "weigh the evidence before answering."]
    final = re.search(r"FINAL GRADE: (\d)", answer) or re.search(r'"grade": ?(\d)', answer)
    if final:
        draft = 1 if final[1] != "1" else 5
        lines.append(f'A first draft: {{"grade": {draft}}}' if answer.startswith("{") else
                     f"A first draft:\nFINAL GRADE: {draft} ({LABELS[draft]})")
        lines.append("No: that ignores the risk judge. Weigh it again.")
    n_think = n_out if runaway else round(n_out * profile.thinking_share)
    return Reply("" if runaway else answer, "\n".join(lines), n_think)


def output_room(n_ctx: int, vllm: bool, body: dict, prompt_n: int) -> tuple[int, dict | None]:
    """The output cap of a request, or the 400 body of one that does not fit: llama-server's
    slot refuses a prompt that fills its context; vLLM a prompt over max_model_len or a
    max_tokens over it, and caps the output at what is left (`get_max_tokens`)."""
    if prompt_n > n_ctx or (not vllm and prompt_n >= n_ctx):
        return 0, context_error(vllm, prompt_n, n_ctx)
    max_tokens = body.get("max_tokens") or body.get("n_predict") or -1
    if vllm and max_tokens > n_ctx:
        return 0, error(True, 400, f"max_tokens={max_tokens} cannot be greater than "
                        f"max_model_len={n_ctx}. Please request fewer output tokens. "
                        f"(parameter=max_tokens, value={max_tokens})", param="max_tokens")
    if max_tokens < 0 or (vllm and max_tokens > n_ctx - prompt_n):
        max_tokens = n_ctx - prompt_n
    return max_tokens, None


async def silence(profile, seconds: float):
    """Sleep `seconds` modelled seconds, yielding the engine's SSE ping for every
    `sse_ping_s` of silence (llama-server: 30 s by default; vLLM: off by default)."""
    vllm = profile.dialect == "vllm"
    every = profile.sse_ping_s
    every = (0.0 if vllm else 30.0) if every is None else every
    while every and seconds > every:
        await asyncio.sleep(every * profile.time_scale)
        seconds -= every
        yield VLLM_PING if vllm else LLAMA_PING
    await asyncio.sleep(seconds * profile.time_scale)
