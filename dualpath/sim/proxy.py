"""A fault-injecting HTTP proxy on loopback, for fault trials of real nights.

It sits between dualpath and a (simulated or real) server and passes every request through,
except the chat requests it has been told to spoil. Faults are queued with `inject(kind, n)`
and applied to the next chat requests, one in every `every`, so that the retry of a spoiled
request (a new request with the same body) passes and shows whether the client retried:

    reset      close the connection with a TCP RST, no reply
    http500 / http429 / http503   an error reply (429 and 503 with Retry-After)
    hang       say nothing for `hang_s`, longer than the client's read timeout
    cut_json   a 200 whose JSON body stops half-way (Content-Length matching the cut body)
    cut_sse    a 200 event stream that stops after the finish_reason event, without its
               usage chunk and `[DONE]`
    overflow   a 400 `exceed_context_size_error`, as llama-server answers a too-long prompt
    huge_usage / typed_usage / abort   the server's own unstreamed answer, rewritten: usage
               completion_tokens 2**40, or "lots"; or cut half-way with finish_reason "abort"
               (llama-server's and vLLM's reason for a request ended before its end)
    think_cut / think_cut_parser   the same answer as a Qwen3.5/3.6 model cut at max_tokens
               while thinking (its template opened `<think>` in the prompt), in vLLM's
               words: without a reasoning parser the thinking is the content, with no tag at
               all; with `--reasoning-parser qwen3` (it starts in its reasoning state) it is
               all `reasoning`, the content null. Both end `length`, the completion count
               at the request's max_tokens; the thinking carries `THINKING_MARK` and the
               answer's own grade, drafted, so a thinking kept as the answer shows

The upstream can be changed while it runs (`upstream = ...`): a server swapped or restarted
behind the same port. One request per connection (`connection: close`), so a fault never
leaks into the next request.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import struct
import threading
import time
from collections import Counter
from urllib.parse import urlsplit

import orjson

THINK_CUTS = ("think_cut", "think_cut_parser")
REWRITES = ("huge_usage", "typed_usage", "abort", *THINK_CUTS)   # to the upstream's JSON answer
THINKING_MARK = "thinking-cut-at-max-tokens"
FAULTS = ("reset", "http500", "http429", "http503", "hang", "cut_json", "cut_sse", "overflow",
          *REWRITES)
TRANSIENT = frozenset(FAULTS) - {"overflow", "huge_usage", "typed_usage", *THINK_CUTS}
_CHAT = b"/v1/chat/completions"


def _reply(status: str, body: bytes, *extra: str, ctype: str = "application/json") -> bytes:
    head = [f"HTTP/1.1 {status}", f"content-type: {ctype}", f"content-length: {len(body)}",
            "connection: close", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _error(code: int, kind: str, message: str) -> bytes:
    return orjson.dumps({"error": {"code": code, "type": kind, "message": message}})


_COMPLETION = orjson.dumps({
    "id": "chatcmpl-cut", "object": "chat.completion", "created": 0, "model": "cut",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "FINAL GRADE: 3 (HOLD)"}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def _cut_thinking(kind: str, choice: dict, usage: dict, request: bytes) -> None:
    """`choice` as a reply cut at max_tokens inside a block its template opened (vLLM: the
    qwen3 parser's REASONING start state, vllm/parser/qwen3.py; no parser: the raw text)."""
    msg = choice.get("message") or {}
    thinking = (f"{THINKING_MARK}: the prompt opened the block; a draft before the answer:\n"
                f"{msg.get('content') or ''}\nchecking it again")
    if kind == "think_cut":
        msg.update(content=thinking)
    else:
        msg.update(content=None, reasoning=thinking)
    choice["message"], choice["finish_reason"] = msg, "length"
    try:
        cap = orjson.loads(request).get("max_tokens")
    except (orjson.JSONDecodeError, AttributeError):
        cap = None
    if isinstance(cap, int):
        usage["completion_tokens"] = cap
        usage["total_tokens"] = (usage.get("prompt_tokens") or 0) + cap
        if kind == "think_cut_parser":
            usage["completion_tokens_details"] = {"reasoning_tokens": cap}


def _rewrite(kind: str, reply: bytes, request: bytes = b"") -> bytes:
    """An upstream JSON reply with its usage or its end spoiled; any other reply unchanged.
    `request`: the chat request's body (its max_tokens)."""
    head, sep, body = reply.partition(b"\r\n\r\n")
    try:
        obj = orjson.loads(body)
        usage, choice = obj.get("usage") or {}, obj["choices"][0]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError):
        return reply
    if kind == "huge_usage":
        usage["completion_tokens"] = 2 ** 40
    elif kind == "typed_usage":
        usage["completion_tokens"] = "lots"
    elif kind in THINK_CUTS:
        _cut_thinking(kind, choice, usage, request)
    else:
        msg = choice.get("message") or {}
        msg["content"] = (msg.get("content") or "")[:len(msg.get("content") or "") // 2]
        choice["finish_reason"] = "abort"
    obj["usage"] = usage
    new = orjson.dumps(obj)
    lines = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"content-length:")]
    return b"\r\n".join([*lines, f"content-length: {len(new)}".encode()]) + sep + new


def _event(obj: dict) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


