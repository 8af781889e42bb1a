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
import time
import types
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
    """Seconds to connect; the longest silence while reading a reply; the longest a reply may
    take from its first byte to its last (`call_s`); and the longest wait for that first byte
    (`wait_s`: a request in the server's queue gets no byte until a slot takes it).

    Before the first byte, silence is the server's, not the connection's: a request waiting
    in the server's queue fails for silence only when the server has sent nothing on any of
    this transport's calls to it for `read_s`."""

    connect_s: float
    read_s: float
    call_s: float | None = None
    wait_s: float | None = None


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
        return Fault("connect_error", name, True, no_server=True)
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
    def __init__(self, resp, timeouts: Timeouts, heard: "_Heard"):
        self._resp, self._t, self._heard = resp, timeouts, heard
        self.status = resp.status
        self.headers = resp.headers
        # the reply's whole body is due within call_s of its first byte (now)
        self._due = None if timeouts.call_s is None else time.monotonic() + timeouts.call_s

    async def _bounded(self, aw):
        """`aw` within the read timeout of silence and the reply's deadline."""
        limit, why = self._t.read_s, f"after {self._t.read_s}s of silence"
        if self._due is not None and self._due - time.monotonic() < limit:
            limit = self._due - time.monotonic()
            why = f"reply not whole within {self._t.call_s:g}s of its first byte (call_timeout_s)"
        try:
            async with asyncio.timeout(max(limit, 0.0)):
                out = await aw
        except TimeoutError:
            raise Fault("timeout", why, True) from None
        except _WIRE as e:
            raise aiohttp_fault(e, self._t.read_s) from None
        self._heard.now()
        return out

    async def read(self) -> bytes:
        return await self._bounded(self._resp.read())

    def lines(self) -> AsyncIterator[str]:
        # the body's chunks split into lines here: aiohttp's own line reader refuses a
        # line longer than its buffer, and an event may carry a long answer
        return _lines_of(self._chunks())

    async def _chunks(self) -> AsyncIterator[bytes]:
        content = self._resp.content
        while True:
            chunk = await self._bounded(content.readany())
            if not chunk:
                return
            yield chunk


class _Heard:
    """When a server last sent this transport anything (any call's byte)."""

    __slots__ = ("at",)

    def __init__(self):
        self.at = 0.0

    def now(self) -> None:
        self.at = time.monotonic()


async def _on_reuse(session, ctx, params) -> None:
    if ctx.trace_request_ctx is not None:
        ctx.trace_request_ctx.reused = True


# a request sent on a kept-alive connection the server had already closed fails with one of
# these before any byte of a reply: it is sent again at once on another connection
_STALE = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


def _unanswered(f: Fault) -> Fault:
    """A reset before any byte of a reply on a connection opened for this request: nothing
    is there to answer (a server killed and not yet listening again, or a proxy in front of
    one), so the client waits for it like for a refused connection (`Fault.no_server`)."""
    if f.kind == "connection_reset":
        f.no_server = True
    return f


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
        # a connection taken from the pool is noted (`_on_reuse`): a reset on it before any
        # reply is the server having closed it while idle, not a fault (see `_send`)
        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(_on_reuse)
        self._session = aiohttp.ClientSession(connector=connector, headers=dict(headers or {}),
                                              skip_auto_headers=("User-Agent",),
                                              trace_configs=[trace])
        self._connections = connections
        self._timeouts: dict[Timeouts, Any] = {}
        self._proxies: dict[tuple[str, str], str | None] = {}
        self._heard: dict[str, _Heard] = {}
        self.stale_reopened = 0    # requests sent again after a closed kept-alive connection

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
        records it): following it would re-send the call as a GET without its body.

        Until the first byte the call waits on the server, which sends nothing while the
        request is queued: it fails for silence only once the server has been silent on
        every call to it for the read timeout (`_first_byte`). A request that meets a
        kept-alive connection the server has closed is sent again at once on another (up to
        the pool's size, then a fresh one): no backoff, no fault."""
        heard = self._heard.get(url) or self._heard.setdefault(url, _Heard())
        for _ in range(self._connections + 1):
            ctx = types.SimpleNamespace(reused=False)
            try:
                resp = await self._first_byte(self._session.post(
                    url, data=payload, headers=headers, timeout=self._timeout(timeouts),
                    allow_redirects=False, proxy=self._proxy(url), trace_request_ctx=ctx),
                    timeouts, heard)
            except _STALE as e:
                if not ctx.reused:
                    raise _unanswered(aiohttp_fault(e, timeouts.read_s)) from None
                self.stale_reopened += 1
                continue
            except _WIRE as e:
                fault = aiohttp_fault(e, timeouts.read_s)
                raise (fault if ctx.reused else _unanswered(fault)) from None
            heard.now()
            return resp
        raise Fault("connection_reset", "every pooled connection was closed by the server", True)

    async def _first_byte(self, request, t: Timeouts, heard: _Heard):
        """The reply's headers: waiting while the server speaks to any call of ours, up to
        `wait_s` in all; failing after `read_s` of the server's silence."""
        task = asyncio.ensure_future(request)
        sent = time.monotonic()
        try:
            while True:
                now = time.monotonic()
                left = max(sent, heard.at) + t.read_s - now
                if t.wait_s is not None:
                    left = min(left, sent + t.wait_s - now)
                if left <= 0:
                    break
                done, _ = await asyncio.wait((task,), timeout=left)
                if done:
                    return task.result()
        except BaseException:
            if task.done() and not task.cancelled():
                # ended while this call was being cancelled (a unit's end, the night's): its
                # error is taken here, or asyncio prints it unseen ("Task exception was never
                # retrieved"), and a reply that came is released to the pool
                if task.exception() is None:
                    task.result().release()
            raise
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if t.wait_s is not None and time.monotonic() >= sent + t.wait_s:
            raise Fault("timeout", f"no reply within {t.wait_s:g}s of sending (the wait for "
                        "a slot, bounded by call_timeout_s x (1 + queue_depth))", True)
        raise Fault("timeout", f"no reply, and the server silent on every call for "
                    f"{t.read_s}s", True)

    def _timeout(self, t: Timeouts):
        if t not in self._timeouts:
            # sock_connect, not connect: aiohttp's `connect` also counts the wait for a free
            # pooled connection, which is not the server failing to answer; no sock_read:
            # silence is timed here, from the server's side until the first byte
            self._timeouts[t] = aiohttp.ClientTimeout(total=None, sock_connect=t.connect_s)
        return self._timeouts[t]

    async def post(self, url: str, payload: bytes, headers: Mapping[str, str],
                   timeouts: Timeouts) -> Reply:
        resp = await self._send(url, payload, headers, timeouts)
        try:
            body = await _AiohttpStream(resp, timeouts, self._heard[url]).read()
            return Reply(resp.status, resp.headers, body)
        finally:
            resp.release()

    @contextlib.asynccontextmanager
    async def stream(self, url: str, payload: bytes, headers: Mapping[str, str],
                     timeouts: Timeouts) -> AsyncIterator[StreamReply]:
        resp = await self._send(url, payload, headers, timeouts)
        try:
            yield _AiohttpStream(resp, timeouts, self._heard[url])
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
