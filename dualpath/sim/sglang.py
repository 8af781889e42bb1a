"""The simulated server's SGLang dialect (SGLang 0.5.23, its wheel's source; paths under
sglang/srt/): the vLLM dialect's server (the same batching, /v1/models with `root` and
`max_model_len`, empty-200 /health), said as SGLang says it:

- /model_info and /server_info, and their deprecated /get_ aliases (`entrypoints/
  http_server.py`); no /version; /v1/models' cards owned by "sglang", rooted at the served
  name (`available_models`);
- /metrics in `sglang:` names (`observability/metrics_collector.py`): `prompt_tokens_total`
  counts cache hits too, `cached_tokens_total` one series per cache source,
  `num_running_reqs` / `num_queue_reqs` gauges;
- replies without `system_fingerprint`, the thinking in `reasoning_content`
  (`entrypoints/openai/protocol.py`, ChatMessage / DeltaMessage), any model name accepted
  (the chat handler does not check it);
- error bodies as `ErrorResponse` (object "error", message, type, param, code at the top,
  `entrypoints/openai/serving_base.py`), a prompt over the context said as
  `managers/tokenizer_manager.py` says it.
"""

from __future__ import annotations

import re

import orjson
from starlette.responses import PlainTextResponse, Response

_CONTEXT = re.compile(r"maximum context length is (\d+) tokens\. However, your prompt "
                      r"contains (\d+) input tokens")


def metrics_text(c, profile) -> str:
    """/metrics: the server's counters `c` under SGLang's names and labels."""
    label = f'model_name="{profile.model_alias}"'
    rows = [("num_running_reqs", "gauge", "", c.processing),
            ("num_queue_reqs", "gauge", "", c.deferred),
            ("prompt_tokens_total", "counter", ',is_streaming="true"',
             c.prompt_tokens + c.cached_tokens),
            ("generation_tokens_total", "counter", ',is_streaming="true"', c.predicted_tokens),
            ("cached_tokens_total", "counter", ',cache_source="device"', c.cached_tokens),
            ("num_requests_total", "counter", ',is_streaming="true"', c.requests)]
    out = []
    for name, kind, extra, value in rows:
        out += [f"# TYPE sglang:{name} {kind}", f"sglang:{name}{{{label}{extra}}} {float(value)}"]
    return "\n".join(out) + "\n"


def model_info(profile) -> dict:
    return {"model_path": f"/models/{profile.model_alias}", "served_model_name":
            profile.model_alias, "is_generation": True, "weight_version": "default",
            "reasoning_parser": "qwen3" if profile.reasoning_parser else None}


def models(profile, n_ctx: int, created: int) -> dict:
    """/v1/models as `available_models` writes it: one ModelCard (entrypoints/openai/
    protocol.py) owned by "sglang", its root the served name, no permission list."""
    return {"object": "list", "data": [{
        "id": profile.model_alias, "object": "model", "created": created,
        "owned_by": "sglang", "root": profile.model_alias, "parent": None,
        "max_model_len": n_ctx}]}


def server_info(profile, slots: int) -> dict:
    return {"model_path": f"/models/{profile.model_alias}",
            "served_model_name": profile.model_alias, "context_length": profile.n_ctx,
            "max_running_requests": slots, "enable_metrics": True,
            "speculative_algorithm": "EAGLE" if profile.speculative else None,
            "version": profile.build.removeprefix("sglang-"), "frontend": "python"}


def _said_as_sglang(obj: dict) -> dict:
    """A reply or stream chunk of the vLLM dialect as SGLang writes it."""
    obj.pop("system_fingerprint", None)
    for choice in obj.get("choices") or ():
        for part in (choice.get("message"), choice.get("delta")):
            if isinstance(part, dict) and "reasoning" in part:
                part["reasoning_content"] = part.pop("reasoning")
    err = obj.get("error")
    if isinstance(err, dict):          # ErrorResponse: the fields at the top
        message = err.get("message", "")
        if m := _CONTEXT.search(message):
            message = (f"The input ({m[2]} tokens) is longer than the model's context "
                       f"length ({m[1]} tokens).")
        obj = {"object": "error", "message": message, "type": "BadRequest"
               if err.get("code") == 400 else err.get("type"), "param": None,
               "code": err.get("code")}
    return obj


def _rewrite_event(line: bytes) -> bytes:
    if not line.startswith(b"data: {"):
        return line
    return b"data: " + orjson.dumps(_said_as_sglang(orjson.loads(line[6:])))


class SGLangApp:
    """ASGI: the vLLM-dialect app `inner`, answering as SGLang."""

    def __init__(self, inner, sim):
        self.inner, self.sim = inner, sim

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.inner(scope, receive, send)
        own = self._own(scope["path"])
        if own is not None:
            return await own(scope, receive, send)
        if scope["path"] != "/v1/chat/completions":
            return await self.inner(scope, receive, send)
        await self.inner(scope, _any_model(receive, self.sim.profile.model_alias),
                         _Rewriter(send).send)

    def _own(self, path: str):
        p = self.sim.profile
        if path in ("/model_info", "/get_model_info"):
            return Response(orjson.dumps(model_info(p)), media_type="application/json")
        if path in ("/server_info", "/get_server_info"):
            return Response(orjson.dumps(server_info(p, self.sim.slots)),
                            media_type="application/json")
        if path == "/metrics":
            return PlainTextResponse(metrics_text(self.sim.counters, p))
        if path == "/v1/models":
            return Response(orjson.dumps(models(p, self.sim.n_ctx_slot, int(self.sim.started))),
                            media_type="application/json")
        if path == "/version":
            return Response(b'{"detail":"Not Found"}', 404, media_type="application/json")
        return None


def _any_model(receive, alias: str):
    """The request with the served model's name: SGLang answers whatever `model` says."""
    async def wrapped():
        message = await receive()
        if message["type"] == "http.request" and not message.get("more_body"):
            try:
                body = orjson.loads(message.get("body") or b"")
                if isinstance(body, dict):
                    message = {**message, "body": orjson.dumps({**body, "model": alias})}
            except orjson.JSONDecodeError:
                pass
        return message
    return wrapped


class _Rewriter:
    """Rewrites each whole JSON reply, or each SSE event of a stream, on its way out."""

    def __init__(self, send):
        self._send, self._start, self._stream, self._buf = send, None, False, b""

    async def send(self, message):
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k != b"content-length"]
            self._stream = any(k == b"content-type" and v.startswith(b"text/event-stream")
                               for k, v in headers)
            self._start = {**message, "headers": headers}
            if self._stream:
                await self._send(self._start)
            return
        self._buf += message.get("body", b"")
        more = message.get("more_body", False)
        if self._stream:
            end = self._buf.rfind(b"\n\n")       # whole events only; the rest waits
            cut = (end + 2 if end >= 0 else 0) if more else len(self._buf)
            whole, self._buf = self._buf[:cut], self._buf[cut:]
            out = b"\n".join(_rewrite_event(line) for line in whole.split(b"\n"))
            await self._send({**message, "body": out})
        elif not more:
            body = orjson.dumps(_said_as_sglang(orjson.loads(self._buf))) if self._buf else b""
            headers = self._start["headers"] + [(b"content-length", str(len(body)).encode())]
            await self._send({**self._start, "headers": headers})
            await self._send({"type": "http.response.body", "body": body})
