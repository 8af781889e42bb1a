"""Child processes that never outlive dualpath.

A harness killed with SIGKILL runs no cleanup, and its children (simulated servers, launched
servers, Prefect's temporary API server) would keep running, holding ports and GPUs. Two
guards:

* `spawn` starts our own children (simulated and launched servers) with `die_with_parent`:
  the Linux kernel sends them SIGTERM when the thread that forked them ends, so they are
  forked from one long-lived thread that ends only with the process;
* `start_reaper` starts a small watchdog that notes this process's descendants (including
  those started by libraries, e.g. Prefect's server) and terminates them once this process
  is gone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_PR_SET_PDEATHSIG = 1


_spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dualpath-spawn")


def spawn(argv: list[str], **popen_kw) -> subprocess.Popen:
    """`subprocess.Popen` for a child that dies with this process, even on SIGKILL.

    The kernel ties the parent-death signal to the *thread* that forked, and the callers run
    in short-lived worker threads (a launch must not block the event loop): fork from one
    thread that lives as long as the process."""
    return _spawner.submit(subprocess.Popen, argv, preexec_fn=die_with_parent,
                           **popen_kw).result()


def die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux; elsewhere a no-op)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited in time."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout_s)


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]     # field 22: start time since boot


def descendants(root: int) -> dict[int, str]:
    """{pid: start time} of every living descendant of `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        start = _start_time(pid)
        if start is not None:
            out[pid] = start
            todo += children.get(pid, [])
    return out


def start_reaper() -> subprocess.Popen | None:
    """Watch this process; when it is gone, terminate the descendants it left (Linux)."""
    if not Path("/proc/self/stat").exists():
        return None
    r, w = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "dualpath.procs", str(os.getpid())],
                            stdin=r, start_new_session=True, close_fds=True)
    os.close(r)
    os.set_inheritable(w, False)
    # the write end stays open in this process only: EOF on it means we are gone
    _reaper_pipe.append(w)
    return proc


_reaper_pipe: list[int] = []


def _reap(parent: int) -> None:
    import select

    known: dict[int, str] = {}
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 1.0)
        if ready and not os.read(sys.stdin.fileno(), 1):
            break
        known = {**known, **descendants(parent)}
        known = {p: s for p, s in known.items() if _start_time(p) == s}
    me = os.getpid()
    victims = {p: s for p, s in known.items() if p != me and _start_time(p) == s}
    for pid in victims:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_start_time(p) == s for p, s in victims.items()):
        time.sleep(0.2)
    for pid, s in victims.items():
        if _start_time(pid) == s:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


if __name__ == "__main__":
    _reap(int(sys.argv[1]))
