"""The viewer answers only for the names it is served under: a page on the user's browser
could otherwise read it through DNS rebinding (a name of the attacker's that resolves to
127.0.0.1 sends its own `Host`).

Served names: the loopback names, `[ui] host` and `--host` as given, `[ui] base_url`'s host,
and, when listening on every address (0.0.0.0, ::), this machine's own names and addresses.
Starlette's TrustedHostMiddleware cuts the `Host` header at its first colon, so it cannot
tell `[::1]:8765` from `[`: the header's host is parsed here, IPv6 literals included.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse

LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def host_of(header: str) -> str:
    """The host part of a `Host` header, lower-case, without port or IPv6 brackets."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else ""
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def served_names(host: str, base_url: str | None) -> frozenset[str]:
    """Every host name or address the viewer answers for (see the module docstring)."""
    names = set(LOOPBACK) | {host_of(host) if host.startswith("[") else host.lower()}
    if base_url:
        names.add((urlsplit(base_url).hostname or "").lower())
    if host in ("0.0.0.0", "::", ""):
        me = socket.gethostname()
        names |= {me.lower(), socket.getfqdn().lower()}
        try:
            names |= {info[4][0].split("%")[0] for info in socket.getaddrinfo(me, None)}
        except OSError:
            pass
    names.discard("")
    return frozenset(names)


class HostGuard:
    """ASGI middleware: 400 for a request whose `Host` is not one of `names`."""

    def __init__(self, app, names: frozenset[str]):
        self.app, self.names = app, names

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            raw = dict(scope.get("headers") or ()).get(b"host", b"").decode("latin-1")
            if host_of(raw) not in self.names:
                resp = PlainTextResponse(f"Host {raw[:100]!r} is not served here; open the "
                                         "viewer at the address `dualpath ui` printed",
                                         status_code=400)
                await resp(scope, receive, send)
                return
        await self.app(scope, receive, send)
