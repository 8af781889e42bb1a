"""Reading a server's launch argv as its server reads it: argparse-style flags (the last
given wins, `--flag=value` split, a negative number a value), and the identity fields an
engine module derives from them (`Derived`). Each engine's own rules are in its module
(`Engine.derive_launch`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Derived:
    """One identity field as the launch argv determines it, and from what."""

    value: object
    how: str


def pad256(n: int) -> int:
    return (n + 255) // 256 * 256


def flags(argv: list[str], names: set[str], normalise_underscores: bool = True) -> dict[str, str | None]:
    """{flag: value} for the flags in `names` (the last occurrence wins); a flag followed by
    another flag or nothing has value None. `--flag=value` is split (argparse style)."""
    out: dict[str, str | None] = {}
    for i, tok in enumerate(argv):
        flag, eq, val = tok.partition("=") if tok.startswith("--") else (tok, "", "")
        if normalise_underscores and flag.startswith("--"):
            flag = flag.replace("_", "-")
        if flag in names:
            if eq:
                out[flag] = val
            else:
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                out[flag] = None if nxt is None or (nxt.startswith("-") and not
                                                    re.fullmatch(r"-\d+", nxt)) else nxt
    return out


def first(found: dict[str, str | None], *names: str) -> tuple[str, str | None] | None:
    """The (flag, value) given for any of `names` (synonyms); the last given wins."""
    hits = [(n, found[n]) for n in names if n in found]
    return hits[-1] if hits else None


def to_int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def port_clash(argv_port: str | None, base_url: str | None) -> list[str]:
    """The contradiction between the port the argv listens on and base_url's (none: agree or
    either unknown)."""
    if argv_port is None or base_url is None:
        return []
    url_port = urlsplit(base_url).port
    if url_port is not None and to_int(argv_port) != url_port:
        return [f"the launch argv listens on --port {argv_port} but base_url is {base_url}: "
                f"make them the same port"]
    return []