class FaultProxy:
    """Context manager: a proxy in a background thread; `url` is where clients connect."""

    def __init__(self, upstream: str, hang_s: float = 3.0, every: int = 3):
        self.upstream = upstream
        self.hang_s = hang_s
        self.every = every
        self.url = ""
        self.injected: Counter = Counter()      # kind -> faults applied
        self.chat_requests = 0
        self.requests: Counter = Counter()      # endpoint -> requests
        self.authorized: Counter = Counter()    # endpoint -> requests with Authorization
        self._queue: list[str] = []
        self._spoiled: dict[str, str] = {}      # body hash -> fault kind
        self._seen: Counter = Counter()         # body hash -> times seen
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="fault-proxy")
        self._ready = threading.Event()
        self._tasks: set[asyncio.Task] = set()

    # --- control, from any thread ---
    def inject(self, kind: str, n: int = 1) -> None:
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULTS}")
        with self._lock:
            self._queue += [kind] * n

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def retried(self) -> Counter:
        """Per kind: spoiled requests whose same body came again (the client retried)."""
        with self._lock:
            return Counter(k for h, k in self._spoiled.items() if self._seen[h] > 1)

    def reset_counts(self) -> None:
        with self._lock:
            self.injected.clear()
            self._spoiled.clear()
            self._seen.clear()

    # --- lifecycle ---
    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault proxy did not start")
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=1024))
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            pending = asyncio.all_tasks(self._loop)   # connections still open (a hang)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    # --- one connection ---
    def _note_auth(self, target: bytes, lines: list[bytes]) -> None:
        """Count requests per endpoint, and those that carried an Authorization header."""
        endpoint = target.split(b"?")[0].decode(errors="replace")
        has = any(ln.lower().startswith(b"authorization:") for ln in lines[1:])
        with self._lock:
            self.requests[endpoint] += 1
            self.authorized[endpoint] += has

    def _fault_for(self, target: bytes, body: bytes) -> str | None:
        if not target.startswith(_CHAT):
            return None
        h = hashlib.blake2b(body, digest_size=8).hexdigest()
        with self._lock:
            self.chat_requests += 1
            self._seen[h] += 1
            if not self._queue or self.chat_requests % self.every or self._seen[h] > 1:
                return None
            kind = self._queue.pop(0)
            self.injected[kind] += 1
            self._spoiled[h] = kind
            return kind

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # asyncio keeps only a weak hold on a connection's handler: a client that vanishes
        # mid-request would leave it to the garbage collector, pending
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head[:-4].split(b"\r\n")
            target = lines[0].split(b" ")[1]
            length = next((int(v) for k, _, v in (ln.partition(b":") for ln in lines[1:])
                           if k.strip().lower() == b"content-length"), 0)
            body = await reader.readexactly(length)
            self._note_auth(target, lines)
            fault = self._fault_for(target, body)
            if fault is None or fault in REWRITES:
                await self._forward(lines, body, writer, fault)
            else:
                await self._spoil(fault, body, writer)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                OSError, IndexError, ValueError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _forward(self, lines: list[bytes], body: bytes, writer,
                       rewrite: str | None = None) -> None:
        up = urlsplit(self.upstream)
        try:
            ur, uw = await asyncio.open_connection(up.hostname, up.port)
        except OSError:
            _abort(writer)      # as the client would see a dead server behind the proxy
            return
        keep = [ln for ln in lines[1:] if not ln.lower().startswith((b"connection:", b"host:"))]
        req = b"\r\n".join([lines[0], f"host: {up.hostname}:{up.port}".encode(), *keep,
                            b"connection: close"]) + b"\r\n\r\n" + body
        try:
            uw.write(req)
            await uw.drain()
            if rewrite is not None:             # the whole answer, then spoiled
                writer.write(_rewrite(rewrite, await ur.read(-1), body))
                await writer.drain()
            while chunk := await ur.read(65536):
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            _abort(writer)      # the server died mid-answer: the client sees a reset
        finally:
            uw.close()

    async def _spoil(self, kind: str, body: bytes, writer) -> None:
        if kind == "reset":
            _abort(writer)
        elif kind == "hang":
            await asyncio.sleep(self.hang_s)
        elif kind == "http500":
            writer.write(_reply("500 Internal Server Error", _error(500, "server_error",
                                                                    "injected 500")))
        elif kind == "http429":
            writer.write(_reply("429 Too Many Requests", _error(429, "rate_limited",
                                                                "injected 429"), "retry-after: 1"))
        elif kind == "http503":
            writer.write(_reply("503 Service Unavailable", _error(503, "unavailable_error",
                                                                  "Loading model"), "retry-after: 1"))
        elif kind == "overflow":
            writer.write(_reply("400 Bad Request", _error(
                400, "exceed_context_size_error",
                "request (40000 tokens) exceeds the available context size (32768 tokens)")))
        elif kind == "cut_json":
            cut = _COMPLETION[:len(_COMPLETION) // 2]
            writer.write(_reply("200 OK", cut))
        elif kind == "cut_sse":
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "cut"}
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         b"connection: close\r\n\r\n")
            writer.write(_event({**chunk, "choices": [{"index": 0, "finish_reason": None,
                                                        "delta": {"content": "FINAL GRADE: 3"}}]}))
            writer.write(_event({**chunk, "choices": [{"index": 0, "finish_reason": "stop",
                                                        "delta": {}}]}))
        if not writer.is_closing():
            await writer.drain()


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0): a connection reset, not a clean end."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


def wait_until(pred, timeout_s: float = 30.0, every_s: float = 0.01) -> bool:
    """Poll `pred` until true or the timeout; True if it became true."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(every_s)
    return bool(pred())
