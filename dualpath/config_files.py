"""The text files a config reads and writes: the universe file (one ticker per line), any
small UTF-8 text file read with a plain reason when it cannot be (a folder, missing, too
large, UTF-16, not UTF-8), and a config dict written back as TOML.

`dualpath.config` re-exports every name here, so callers import them from there.
"""

from __future__ import annotations

import codecs
from collections import Counter
from datetime import date
from pathlib import Path

import orjson

from dualpath.config_checks import open_regular
from dualpath.errors import ConfigError


MAX_TICKER_LEN = 32
MAX_UNIVERSE = 100_000


def _short(value: object, limit: int = 60) -> str:
    """A value for an error message: repr, cut to `limit` characters."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit - 3] + "..."


def _cut(text: str, limit: int = 200) -> str:
    """Plain text (a file name, a message) cut to `limit` characters."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _some(items: list, n: int = 5) -> str:
    """At most `n` items for a message, and how many more there are."""
    shown = ", ".join(_short(x, 40) for x in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def _check_tickers(tickers: list[str], where: str) -> None:
    if not tickers:
        raise ValueError(f"{where} is empty; list at least one ticker")
    if len(tickers) > MAX_UNIVERSE:
        raise ValueError(f"{where}: {len(tickers)} tickers; at most {MAX_UNIVERSE} are allowed")
    bad = [t for t in tickers if not isinstance(t, str) or not 0 < len(t) <= MAX_TICKER_LEN
           or not all(c.isalnum() or c in ".-_^" for c in t)]
    if bad:
        raise ValueError(f"{where}: {len(bad)} malformed ticker(s): {_some(bad)}; use 1-"
                         f"{MAX_TICKER_LEN} letters, digits, . - _ ^")
    dupes = sorted(t for t, n in Counter(tickers).items() if n > 1)
    if dupes:
        raise ValueError(f"{where}: {len(dupes)} duplicate ticker(s): {_some(dupes)}")


def read_universe(path: Path) -> list[str]:
    """Tickers from a file: one per line, blank lines and '#' comments ignored."""
    from dualpath.errors import DataError

    what = f"universe file {_cut(str(path))}"
    lines = _read_text(path, what, DataError).splitlines()
    tickers = [ln.split("#", 1)[0].strip() for ln in lines]
    tickers = [t for t in tickers if t]
    try:
        _check_tickers(tickers, f"universe file {path}")
    except ValueError as e:
        raise DataError(str(e))
    return tickers




MAX_TEXT_BYTES = 10_000_000


def _read_text(path: Path, what: str, error: type[Exception]) -> str:
    """A small UTF-8 text file, or `error` saying plainly why it cannot be one."""
    try:
        with open_regular(path) as f:
            raw = f.read(MAX_TEXT_BYTES + 1)
    except IsADirectoryError:
        raise error(f"{what} is a directory; give the file inside it") from None
    except FileNotFoundError:
        hint = ("not found; create one with `dualpath init`" if error is ConfigError else
                "does not exist; create it with one ticker per line")
        raise error(f"{what} {hint}") from None
    except (OSError, ValueError) as e:     # permissions, a NUL in the name, a FIFO...
        raise error(f"cannot read {what}: {_cut(getattr(e, 'strerror', None) or str(e))}") from None
    if len(raw) > MAX_TEXT_BYTES:
        raise error(f"{what} is larger than {MAX_TEXT_BYTES // 1_000_000} MB; is it the right file?")
    if raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        raise error(f"{what} is UTF-16 text; save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{what} is not UTF-8 text (bad byte at offset {e.start}); "
                    "save it as UTF-8") from None


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, date):
        return v.isoformat()
    return orjson.dumps(str(v)).decode()   # a JSON string is a valid TOML basic string


def dump_toml(data: dict, prefix: str = "") -> str:
    """Write a config dict as TOML (tables of scalars and lists; enough for dualpath configs)."""
    scalars = {k: v for k, v in data.items() if v is not None and not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    out = [f"[{prefix}]"] if prefix and scalars else []
    out += [f"{k} = {_toml_value(v)}" for k, v in scalars.items()]
    for k, v in tables.items():
        sub = dump_toml(v, f"{prefix}.{k}" if prefix else k)
        if sub:
            out += ["", sub] if out else [sub]
    return "\n".join(out)
