"""A simulated serving engine: the same HTTP API, a modelled clock, a synthetic answer model.

It speaks one of two dialects (`SimProfile.dialect`):

- llama.cpp: `POST /v1/chat/completions` (streaming and not, with `timings`, `usage`,
  `system_fingerprint` = build), `GET /props`, `/slots`, `/health`, `/v1/models`, `/metrics`
  (`llamacpp:` names). Like llama-server in single-model mode it accepts any `model` name
  and answers with its own alias, so a client must check identity itself.
- vllm (as vLLM 0.33's source has it): the same chat endpoint with no `timings`,
  `system_fingerprint` = `vllm-<version>-<config hash>` (on a whole response, and in a stream
  on the usage chunk), `usage.prompt_tokens_details.cached_tokens` only with the profile's
  `prompt_tokens_details` (--enable-prompt-tokens-details), `metrics{...}` only with
  `per_request_metrics` (--enable-per-request-metrics), 404 for an unknown model name;
  `GET /version`, `/v1/models` (with `root` and `max_model_len`), `/health` (empty 200),
  `/metrics` (`vllm:` names with a `model_name` label; `prompt_tokens_total` counts cache
  hits, `prompt_tokens_cached_total` holds them; `spec_decode_*` only when speculative); no
  `/props` or `/slots`. Sampling arrives under vLLM's names (`repetition_penalty`,
  `response_format` for JSON schemas).

At most `slots` requests are processed at once; the rest wait (counted as deferred), slots
taken, waited for (`id_slot`) and handed on as llama-server does (`dualpath.sim.slots`).

The server answers with short texts: token counts and timings follow the time model, not the
length of the text on the wire (documented in the response's `timings` as usual).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import date

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from dualpath.config import SimProfile
from dualpath.grades import GRADE_INSTRUCTION, LABELS
from dualpath.sim import dialect, llama_options
from dualpath.sim import sglang as sglang_dialect
from dualpath.sim import vllm as vllm_dialect
from dualpath.sim.dialect import Reply
# a request's life on a slot lives in sim.lifecycle; its names stay importable from here
from dualpath.sim.lifecycle import (_HEADER, _SERVER_DEFAULTS, _begin, _finish,  # noqa: F401
                                    _intake, _process, _stalls, _stream)
from dualpath.sim.model import SimModel
from dualpath.sim.running import RunningServer, serve_in_thread  # noqa: F401 (re-exported)
from dualpath.sim.slots import ServerSlots


def _json(obj, status: int = 200) -> Response:
    return Response(orjson.dumps(obj), status_code=status, media_type="application/json")


def _error(status: int, kind: str, message: str) -> Response:
    return _json({"error": {"code": status, "type": kind, "message": message}}, status)


@dataclass
class _Counters:
    prompt_tokens: int = 0           # processed (prefill), as llama-server counts them
    cached_tokens: int = 0
    prompt_seconds: float = 0.0
    predicted_tokens: int = 0
    predicted_seconds: float = 0.0
    cached_tokens: int = 0
    requests: int = 0
    processing: int = 0
    peak_processing: int = 0
    deferred: int = 0


@dataclass
class SimServer:
    """State of one simulated server; `build_app` wraps it in HTTP routes."""

    profile: SimProfile
    slots: int = 4
    loading_s: float = 0.0
    market_start: date = date(2027, 1, 4)
    counters: _Counters = field(default_factory=_Counters)
    log_path: str | None = None        # launch/release lines, as llama-server logs them

    def __post_init__(self):
        self.model = SimModel(self.profile, self.market_start)
        self.started = time.monotonic()
        # llama-server pads each slot's context; vLLM checks max_model_len per request
        self.n_ctx_slot = (self.profile.n_ctx if self.vllm else
                           dialect.n_ctx_per_slot(self.profile.n_ctx, self.slots))
        log = open(self.log_path, "a", encoding="utf-8") if self.log_path else None
        p = self.profile
        self.queue = ServerSlots(self.slots, log=log, ram_cache=p.cache_ram,
                                 save_s_per_kb=p.cache_save_ms_per_kb / 1e3 * p.time_scale)
        # as llama-server's /slots: a slot shows `id_task` and `params` once it ran a task
        self._params: list[dict | None] = [None] * self.slots
        self._task_ids = [0] * self.slots
        self._tasks = 0

    @property
    def loading(self) -> bool:
        return time.monotonic() - self.started < self.loading_s

    def props(self) -> dict:
        return {
            "default_generation_settings": {
                "n_ctx": self.n_ctx_slot,
                "params": {**_SERVER_DEFAULTS, "speculative.types":
                           "draft" if self.profile.speculative else "none"}},
            "total_slots": self.slots,
            "model_alias": self.profile.model_alias,
            "model_path": f"/models/{self.profile.model_alias}.gguf",
            "build_info": self.profile.build,
            "modalities": {"vision": False, "video": False, "audio": False},
            "endpoint_slots": True, "endpoint_props": False,
            "endpoint_metrics": self.profile.metrics, "is_sleeping": False,
        }

    def slot_list(self) -> list[dict]:
        return [{"id": i, "n_ctx": self.n_ctx_slot, "speculative": self.profile.speculative,
                 "is_processing": self.queue.slots[i].busy,
                 **({"id_task": self._task_ids[i], "params": self._params[i]}
                    if self._params[i] is not None else {})}
                for i in range(self.slots)]

    @property
    def vllm(self) -> bool:
        return self.profile.dialect in ("vllm", "sglang")   # sglang: vLLM's, said as SGLang

    @property
    def fingerprint(self) -> str | None:
        """`system_fingerprint`: llama-server's build, or vLLM's (`dualpath.sim.vllm`)."""
        return vllm_dialect.fingerprint(self.profile) if self.vllm else self.profile.build

    def metrics_text(self) -> str:
        if self.vllm:
            return vllm_dialect.metrics_text(self.counters, self.profile)
        c = self.counters
        rows = [("prompt_tokens_total", "counter", c.prompt_tokens),
                ("prompt_seconds_total", "counter", round(c.prompt_seconds, 6)),
                ("tokens_predicted_total", "counter", c.predicted_tokens),
                ("tokens_predicted_seconds_total", "counter", round(c.predicted_seconds, 6)),
                ("prompt_tokens_cached_total", "counter", c.cached_tokens),
                # not a real llama-server counter (tests/test_contract_llama.py names it):
                # restart detection in the simulated fault tests leans on it
                ("n_requests_total", "counter", c.requests),
                ("requests_processing", "gauge", c.processing),
                ("requests_deferred", "gauge", c.deferred)]
        out = []
        for name, kind, value in rows:
            out += [f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {value}"]
        return "\n".join(out) + "\n"

    async def acquire(self, text: str = "", want: int | None = None) -> int:
        """A slot for a request, chosen (or waited for: `want` is llama-server's `id_slot`)
        as llama-server chooses it (`dualpath.sim.slots`)."""
        c = self.counters
        c.deferred += 1
        try:
            slot = await self.queue.acquire(text, want)
        finally:
            c.deferred -= 1
        c.processing += 1
        c.peak_processing = max(c.peak_processing, c.processing)
        return slot

    def release(self, slot: int, n_tokens: int = 0) -> None:
        self.counters.processing -= 1
        self.queue.release(slot, n_tokens)

    def reply(self, body: dict, text: str, rng, runaway: bool, n_out: int) -> Reply:
        """The answer and, when the model thinks on this request, its thinking."""
        answer = self.answer(body, text, rng, runaway)
        return dialect.reply(self.profile, body, _HEADER.search(text), answer, runaway, n_out)

    def answer(self, body: dict, text: str, rng, runaway: bool) -> str:
        """The completion text: a grade for the final-grade call, a short note otherwise."""
        header = _HEADER.search(text)
        ticker = header[1] if header else "?"
        constrained = "json_schema" in body or "response_format" in body
        if not text.endswith(GRADE_INSTRUCTION) and not constrained:
            stance = ("bullish", "neutral", "bearish")[rng.randrange(3)]
            return f"Synthetic analysis of {ticker}: the evidence looks {stance}. " * (1 + runaway)
        if runaway:
            return "Weighing the arguments once more, and again, and again " * 4
        night = date.fromisoformat(header[2]) if header else None
        grade = self.model.grade(rng, ticker, night)
        if rng.random() < self.profile.malformed_share:
            return f"On balance I would lean {LABELS[grade].lower()} on {ticker}."
        if constrained:
            return orjson.dumps({"grade": grade}).decode()
        return f"Weighing the desks' views on {ticker}.\nFINAL GRADE: {grade} ({LABELS[grade]})"


def _messages_text(body: dict) -> str | None:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        return None
    parts = []
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            return None
        parts.append(m["content"])
    return "\n".join(parts)


def build_app(sim: SimServer) -> Starlette:
    """HTTP routes over a `SimServer`."""

    async def health(_: Request) -> Response:
        if sim.loading:
            return _error(503, "unavailable_error", "Loading model")
        return _json({"status": "ok"})

    async def props(_: Request) -> Response:
        return _json(sim.props())

    async def slots(_: Request) -> Response:
        return _json(sim.slot_list())

    async def models(_: Request) -> Response:
        if sim.vllm:
            return _json({"object": "list", "data": [{
                "id": sim.profile.model_alias, "object": "model", "created": int(sim.started),
                "owned_by": "vllm", "root": f"/models/{sim.profile.model_alias}",
                "parent": None, "max_model_len": sim.n_ctx_slot, "permission": []}]})
        return _json({"object": "list", "data": [{
            "id": sim.profile.model_alias, "object": "model", "owned_by": "llamacpp",
            "meta": {"n_ctx_train": sim.profile.n_ctx}}]})

    async def version(_: Request) -> Response:
        return _json({"version": sim.profile.build.removeprefix("vllm-")})

    async def metrics(_: Request) -> Response:
        if not sim.vllm and not sim.profile.metrics:      # llama-server without --metrics
            return _json(dialect.METRICS_OFF, 501)
        return PlainTextResponse(sim.metrics_text())

    async def chat(request: Request) -> Response:
        if sim.loading:
            return _error(503, "unavailable_error", "Loading model")
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _json(dialect.error(sim.vllm, 400, "body is not JSON"), 400)
        text = _messages_text(body) if isinstance(body, dict) else None
        if text is None:
            return _json(dialect.error(sim.vllm, 400, "Expected 'messages' to be an array of "
                                       "{role, content} objects with string content"), 400)
        if sim.vllm and body.get("model") != sim.profile.model_alias:
            return _json(dialect.model_not_found(body.get("model")), 404)
        # an id_slot past the last slot wraps around, as llama-server's does (sim.slots)
        body["id_slot"] = llama_options.slot_of(body.get("id_slot"))
        if not sim.vllm and (bad := llama_options.reasoning_format_error(body)) is not None:
            return _json(bad, 500)
        rln = body.get("repeat_last_n", 64)
        if not isinstance(rln, int) or rln < 0:   # as llama-server validates it
            return _error(400, "invalid_request_error", "Field 'repeat_last_n': Value must be "
                          f"between 0 <= value <= 2147483647, but got {rln}")
        prompt_n = len(text) // 4 + sim.profile.context_tokens
        max_tokens, problem = dialect.output_room(sim.n_ctx_slot, sim.vllm, body, prompt_n)
        if problem is not None:
            return _json(problem, problem["error"]["code"])
        if not sim.vllm:
            max_tokens = llama_options.slot_room(max_tokens, sim.n_ctx_slot, prompt_n)
        rng = sim.model.rng(body.get("seed"), len(text))
        n_out, runaway = sim.model.output_tokens(rng, max_tokens)
        meta = {"id": f"chatcmpl-{uuid.uuid4().hex[:24]}", "created": int(time.time()),
                "model": sim.profile.model_alias,   # llama-server answers with its own alias
                # vLLM stamps it on a whole response and a stream's last chunk only
                "system_fingerprint": sim.fingerprint}
        reply = sim.reply(body, text, rng, runaway, n_out)
        if not sim.vllm:
            reply, n_out, runaway = llama_options.apply_stop(body, reply, n_out, runaway)
        if body.get("stream"):
            return StreamingResponse(
                _stream(sim, body, text, prompt_n, n_out, runaway, reply, meta),
                media_type="text/event-stream")
        timings, usage, metrics = await _process(sim, body, text, prompt_n, n_out)
        usage.update(dialect.reasoning_usage(sim.profile, body, reply.thinking_tokens))
        choice = {"index": 0, "finish_reason": "length" if runaway else "stop",
                  "message": dialect.message(sim.profile, body, reply.answer, reply.thinking)}
        if not sim.vllm and (lp := llama_options.logprobs(body, reply.answer, body.get("seed"))):
            choice["logprobs"] = lp
        out = {**meta, "object": "chat.completion", "choices": [choice], "usage": usage}
        if not sim.vllm:
            out["timings"] = timings
        elif metrics:
            out["metrics"] = metrics
        return _json(out)

    async def vllm_health(_: Request) -> Response:
        return Response(b"", status_code=503 if sim.loading else 200)

    common = [Route("/v1/models", models), Route("/metrics", metrics),
              Route("/v1/chat/completions", chat, methods=["POST"])]
    if sim.vllm:
        app = Starlette(routes=[Route("/health", vllm_health), Route("/version", version),
                                *common])
        return sglang_dialect.SGLangApp(app, sim) if sim.profile.dialect == "sglang" else app
    return Starlette(routes=[
        Route("/health", health), Route("/props", props), Route("/slots", slots),
        Route("/models", models), Route("/chat/completions", chat, methods=["POST"]), *common])


