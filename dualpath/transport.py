"""How chat calls travel: one POST, its reply read whole or as server-sent-event lines.

Nights send calls through aiohttp (`AiohttpTransport`): its C HTTP parser and lean
connection pool cost ~0.12 ms of client CPU per streamed call against ~0.72 ms through
httpx on the same loopback server (8 in flight, 24 KB prompts), and a 100-ticker night
makes ~7k calls per path on the machine that also runs the servers. httpx stays for the
control plane (identity, /metrics, health), where a call's cost does not matter, and its
`MockTransport` drives the client's unit tests through `HttpxTransport`.

A transport raises nothing but `dualpath.retry.Fault` for what happened on the wire, so
the client sorts failures the same way whichever library carried them.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any, AsyncIterator, Mapping, Protocol

import httpx

from dualpath.retry import Fault, transport_fault

_DETAIL_MAX = 500


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds to connect, and the longest silence while reading a reply."""

    connect_s: float
    read_s: float


@dataclass(slots=True)
class Reply:
    """A whole reply."""

    status: int
    headers: Mapping[str, str]     # case-insensitive `get`
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")


class StreamReply(Protocol):
    status: int
    headers: Mapping[str, str]

    async def read(self) -> bytes: ...

    def lines(self) -> AsyncIterator[str]: ...


class Transport(Protocol):
    async def post(self, url: str, payload: bytes, headers: Mapping[str, str],
                   timeouts: Timeouts) -> Reply: ...

    def stream(self, url: str, payload: bytes, headers: Mapping[str, str],
               timeouts: Timeouts) -> contextlib.AbstractAsyncContextManager[StreamReply]: ...

    async def aclose(self) -> None: ...


