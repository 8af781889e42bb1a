"""Checks of a config against the places it names, so that a config `dualpath check` accepts
is one `dualpath nightly` can run.

The models in `dualpath.config` validate each value alone; these look at what a value means
on this machine: a warehouse path that is a folder, a runs folder that is a file, a file name
with a NUL in it (TOML's "\\u0000" escape), and a config or universe file that is a FIFO or
a device (reading one blocks `check` forever). Each raises `ValueError` with what was wrong
and how to fix it; pydantic turns that into one line of the config error.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def plain_path(value: Path | None) -> Path | None:
    """A file name without NUL or other control characters (no file system accepts NUL)."""
    if value is None:
        return value
    text = str(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError("contains a control character (NUL, newline, ...); give a plain "
                         "file name")
    if len(text) > 4096:
        raise ValueError("is longer than 4096 characters; give a shorter path")
    return value


def date_format_problem(fmt: str) -> str | None:
    """Why `fmt` is no strptime date format ('%Q' and a stray '%' raise only when a file is
    read), or None."""
    from datetime import datetime

    try:
        sample = datetime(2027, 1, 4, 15, 30).strftime(fmt)
        datetime.strptime(sample, fmt)
    except ValueError as e:
        return f"{e}; use strptime directives, e.g. '%d/%m/%Y'"
    if not any(d in fmt for d in ("%Y", "%y", "%d", "%j", "%x", "%F", "%D")):
        return "names no year or day (%Y, %y, %d ...); e.g. '%d/%m/%Y'"
    return None


def _file_above(path: Path) -> Path | None:
    """The first existing ancestor of `path` that is not a folder, if any."""
    for p in path.parents:
        if p.exists():
            return None if p.is_dir() else p
    return None


def _kind(p: Path) -> str:
    return "a folder" if p.is_dir() else ("a file" if p.is_file() else
                                          "a FIFO, socket or device")


def _file(loc: str, p: Path | None, what: str) -> list[tuple[str, str]]:
    if p is None:
        return []
    if p.exists() and not p.is_file():
        return [(loc, f"{p} is {_kind(p)}; give {what}")]
    above = _file_above(p)
    return [(loc, f"{above} is a file, not a folder; move it or give another place")] \
        if above is not None else []


def _folder(loc: str, p: Path | None) -> list[tuple[str, str]]:
    if p is None:
        return []
    if p.exists() and not p.is_dir():
        return [(loc, f"{p} is {_kind(p)}; give a folder (it is created if missing)")]
    above = _file_above(p)
    return [(loc, f"{above} is a file, not a folder; move it or give another place")] \
        if above is not None else []


def places(cfg) -> list[tuple[str, str]]:
    """(setting, problem) for each file or folder of `cfg` that exists as the wrong kind: a
    warehouse that is a folder, a runs folder that is a file, a universe file that is a FIFO.
    A missing one is left to its reader, which says how to create it."""
    r, m = cfg.resolve, cfg.market
    opt = lambda p: r(p) if p is not None else None
    out = (_file("warehouse.path", r(cfg.warehouse.path), "a file name for the DuckDB "
                 "warehouse, e.g. warehouse.duckdb inside it")
           + _folder("warehouse.runs_dir", r(cfg.warehouse.runs_dir))
           + _file("experiment.universe_file", opt(cfg.experiment.universe_file),
                   "a text file with one ticker per line")
           + _file("market.prices_file", opt(m.prices_file), "a CSV or Parquet file")
           + _folder("market.prices_dir", opt(m.prices_dir))
           + _folder("pipeline.documents_dir", opt(cfg.pipeline.documents_dir)))
    if r(cfg.warehouse.path) == r(cfg.warehouse.runs_dir):
        out.append(("warehouse.runs_dir", "is the warehouse file's own name; give each "
                    "its own place"))
    return out


def open_regular(path: Path):
    """Open a file for reading without blocking: a FIFO's open() waits for a writer forever,
    so the file is opened non-blocking and refused unless it is a regular file. Raises
    `IsADirectoryError` / `ValueError` (not a regular file) / `OSError`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(str(path))
        if not stat.S_ISREG(mode):
            raise ValueError("not a regular file (a FIFO, socket or device)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
