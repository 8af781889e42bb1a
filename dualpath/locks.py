"""Locks that keep one writer per night and one experiment per server.

- `endpoint_lock`: an exclusive, machine-wide flock per server address. Two dualpath runs on
  one server would each measure the other's load (the 6-slot client that attached to the
  8-slot server as a ninth client). The lock is keyed by the address the name resolves to,
  so `localhost:8080` and `127.0.0.1:8080` are one server (keyed by the host string, they
  shared a server unlocked: backup 531 against 272 s/ticker, no warning). Its files live
  in one fixed place per user, `~/.local/state/dualpath/endpoint-locks/` (the home folder
  from the password database: two runs started with different `TMPDIR` once took two lock
  folders and ran on one server at once); a server on this machine is keyed by this host's
  name too, since a home folder may be shared by several hosts.
- `night_lock`: one process scores a night of an experiment, across every host that shares
  the warehouse. Two `dualpath nightly` of one night both "completed" with every call stored
  twice. The lock is a file beside the warehouse holding its holder (host, pid, since),
  created atomically (a hard link, which shared file systems make atomic too) and kept
  fresh by a heartbeat. A holder is live while its process runs (same host: the pid with
  the same start time) or, on another host, while the heartbeat is younger than
  `STALE_S`; a dead holder's lock is taken over. `night_holder` answers "is anyone scoring
  this night?" for `dualpath runs`, so a run left `running` by a killed process or a
  crashed host reads as interrupted.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from dualpath.errors import EndpointBusy, NightBusy
from dualpath.places import user_state_dir

HEARTBEAT_S = 10.0
# a holder on another host whose heartbeat is older than this is dead (its host crashed)
STALE_S = 60.0


def lock_dir() -> Path:
    """Where endpoint locks live: fixed per user, whatever `TMPDIR` says."""
    return user_state_dir() / "endpoint-locks"


# ------------------------------------------------------------------------------ endpoints

def _is_local(ip: str) -> bool:
    """A loopback address, or one of this machine's own (a server bound to 0.0.0.0 answers
    on all of them)."""
    addr = ipaddress.ip_address(ip)
    if addr.is_loopback or addr.is_unspecified:
        return True
    family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.bind((ip, 0))             # only an address of this machine can be bound
        return True
    except OSError:
        return False


def endpoint_key(base_url: str) -> str:
    """The server an address reaches, as a lock name: `local_HOST_PORT` for this machine (any
    loopback or own address, `localhost` included), else the lowest resolved address."""
    u = urlsplit(base_url)
    port = u.port or (443 if u.scheme == "https" else 80)
    host = (u.hostname or "").strip("[]")
    try:
        ips = sorted({info[4][0].split("%")[0] for info in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)})
    except (socket.gaierror, UnicodeError):
        ips = []                        # unresolvable now: the connect will say so
    if not ips:
        return f"{host}_{port}"
    if any(_is_local(ip) for ip in ips):
        return f"local_{socket.gethostname().replace('/', '_')}_{port}"
    return f"{ips[0].replace(':', '-')}_{port}"


def _flock_soon(fd: int, tries: int = 5) -> bool:
    """Take the exclusive flock, allowing a moment for `endpoint_holder`'s brief shared one."""
    for i in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if i + 1 < tries:
                time.sleep(0.05)
    return False


@contextlib.contextmanager
def endpoint_lock(base_url: str, owner: str) -> Iterator[Path]:
    """Hold the endpoint for this run; raises `EndpointBusy` naming the holder."""
    u = urlsplit(base_url)
    d = lock_dir()
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{endpoint_key(base_url)}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if not _flock_soon(fd):
            holder = path.read_text(errors="replace").strip() or "another process"
            raise EndpointBusy(f"{u.hostname}:{u.port} is in use by {holder}; two experiments "
                               "must never share a server (each would measure the other's "
                               "load); wait for that run to end or give this path another "
                               "server") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"dualpath pid {os.getpid()} ({owner}, as {u.hostname}:{u.port})"
                 .encode())
        yield path
    finally:
        os.close(fd)   # closing the descriptor releases the flock


def endpoint_holder(base_url: str) -> str | None:
    """Who holds the endpoint now (its lock file's text), None when it is free: asked before
    a night writes anything, so a start refused for a busy server leaves no trace."""
    path = lock_dir() / f"{endpoint_key(base_url)}.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return path.read_text(errors="replace").strip() or "another process"
    finally:
        os.close(fd)
    return None


