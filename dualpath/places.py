"""Files and folders known by what they are, never by how a setting spells them.

A warehouse named through a symlink (`link/wh-link.duckdb` -> `wh.duckdb`) is the same
warehouse: two configs naming it two ways once took two night locks beside the two spellings
and scored one night twice (544 calls stored per path, 16 units twice, both runs complete).
Every config path is therefore its resolved real path (`real_path`), and two existing places
are the same when they have the same device and inode (`same_place`; a hard link too).
A symlink loop is a user's mistake named in one line, not `RuntimeError: Symlink loop`.
"""

from __future__ import annotations

import errno
import os
import pwd
from pathlib import Path

from dualpath.errors import ConfigError


def real_path(p: Path | str) -> Path:
    """The absolute path `p` names once every symlink is followed (it need not exist);
    raises `ConfigError` for a symlink loop."""
    try:
        return Path(p).resolve()
    except RuntimeError:
        raise ConfigError(f"{p} is a symlink loop (a link that leads back to itself); point "
                          "the setting at a real file or folder") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ConfigError(f"{p} is a symlink loop (a link that leads back to itself); "
                              "point the setting at a real file or folder") from None
        raise


def identity(p: Path | str) -> tuple[int, int] | None:
    """(device, inode) of an existing place, None when there is nothing there yet."""
    try:
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_dev, st.st_ino


def same_place(a: Path | str, b: Path | str) -> bool:
    """Whether `a` and `b` are one file or folder: one device and inode where both exist,
    else one real path."""
    ia, ib = identity(a), identity(b)
    if ia is not None and ib is not None:
        return ia == ib
    return real_path(a) == real_path(b)


def user_state_dir() -> Path:
    """This user's own folder for dualpath's machine-wide state: from the password database,
    so neither `TMPDIR` nor `HOME` can give two runs of one user two of them."""
    return Path(pwd.getpwuid(os.getuid()).pw_dir) / ".local" / "state" / "dualpath"
