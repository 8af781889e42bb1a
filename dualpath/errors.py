"""The exceptions dualpath raises.

    DualpathError
    ├── UserError              a mistake the user can fix (config, files, arguments); the CLI
    │   │                      prints its message without a traceback and exits non-zero
    │   ├── ConfigError        dualpath.toml is missing, malformed or invalid
    │   └── DataError          a universe, price or journal file is malformed
    ├── IdentityError          a server is not the server its path claims (model, slots, build, ...)
    └── CallFailed             one LLM call failed after its retries; carries the CallRecord

A `CallFailed` ends the unit (ticker x draw) that made the call, never the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dualpath.records import CallRecord


class DualpathError(Exception):
    """Base class of every error dualpath raises on purpose."""


class UserError(DualpathError):
    """Something the user can fix; the message says what was wrong and how to fix it."""


class ConfigError(UserError):
    """The configuration file is missing, malformed or fails validation."""


class DataError(UserError):
    """An input data file (universe, prices, journal) is malformed."""


class IdentityError(DualpathError):
    """A server's identity differs from what its path expects."""

    def __init__(self, path: str, differences: list[str]):
        self.path = path
        self.differences = differences
        lines = "\n".join(f"  - {d}" for d in differences)
        super().__init__(f"path '{path}': the server is not the one configured:\n{lines}")


class CallFailed(DualpathError):
    """An LLM call failed after all its attempts."""

    def __init__(self, record: "CallRecord"):
        self.record = record
        super().__init__(f"{record.agent}: {record.error_kind}: {record.error_detail}")
