"""The simulated server (`dualpath.sim`), started in process for a path with no base_url.

It speaks the dialect of a real engine (`SimProfile.dialect`, any registered engine whose
facts say `simulated`): on the wire a simulated path is that engine (`engine_for`). What it
can report is that engine's, less the file hashes: it runs no binary of its own and loads no
model file.
"""

from __future__ import annotations

from typing import Any

from dualpath.engines.base import Engine
from dualpath.engines.catalog import EngineFacts

# its binary's files and start log (the backend it runs on): a simulated server has neither
FILE_PINS = frozenset({"binary_sha256", "model_sha256", "backend", "device_contains"})

FACTS = EngineFacts(name="sim", label="the simulated server", reports=frozenset({"model"}))


class Sim(Engine):
    facts = FACTS

    # On the wire a simulated path is its dialect's engine (`engine_for`): these answer
    # only for a path whose dialect is not asked, which none is.
    def thinking_body(self, thinking: str) -> dict[str, Any]:
        return {}

    async def read_details(self, http, base_url, ident, model) -> None:
        """The simulated server is read in its dialect, never as `sim`."""

    async def recognise(self, replies) -> str | None:
        return None        # it answers as its dialect's engine, which recognises it


ENGINE = Sim()