def _split_lines(pending: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines of `pending + chunk` (without their ends) and what is left over."""
    data = pending + chunk
    *done, rest = data.split(b"\n")
    return done, rest


# -- aiohttp: the hot path -------------------------------------------------------------------

def aiohttp_fault(e: BaseException, read_timeout_s: float) -> Fault:
    """A fault from an aiohttp (or asyncio) exception raised connecting, sending or reading."""
    import aiohttp

    name = f"{type(e).__name__}: {e}"[:_DETAIL_MAX]
    if isinstance(e, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)):
        return Fault("connect_error", name, True)
    if isinstance(e, (aiohttp.ServerTimeoutError, asyncio.TimeoutError)):
        return Fault("timeout", f"{type(e).__name__} after {read_timeout_s}s of silence", True)
    if isinstance(e, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError,
                      aiohttp.ClientOSError, aiohttp.ClientResponseError, ConnectionError)):
        # a reset, a connection closed before the whole reply arrived, or a reply that
        # is not HTTP at all (the parser's error)
        return Fault("connection_reset", name, True)
    return Fault("transport_error", name, False)


class _AiohttpStream:
    def __init__(self, resp, read_timeout_s: float):
        self._resp, self._read_timeout_s = resp, read_timeout_s
        self.status = resp.status
        self.headers = resp.headers

    async def read(self) -> bytes:
        try:
            return await self._resp.read()
        except Exception as e:
            raise aiohttp_fault(e, self._read_timeout_s) from None

    async def lines(self) -> AsyncIterator[str]:
        # the body's chunks split into lines here: aiohttp's own line reader refuses a
        # line longer than its buffer, and an event may carry a long answer
        pending = b""
        content = self._resp.content
        while True:
            try:
                chunk = await content.readany()
            except Exception as e:
                raise aiohttp_fault(e, self._read_timeout_s) from None
            if not chunk:
                break
            done, pending = _split_lines(pending, chunk)
            for line in done:
                yield line.rstrip(b"\r").decode(errors="replace")
        if pending:
            yield pending.rstrip(b"\r").decode(errors="replace")


class AiohttpTransport:
    """One aiohttp session: a pool of `connections` kept-alive connections, one TLS context."""

    def __init__(self, connections: int, ssl_context: Any = None,
                 headers: Mapping[str, str] | None = None):
        import aiohttp

        self._aiohttp = aiohttp
        # idle connections are dropped after 4 s, before llama-server's HTTP library
        # (cpp-httplib: 5 s by default) closes them: a request sent on a connection the
        # server has just closed fails as a reset and costs a retry with backoff
        connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections,
                                         ssl=ssl_context if ssl_context is not None else True,
                                         keepalive_timeout=4.0)
        # trust_env: proxies from the environment (and NO_PROXY) as httpx, which carries the
        # control plane, honours them: both reach a server the same way
        self._session = aiohttp.ClientSession(connector=connector, headers=dict(headers or {}),
                                              trust_env=True,
                                              skip_auto_headers=("User-Agent",))
        self._timeouts: dict[Timeouts, Any] = {}

    def _timeout(self, t: Timeouts):
        if t not in self._timeouts:
            # sock_connect, not connect: aiohttp's `connect` also counts the wait for a free
            # pooled connection, which is not the server failing to answer
            self._timeouts[t] = self._aiohttp.ClientTimeout(total=None, sock_connect=t.connect_s,
                                                            sock_read=t.read_s)
        return self._timeouts[t]

    async def post(self, url: str, payload: bytes, headers: Mapping[str, str],
                   timeouts: Timeouts) -> Reply:
        try:
            async with self._session.post(url, data=payload, headers=headers,
                                          timeout=self._timeout(timeouts)) as resp:
                return Reply(resp.status, resp.headers, await resp.read())
        except Fault:
            raise
        except Exception as e:
            raise aiohttp_fault(e, timeouts.read_s) from None

    @contextlib.asynccontextmanager
    async def stream(self, url: str, payload: bytes, headers: Mapping[str, str],
                     timeouts: Timeouts) -> AsyncIterator[StreamReply]:
        try:
            resp = await self._session.post(url, data=payload, headers=headers,
                                            timeout=self._timeout(timeouts))
        except Exception as e:
            raise aiohttp_fault(e, timeouts.read_s) from None
        try:
            yield _AiohttpStream(resp, timeouts.read_s)
        finally:
            resp.release()

    async def aclose(self) -> None:
        await self._session.close()

    async def __aenter__(self) -> "AiohttpTransport":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


# -- httpx: unit tests (MockTransport) and callers that hand over an httpx client ------------

class _HttpxStream:
    def __init__(self, resp: httpx.Response, read_timeout_s: float):
        self._resp, self._read_timeout_s = resp, read_timeout_s
        self.status = resp.status_code
        self.headers = resp.headers

    async def read(self) -> bytes:
        try:
            return await self._resp.aread()
        except httpx.HTTPError as e:
            raise transport_fault(e, self._read_timeout_s) from None

    async def lines(self) -> AsyncIterator[str]:
        it = self._resp.aiter_lines()
        while True:
            try:
                line = await it.__anext__()
            except StopAsyncIteration:
                return
            except httpx.HTTPError as e:
                raise transport_fault(e, self._read_timeout_s) from None
            yield line


class HttpxTransport:
    """An httpx client seen as a transport (it is not closed here: its owner closes it)."""

    def __init__(self, client: httpx.AsyncClient):
        self.client = client

    async def post(self, url: str, payload: bytes, headers: Mapping[str, str],
                   timeouts: Timeouts) -> Reply:
        try:
            r = await self.client.post(url, content=payload, headers=headers,
                                       timeout=httpx.Timeout(timeouts.read_s,
                                                             connect=timeouts.connect_s))
        except httpx.HTTPError as e:
            raise transport_fault(e, timeouts.read_s) from None
        return Reply(r.status_code, r.headers, r.content)

    @contextlib.asynccontextmanager
    async def stream(self, url: str, payload: bytes, headers: Mapping[str, str],
                     timeouts: Timeouts) -> AsyncIterator[StreamReply]:
        req = self.client.build_request("POST", url, content=payload, headers=headers,
                                        timeout=httpx.Timeout(timeouts.read_s,
                                                              connect=timeouts.connect_s))
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.HTTPError as e:
            raise transport_fault(e, timeouts.read_s) from None
        try:
            yield _HttpxStream(resp, timeouts.read_s)
        finally:
            await resp.aclose()

    async def aclose(self) -> None:
        pass


def as_transport(http: Any) -> Transport:
    """`http` as a transport: an httpx client is wrapped, a transport is kept."""
    return HttpxTransport(http) if isinstance(http, httpx.AsyncClient) else http