# ---------------------------------------------------------------------------------- nights

@dataclass(frozen=True)
class Holder:
    """Who holds a night: written into its lock file."""

    host: str
    pid: int
    since: str                   # ISO time the lock was taken
    what: str                    # e.g. "dualpath nightly -c /srv/dualpath.toml"
    token: str
    started: str | None = None   # the process's start time on its host (pid reuse)
    heartbeat_age_s: float = 0.0

    def describe(self) -> str:
        return f"{self.what} on host {self.host}, pid {self.pid}, since {self.since}"


def _proc_start(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]     # field 22: start time since boot


def _pid_alive(pid: int, started: str | None) -> bool:
    if Path("/proc/self/stat").exists():
        now = _proc_start(pid)
        return now is not None and (started is None or now == started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_live(holder: Holder) -> bool:
    """The holder's process still runs (same host), or its heartbeat is fresh (another)."""
    if holder.host == socket.gethostname():
        return _pid_alive(holder.pid, holder.started)
    return holder.heartbeat_age_s < STALE_S


def _read(path: Path) -> Holder | None:
    try:
        data = json.loads(path.read_text())
        age = time.time() - path.stat().st_mtime
        return Holder(**{**data, "heartbeat_age_s": age})
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError):
        # a lock file cut short (its host died while writing it): held by nobody alive
        return Holder("unknown", 0, "unknown", "a damaged lock file", "", None, STALE_S * 2)


def night_holder(path: Path) -> Holder | None:
    """The live holder of a night's lock, or None when no process holds it."""
    h = _read(path)
    return h if h is not None and is_live(h) else None


_HELD: dict[str, list] = {}          # lock path -> [token, depth] held by this process
_HELD_GUARD = threading.Lock()


def _try_create(path: Path, holder: Holder) -> bool:
    tmp = path.with_name(f".{path.name}.{holder.token}.tmp")
    tmp.write_text(json.dumps({k: v for k, v in asdict(holder).items()
                               if k != "heartbeat_age_s"}))
    try:
        os.link(tmp, path)          # atomic: fails when the lock exists
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def _take_over(path: Path, stale: Holder) -> None:
    """Move a dead holder's lock aside; another taker that got there first wins."""
    aside = path.with_name(f".{path.name}.stale.{uuid.uuid4().hex}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    moved = _read(aside)
    if moved is not None and moved.token != stale.token:
        # a live lock was taken between our read and the rename: give it back
        with contextlib.suppress(FileExistsError):
            os.link(aside, path)
    aside.unlink(missing_ok=True)


def _acquire(path: Path, what: str, describe: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    me = Holder(host=socket.gethostname(), pid=os.getpid(),
                since=datetime.now(timezone.utc).isoformat(timespec="seconds"), what=what,
                token=uuid.uuid4().hex, started=_proc_start(os.getpid()))
    for _ in range(5):
        if _try_create(path, me):
            return me.token
        other = _read(path)
        if other is None:
            continue
        if is_live(other):
            raise NightBusy(f"{describe} is being scored by {other.describe()}; one process "
                            "scores a night (two would store every call twice): wait for it "
                            "to end, or stop it (Ctrl-C) and rerun the night to resume")
        _take_over(path, other)
    raise NightBusy(f"{describe}: its lock {path} kept changing hands; try again")


def _heartbeat(path: Path, token: str, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_S):
        with contextlib.suppress(OSError):
            if (h := _read(path)) is not None and h.token == token:
                os.utime(path)


@contextlib.contextmanager
def night_lock(path: Path, what: str, describe: str) -> Iterator[Path]:
    """Hold a night's lock for the block (re-entrant within one process); raises
    `NightBusy` naming the live holder before anything is written."""
    key = str(path)
    with _HELD_GUARD:
        if key in _HELD:
            _HELD[key][1] += 1
            nested = True
        else:
            nested = False
    if nested:
        try:
            yield path
        finally:
            with _HELD_GUARD:
                _HELD[key][1] -= 1
        return
    token = _acquire(path, what, describe)
    with _HELD_GUARD:
        _HELD[key] = [token, 1]
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(path, token, stop), daemon=True,
                            name=f"night-lock:{path.name}")
    beat.start()
    try:
        yield path
    finally:
        stop.set()
        with _HELD_GUARD:
            _HELD.pop(key, None)
        if (h := _read(path)) is not None and h.token == token:
            path.unlink(missing_ok=True)
