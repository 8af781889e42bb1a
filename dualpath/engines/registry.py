"""The registered engines, by the config's `engine` name: adding one is a module here and
its line below (`dualpath.engines.base.Engine` says what the module provides)."""

from __future__ import annotations

from importlib import import_module

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


def engine(name: str):
    """The registered `Engine` called `name` (KeyError: none is)."""
    if name not in _LOADED:
        _LOADED[name] = import_module(f"dualpath.engines.{_MODULES[name]}").ENGINE
    return _LOADED[name]
