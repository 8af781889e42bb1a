"""What a path's launch argv will make its server report, worked out before it starts.

`dualpath check` compares this with `[paths.X.expect]`, so a pin the launched server is bound
to contradict is named, with the value to write, before any night. The rules are each
engine's own, read from its source, in its module (`Engine.derive_launch`: llama-server's
context padding and aliases in `dualpath.engines.llama_cpp`, vLLM's served name and
`--max-model-len` in `dualpath.engines.vllm`, SGLang's in `dualpath.engines.sglang`).
"""

from __future__ import annotations

from dualpath.config import ServingPath
from dualpath.engines import engine
from dualpath.engines.argv import Derived


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
