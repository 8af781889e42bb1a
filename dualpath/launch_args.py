"""What a path's launch argv will make its server report, worked out before it starts.

`dualpath check` compares this with `[paths.X.expect]`, so a pin the launched server is bound
to contradict is named, with the value to write, before any night. The rules are the engines'
own, read from their source:

- llama-server (llama.cpp 11434, `src/llama-context.cpp`, `tools/server/server.cpp`,
  `common/arg.cpp`): `-c` is padded up to a multiple of 256; without unified KV each of the
  `-np` slots gets `pad256(n_ctx / np)`; with `-kvu` (also the default when `-np` is left
  out, which then means 4 slots) every slot may use the whole padded context;
  `--kv-unified-per-slot` caps a slot, and so does the model's training context (read from
  the GGUF header when the file is here). The reported alias is the first of `--alias`'s comma-separated names in
  sort order (a `std::set`). A repeated flag: the last one wins. `LLAMA_ARG_*` variables in
  `launch_env` count where no flag is given.
- vLLM 0.33 (`vllm/engine/arg_utils.py`, `vllm/utils/argparse_utils.py`): `/v1/models`
  reports the first `--served-model-name` (default: the model tag) with the tag as `root`
  and `--max-model-len` (`32k` = 32,000, `32K` = 32,768) as `max_model_len`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from dualpath import binaries
from dualpath.config import ServingPath
from dualpath.engines import engine


@dataclass(frozen=True)
class Derived:
    """One identity field as the launch argv determines it, and from what."""

    value: object
    how: str


def _pad256(n: int) -> int:
    return (n + 255) // 256 * 256


def _flags(argv: list[str], names: set[str], normalise_underscores: bool = True) -> dict[str, str | None]:
    """{flag: value} for the flags in `names` (the last occurrence wins); a flag followed by
    another flag or nothing has value None. `--flag=value` is split (argparse style)."""
    out: dict[str, str | None] = {}
    for i, tok in enumerate(argv):
        flag, eq, val = tok.partition("=") if tok.startswith("--") else (tok, "", "")
        if normalise_underscores and flag.startswith("--"):
            flag = flag.replace("_", "-")
        if flag in names:
            if eq:
                out[flag] = val
            else:
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                out[flag] = None if nxt is None or (nxt.startswith("-") and not
                                                    re.fullmatch(r"-\d+", nxt)) else nxt
    return out


def _first(found: dict[str, str | None], *names: str) -> tuple[str, str | None] | None:
    """The (flag, value) given for any of `names` (synonyms); the last given wins."""
    hits = [(n, found[n]) for n in names if n in found]
    return hits[-1] if hits else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _port_of(argv_port: str | None, base_url: str | None) -> list[str]:
    if argv_port is None or base_url is None:
        return []
    url_port = urlsplit(base_url).port
    if url_port is not None and _int(argv_port) != url_port:
        return [f"the launch argv listens on --port {argv_port} but base_url is {base_url}: "
                f"make them the same port"]
    return []


def _llama_ctx(found: dict, env: dict[str, str]) -> tuple[int | None, int, Derived | None]:
    """(slots, kv_unified, per-slot context) as llama-server will set them."""
    np_flag = _first(found, "-np", "--parallel")
    np_text = np_flag[1] if np_flag else env.get("LLAMA_ARG_N_PARALLEL")
    n_parallel = _int(np_text) if np_text is not None else -1
    kvu_flag = _first(found, "-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified")
    if kvu_flag:
        unified = not kvu_flag[0].startswith(("-no", "--no"))
    else:
        unified = env.get("LLAMA_ARG_KV_UNIFIED", "").lower() in ("1", "true", "on", "enabled")
    np_how = f"-np {n_parallel}"
    if n_parallel is None:
        return None, unified, None
    if n_parallel < 0:       # auto: 4 slots sharing one unified KV pool
        n_parallel, unified, np_how = 4, True, "no -np (auto: 4 slots, unified KV)"
    c_flag = _first(found, "-c", "--ctx-size")
    c_text = c_flag[1] if c_flag else env.get("LLAMA_ARG_CTX_SIZE")
    per_slot_cap = _int((_first(found, "--kv-unified-per-slot") or (None, None))[1]
                        or env.get("LLAMA_ARG_KV_UNIFIED_PER_SLOT")) or 0
    n_ctx = _int(c_text) or 0
    if n_ctx == 0 and per_slot_cap > 0:
        n_ctx = n_parallel * per_slot_cap
    if n_ctx <= 0:           # the model's own training context: not known from the argv
        return n_parallel, unified, None
    padded = _pad256(n_ctx)
    c_how = f"-c {c_text}" if c_text else f"--kv-unified-per-slot x {n_parallel}"
    if unified:
        per_slot = padded
        rule = f"{c_how} {np_how}: {n_ctx} -> {padded} (256-padded), unified KV: all of it per slot"
    else:
        per_slot = _pad256(padded // n_parallel)
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
    found = _flags(argv[1:], {"-cram", "--cache-ram"})
    flag = _first(found, "-cram", "--cache-ram")
    if flag and _int(flag[1]) is not None:
        return Derived(_int(flag[1]), f"{flag[0]} {flag[1]}")
    if _int(env.get("LLAMA_ARG_CACHE_RAM")) is not None:
        return Derived(_int(env["LLAMA_ARG_CACHE_RAM"]),
                       f"LLAMA_ARG_CACHE_RAM={env['LLAMA_ARG_CACHE_RAM']}")
    return Derived(LLAMA_CACHE_RAM_DEFAULT_MIB,
                   f"no --cache-ram: llama-server keeps {LLAMA_CACHE_RAM_DEFAULT_MIB} MiB")


def llama_server(argv: list[str], env: dict[str, str], base_url: str | None
                 ) -> tuple[dict[str, Derived], list[str]]:
    """What llama-server started with `argv` will report, and argv/URL contradictions."""
    found = _flags(argv[1:], _LLAMA_FLAGS)
    out: dict[str, Derived] = {}
    alias = _first(found, "-a", "--alias")
    alias_text = alias[1] if alias else env.get("LLAMA_ARG_ALIAS")
    names = sorted({a.strip() for a in (alias_text or "").split(",") if a.strip()})
    if names:
        out["model"] = Derived(names[0], f"--alias {alias_text}" + (
            " (llama-server reports the first in sort order)" if len(names) > 1 else ""))
    model = _first(found, "-m", "--model")
    model_text = model[1] if model else env.get("LLAMA_ARG_MODEL")
    if model_text:
        out["model_path"] = Derived(model_text, f"-m {model_text}")
    slots, _, per_slot = _llama_ctx(found, env)
    trained = binaries.gguf_context_length(model_text) if model_text else None
    if per_slot is not None and trained is not None and trained < per_slot.value:
        per_slot = Derived(trained, f"{per_slot.how}, capped by the model's training "
                           f"context {trained}")
    if slots is not None:
        out["slots"] = Derived(slots, f"-np {slots}" if _first(found, "-np", "--parallel")
                               else "no -np: llama-server picks 4 slots")
    if per_slot is not None:
        out["n_ctx_per_slot"] = per_slot
    draft = _first(found, "-md", "--model-draft", "--spec-draft-model")
    spec = _first(found, "--spec-type")
    on = bool(draft) or bool(spec and spec[1] and spec[1].lower() != "none")
    out["speculative"] = Derived(on, f"{draft[0]} {draft[1]}" if draft else
                                 f"--spec-type {spec[1]}" if on else
                                 "no draft model, no --spec-type")
    return out, _port_of((_first(found, "--port") or (None, None))[1], base_url)


def _human_int(text: str) -> int | None:
    """vLLM's `human_readable_int`: 1k = 1,000, 1K = 1,024, 25.6k = 25,600."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if not m:
        return _int(text.strip())
    number, suffix = m.groups()
    mult = ({"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}.get(suffix)
            or {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[suffix])
    return int(float(number) * mult)


_VLLM_FLAGS = {"--model", "--served-model-name", "--max-model-len", "--port",
               "--speculative-config", "--host"}


def vllm(argv: list[str], base_url: str | None) -> tuple[dict[str, Derived], list[str]]:
    """What `vllm serve MODEL ...` will report on /v1/models, and argv/URL contradictions."""
    found = _flags(argv, _VLLM_FLAGS)
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
    return out, _port_of(found.get("--port"), base_url)


def derive(sp: ServingPath) -> tuple[dict[str, Derived], list[str]]:
    """The identity fields `sp.launch` determines, and contradictions within the launch."""
    if not sp.launch:
        return {}, []
    return engine(sp.engine).derive_launch(sp.launch, dict(sp.launch_env), sp.base_url)


def launch_warnings(sp: ServingPath, prefix_affinity: bool = True) -> list[str]:
    """What a launch does that is allowed but probably not meant (`prefix_affinity`: the
    experiment's, which decides whether units are pinned to the server's slots)."""
    if not sp.launch:
        return []
    eng = engine(sp.engine)
    return eng.launch_warnings(sp.launch) + eng.pinned_advice(
        sp.launch, dict(sp.launch_env), sp.pins_slots(prefix_affinity))


def pin_disagreements(sp: ServingPath) -> list[str]:
    """Each `expect` pin the launch argv contradicts, with the value to write."""
    derived, problems = derive(sp)
    e = sp.expect
    for name in ("model", "slots", "n_ctx_per_slot", "speculative"):
        want, got = getattr(e, name), derived.get(name)
        if want is not None and got is not None and want != got.value:
            problems.append(f"expect.{name} = {_toml(want)}, but the launch gives "
                            f"{_toml(got.value)}: write {name} = {_toml(got.value)} ({got.how})")
    path = derived.get("model_path")
    if (e.model_path_contains is not None and path is not None and "{" not in str(path.value)
            and e.model_path_contains not in str(path.value)):
        problems.append(f"expect.model_path_contains = {_toml(e.model_path_contains)}, but the "
                        f"launch loads {path.value!r}: write a part of that path")
    return problems


def _toml(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f'"{v}"' if isinstance(v, str) else str(v)


def identity_plan(sp: ServingPath) -> list[str]:
    """For `dualpath check`: what the identity check will compare, pin by pin, and what the
    launch argv says each pinned field will be."""
    derived, _ = derive(sp)
    pins = {k: v for k, v in sp.expect.model_dump().items()
            if v is not None and k != "gpu"}        # GPU pins: read from the GPU (check)
    if not pins:
        return ["expect: nothing pinned (any server on the endpoint is accepted)"]
    shown = []
    for name, want in pins.items():
        got = derived.get("model_path" if name == "model_path_contains" else name)
        agree = got is not None and (str(want) in str(got.value) if name == "model_path_contains"
                                     else want == got.value)
        shown.append(f"{name}={_toml(want)}" + (f" (launch: {got.how})" if agree else ""))
    return [f"expect ({sp.dialect} reports every pin): " + ", ".join(shown)]
