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
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, AsyncIterator, Mapping, Protocol

import aiohttp
import httpx

from dualpath.retry import Fault, transport_fault

_DETAIL_MAX = 500
# what a call's wire can raise: anything else is a bug of the harness, and must not be
# recorded as the server's fault
_WIRE = (aiohttp.ClientError, OSError, asyncio.TimeoutError)


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


_EOL = re.compile(rb"\r\n|\r|\n")


def _split_lines(pending: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """Complete lines of `pending + chunk` (without their ends) and what is left over.

    Lines end at LF, CRLF or a lone CR, as server-sent events may; a CR that ends the data
    is kept back, since the LF that completes it may come with the next chunk."""
    data = pending + chunk
    if b"\r" not in data:
        *done, rest = data.split(b"\n")
        return done, rest
    keep = data.endswith(b"\r")
    *done, rest = _EOL.split(data[:-1] if keep else data)
    return done, rest + (b"\r" if keep else b"")


async def _lines_of(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The text lines of a body read as chunks."""
    pending = b""
    async for chunk in chunks:
        done, pending = _split_lines(pending, chunk)
        for line in done:
            yield line.decode(errors="replace")
    if pending:
        yield pending.rstrip(b"\r").decode(errors="replace")


# -- aiohttp: the hot path -------------------------------------------------------------------

def aiohttp_fault(e: BaseException, read_timeout_s: float) -> Fault:
    """A fault from an aiohttp (or asyncio) exception raised connecting, sending or reading."""
    name = f"{type(e).__name__}: {e}"[:_DETAIL_MAX]
    if isinstance(e, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)):
        return Fault("connect_error", name, True)
    if isinstance(e, (aiohttp.ServerTimeoutError, asyncio.TimeoutError)):
        return Fault("timeout", f"{type(e).__name__} after {read_timeout_s}s of silence", True)
    if isinstance(e, (aiohttp.ClientHttpProxyError, aiohttp.TooManyRedirects)):
        return Fault("transport_error", name, False)      # as httpx: not the server's fault
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
        except _WIRE as e:
            raise aiohttp_fault(e, self._read_timeout_s) from None

    def lines(self) -> AsyncIterator[str]:
        # the body's chunks split into lines here: aiohttp's own line reader refuses a
        # line longer than its buffer, and an event may carry a long answer
        return _lines_of(self._chunks())

    async def _chunks(self) -> AsyncIterator[bytes]:
        content = self._resp.content
        while True:
            try:
                chunk = await content.readany()
            except _WIRE as e:
                raise aiohttp_fault(e, self._read_timeout_s) from None
            if not chunk:
                return
            yield chunk


class AiohttpTransport:
    """One aiohttp session: a pool of `connections` kept-alive connections, one TLS context."""

    def __init__(self, connections: int, ssl_context: Any = None,
                 headers: Mapping[str, str] | None = None):
        # idle connections are dropped after 4 s, before llama-server's HTTP library
        # (cpp-httplib: 5 s by default) closes them: a request sent on a connection the
        # server has just closed fails as a reset and costs a retry with backoff
        connector = aiohttp.TCPConnector(limit=connections, limit_per_host=connections,
                                         ssl=ssl_context if ssl_context is not None else True,
                                         keepalive_timeout=4.0)
        # proxies from the environment (and NO_PROXY) are honoured as httpx, which carries
        # the control plane, honours them, but read once per server (`_proxy`): aiohttp's
        # trust_env reads them, and ~/.netrc, on every request, ~0.2 ms of CPU each, and
        # a netrc entry would clash with an API key's Authorization header
        self._session = aiohttp.ClientSession(connector=connector, headers=dict(headers or {}),
                                              skip_auto_headers=("User-Agent",))
        self._timeouts: dict[Timeouts, Any] = {}
        self._proxies: dict[tuple[str, str], str | None] = {}

    def _proxy(self, url: str) -> str | None:
        parts = urllib.parse.urlsplit(url)
        key = (parts.scheme, parts.netloc)
        if key not in self._proxies:
            proxy = urllib.request.getproxies().get(parts.scheme)
            if proxy and urllib.request.proxy_bypass(parts.hostname or ""):
                proxy = None
            self._proxies[key] = proxy
        return self._proxies[key]

    async def _send(self, url: str, payload: bytes, headers: Mapping[str, str],
                    timeouts: Timeouts):
        """The reply with its headers read. A redirect is a reply like any other (as httpx
        records it): following it would re-send the call as a GET without its body. Until
        the headers arrive the call is bounded by twice the read timeout: aiohttp starts its
        silence timer only once the body is written, so a server that stops reading would
        otherwise hold the call forever (httpx bounds each write by the same timeout)."""
        try:
            async with asyncio.timeout(2 * timeouts.read_s):
                return await self._session.post(url, data=payload, headers=headers,
                                                timeout=self._timeout(timeouts),
                                                allow_redirects=False, proxy=self._proxy(url))
        except TimeoutError as e:
            if isinstance(e, aiohttp.ClientError):
                raise aiohttp_fault(e, timeouts.read_s) from None
            raise Fault("timeout", f"no reply within {2 * timeouts.read_s:g}s (twice the read "
                        "timeout) of sending", True) from None
        except _WIRE as e:
            raise aiohttp_fault(e, timeouts.read_s) from None

    def _timeout(self, t: Timeouts):
        if t not in self._timeouts:
            # sock_connect, not connect: aiohttp's `connect` also counts the wait for a free
            # pooled connection, which is not the server failing to answer
            self._timeouts[t] = aiohttp.ClientTimeout(total=None, sock_connect=t.connect_s,
                                                      sock_read=t.read_s)
        return self._timeouts[t]

    async def post(self, url: str, payload: bytes, headers: Mapping[str, str],
                   timeouts: Timeouts) -> Reply:
        resp = await self._send(url, payload, headers, timeouts)
        try:
            return Reply(resp.status, resp.headers, await resp.read())
        except _WIRE as e:
            raise aiohttp_fault(e, timeouts.read_s) from None
        finally:
            resp.release()

    @contextlib.asynccontextmanager
    async def stream(self, url: str, payload: bytes, headers: Mapping[str, str],
                     timeouts: Timeouts) -> AsyncIterator[StreamReply]:
        resp = await self._send(url, payload, headers, timeouts)
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

    def lines(self) -> AsyncIterator[str]:
        # the same line splitting as the nights' transport (httpx's own splits at U+2028)
        return _lines_of(self._chunks())

    async def _chunks(self) -> AsyncIterator[bytes]:
        it = self._resp.aiter_bytes()
        while True:
            try:
                chunk = await it.__anext__()
            except StopAsyncIteration:
                return
            except httpx.HTTPError as e:
                raise transport_fault(e, self._read_timeout_s) from None
            yield chunk


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
