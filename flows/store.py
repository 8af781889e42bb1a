"""The journal store: where a worker on another host ships a path's journal for the parent.

`[warehouse] journal_store` is a folder (a shared mount; no extra package needed) or an
fsspec URL (`s3://bucket/prefix`, `sftp://host/dir`, ...; fsspec and the protocol's package
installed on every host). A journal is stored whole under `<experiment>/<night>/<path>/
journal.jsonl` and replaced whole on each shipment: journals only grow, and ingest is keyed,
so a journal shipped (or fetched) twice is ingested once. Writes are atomic (a temporary
name, then a rename; object stores replace an object atomically), so a reader never sees
half a shipment.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from dualpath.errors import ConfigError


def _is_url(where: str) -> bool:
    return "://" in where and not where.startswith("file://")


class JournalStore:
    """One configured store; keys are relative POSIX paths."""

    def __init__(self, where: str, base_dir: Path | None = None):
        self.where = where
        self._fs = None
        if _is_url(where):
            try:
                from fsspec.core import url_to_fs
            except ImportError:
                raise ConfigError(f"[warehouse] journal_store = {where!r} is a URL, which needs "
                                  "fsspec (pip install fsspec, plus the protocol's package, "
                                  "e.g. s3fs) on every host; or use a shared folder") from None
            try:
                self._fs, self._root = url_to_fs(where)
            except (ImportError, ValueError) as e:
                raise ConfigError(f"[warehouse] journal_store = {where!r}: {e}; install the "
                                  "protocol's fsspec package on every host, or use a shared "
                                  "folder") from None
        else:
            folder = Path(where.removeprefix("file://")).expanduser()
            self._root = str(folder if folder.is_absolute() or base_dir is None
                             else (base_dir / folder).resolve())

    def __repr__(self) -> str:
        return f"JournalStore({self.where!r})"

    @staticmethod
    def key(experiment: str, night: str, path: str) -> str:
        return f"{experiment}/{night}/{path}/journal.jsonl"

    def _full(self, key: str) -> str:
        return f"{self._root.rstrip('/')}/{key}"

    def put(self, local: Path, key: str) -> None:
        """Ship a local journal (cut at its last complete line) under `key`, atomically."""
        data = local.read_bytes()
        data = data[:data.rfind(b"\n") + 1]
        if self._fs is not None:
            self._fs.pipe_file(self._full(key), data)
            return
        write_atomic(Path(self._full(key)), data)

    def read(self, key: str) -> bytes | None:
        """The stored bytes under `key`, or None when nothing was shipped there."""
        try:
            if self._fs is not None:
                return self._fs.cat_file(self._full(key))
            return Path(self._full(key)).read_bytes()
        except FileNotFoundError:
            return None

    def get(self, key: str, local: Path) -> bool:
        """Copy the stored journal to `local` (atomically); False when there is none."""
        data = self.read(key)
        if data is None:
            return False
        write_atomic(local, data)
        return True

    def check(self) -> None:
        """Write, read back and remove a probe; a store that cannot is a config mistake."""
        key = f".dualpath-probe-{uuid.uuid4().hex}"
        try:
            if self._fs is not None:
                self._fs.pipe_file(self._full(key), b"ok")
                ok = self._fs.cat_file(self._full(key)) == b"ok"
                self._fs.rm_file(self._full(key))
            else:
                Path(self._root).mkdir(parents=True, exist_ok=True)
                probe = Path(self._full(key))
                probe.write_bytes(b"ok")
                ok = probe.read_bytes() == b"ok"
                probe.unlink()
        except Exception as e:     # a missing bucket, no permission, an unreachable host
            raise ConfigError(
                f"[warehouse] journal_store = {self.where!r} cannot be written and read back "
                f"from this host ({type(e).__name__}: {e}); give a folder or URL that this "
                "host and every worker's host can write (a shared mount, s3://bucket/prefix)"
            ) from None
        if not ok:
            raise ConfigError(f"[warehouse] journal_store = {self.where!r} returned other "
                              "bytes than were written; give a store that keeps what it gets")


def write_atomic(dest: Path, data: bytes) -> None:
    """Replace `dest` with `data` so that a reader sees the old file or the new one."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, dest)
