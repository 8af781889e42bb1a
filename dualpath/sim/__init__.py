"""Simulated llama-server-compatible serving paths: real HTTP servers on loopback.

They exist for the offline demo and for fast tests; the integration suite runs the same client
against a real llama-server. See `server.py` for the protocol and `model.py` for the time and
answer models.
"""

from dualpath.sim.model import SimModel, expected_unit_seconds
from dualpath.sim.server import SimServer, build_app, serve_in_thread

__all__ = ["SimModel", "SimServer", "build_app", "expected_unit_seconds", "serve_in_thread"]
