"""The exceptions dualpath raises, all in one place.

    DualpathError
    ├── UserError              a mistake the user can fix (config, files, arguments, a busy
    │   │                      resource); the CLI prints its message without a traceback and
    │   │                      exits 2
    │   ├── ConfigError        dualpath.toml is missing, malformed or invalid
    │   ├── SweepSpecError     a sweep spec file is missing, malformed or invalid
    │   ├── DataError          a universe, price or journal file is malformed
    │   ├── NotASession        the night asked for is not a session of the market's calendar
    │   ├── EndpointBusy       another dualpath run holds the server's endpoint lock
    │   ├── NightBusy          another process is scoring this night of the experiment
    │   ├── WarehouseBusy      another process held the warehouse longer than the wait allowed
    │   ├── WarehouseDamaged   the warehouse file cannot be read (truncated, zero bytes, not
    │   │                      DuckDB's); `dualpath rebuild` makes it again from the journals
    │   └── DiskFull           the disk holding the warehouse or a journal has no space left
    ├── PathUnavailable        a path could not be scored at all tonight (recorded as failed)
    │   ├── ServerStartError   a launched server exited or did not become ready
    │   ├── ServerUnreachable  a server did not answer its identity endpoints
    │   ├── IdentityError      a server is not the server its path claims (model, slots, ...)
    │   └── EngineMismatch     a server's own replies show another engine than its path's
    ├── HarnessError           dualpath itself failed while scoring (a sink, the journal):
    │                          the path-run stops loudly and is recorded, never blamed on the
    │                          user's pipeline
    └── CallFailed             one LLM call failed after its retries; carries the CallRecord

A `CallFailed` ends the unit (ticker x draw) that made the call, never the run. A
`PathUnavailable` fails one path's run; the other paths of the night still run.
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


class SweepSpecError(UserError):
    """A sweep spec file is missing, malformed or invalid."""


class DataError(UserError):
    """An input data file (universe, prices, journal) is malformed."""


class NotASession(UserError):
    """The night asked for is not a trading session of the configured exchange calendar."""


class EndpointBusy(UserError):
    """Another dualpath run holds this endpoint."""


class NightBusy(UserError):
    """Another process (on this host or another sharing the warehouse) scores this night."""


class WarehouseBusy(UserError):
    """The warehouse stayed locked by another process for longer than the wait allowed."""


class WarehouseDamaged(UserError):
    """The warehouse file is damaged; the journals can rebuild it."""


class DiskFull(UserError):
    """No space left where dualpath writes (the warehouse, a journal)."""


class PathUnavailable(DualpathError):
    """A path could not be scored at all: its run is recorded as failed with this reason."""


class ServerStartError(PathUnavailable):
    """A launched server exited or did not become ready."""


class ServerUnreachable(PathUnavailable):
    """The server did not answer its identity endpoints."""


class IdentityError(PathUnavailable):
    """A server's identity differs from what its path expects."""

    def __init__(self, path: str, differences: list[str]):
        self.path = path
        self.differences = differences
        super().__init__("; ".join(differences))


class EngineMismatch(PathUnavailable):
    """A server answers as another engine than its path's `engine` (its /v1/models, /metrics
    or own endpoints say so); the message names both and the fix."""

    def __init__(self, path: str, line: str):
        self.path = path
        super().__init__(line)


class HarnessError(DualpathError):
    """dualpath's own machinery failed while scoring (not the server, not the pipeline)."""


class CallFailed(DualpathError):
    """An LLM call failed after all its attempts."""

    def __init__(self, record: "CallRecord"):
        self.record = record
        super().__init__(f"{record.agent}: {record.error_kind}: {record.error_detail}")
