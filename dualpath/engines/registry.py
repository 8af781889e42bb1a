"""The registered engines, by the config's `engine` name: adding one is a module here and
its line below (`dualpath.engines.base.Engine` says what the module provides)."""

from __future__ import annotations

from importlib import import_module

from dualpath.engines.base import Engine

_MODULES = {             # engine name -> module of dualpath.engines
    "llama.cpp": "llama_cpp",
    "vllm": "vllm",
    "openai": "openai",
    "sim": "sim",
    "sglang": "sglang",
}
_LOADED: dict = {}


def names() -> tuple[str, ...]:
    """Every registered engine's name, in registration order."""
    return tuple(_MODULES)


def engine(name: str) -> Engine:
    """The registered `Engine` called `name` (KeyError: none is). Loading checks the module:
    its ENGINE an `Engine` (whose abstract methods it had to answer to exist at all), under
    its own name."""
    if name not in _LOADED:
        module = import_module(f"dualpath.engines.{_MODULES[name]}")
        found = getattr(module, "ENGINE", None)
        if not isinstance(found, Engine) or getattr(found, "facts", None) is None \
                or found.facts.name != name:
            raise TypeError(f"dualpath.engines.{_MODULES[name]}.ENGINE must be an Engine "
                            f"whose facts.name is {name!r}, not {found!r}")
        _LOADED[name] = found
    return _LOADED[name]
