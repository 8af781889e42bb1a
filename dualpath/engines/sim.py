"""The simulated server (`dualpath.sim`), started in process for a path with no base_url.

It speaks the dialect of a real engine (`SimProfile.dialect`, any registered engine whose
facts say `simulated`): on the wire a simulated path is that engine (`engine_for`). What it
can report is that engine's, less the file hashes: it runs no binary of its own and loads no
model file.
"""

from __future__ import annotations

from dualpath.engines.base import Engine
from dualpath.engines.catalog import EngineFacts

# its binary's files and start log (the backend it runs on): a simulated server has neither
FILE_PINS = frozenset({"binary_sha256", "model_sha256", "backend", "device_contains"})

FACTS = EngineFacts(name="sim", label="the simulated server", reports=frozenset({"model"}))


class Sim(Engine):
    facts = FACTS


ENGINE = Sim()
