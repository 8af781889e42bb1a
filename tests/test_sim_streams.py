"""What the simulated servers send inside a stream besides tokens, as the engines do (see
`dualpath.sim.dialect`), and how the client takes it: SSE pings, errors mid-stream."""

from __future__ import annotations

import httpx
import orjson

from dualpath.client import ChatRequest, PathClient
from dualpath.config import Sampling, ServingPath
from dualpath.sampling import sampling_body

SLOW_PREFILL = {"prefill_tps": 1.0, "context_tokens": 100, "time_scale": 1e-4}  # ~110 s


def _body(**kw) -> dict:
    return {"model": "sim-model", "messages": [{"role": "user", "content": "TICKER: T | hi"}],
            "stream": True, **sampling_body("llama.cpp", Sampling(max_tokens=64), 1), **kw}


def _client(url: str, dialect: str = "llama.cpp") -> PathClient:
    path = ServingPath(engine="sim", base_url=url, model="sim-model", slots=1, stream=True,
                       max_attempts=2, backoff_s=0.0, sim={"dialect": dialect})
    return PathClient("p", path, Sampling(max_tokens=64), httpx.AsyncClient(), "t/r")


def _req() -> ChatRequest:
    return ChatRequest("a", [{"role": "user", "content": "TICKER: T | hi"}], "T", 1, 1, 1, seed=1)


async def test_llama_server_pings_a_silent_stream_and_the_client_reads_past_it(sim_server):
    url = sim_server(slots=1, **SLOW_PREFILL).url
    raw = httpx.post(f"{url}/v1/chat/completions", json=_body(), timeout=30).content
    # llama-server: ":" after 30 s of silence (sse_ping_interval), here in a 110 s prefill
    assert raw.count(b":\n\n") >= 3 and raw.startswith(b":\n\n")
    client = _client(url)
    rec = await client.chat(_req())
    await client.http.aclose()
    assert rec.ok and rec.attempts == 1 and rec.output_text.startswith("Synthetic analysis")


async def test_an_error_mid_stream_is_llama_servers_event_and_is_retried(sim_server):
    url = sim_server(slots=1, stream_error_share=1.0).url
    raw = httpx.post(f"{url}/v1/chat/completions", json=_body(), timeout=30).text
    last = raw.strip().splitlines()[-1]
    # llama-server ends the stream at the error event: no [DONE] after it
    assert orjson.loads(last[6:]) == {"error": {"code": 500, "type": "server_error",
                                                "message": "decode failed: the slot stopped "
                                                           "this request"}}
    client = _client(url)
    rec = await client.chat(_req())
    await client.http.aclose()
    assert rec.error_kind == "stream_error" and rec.attempts == 2      # transient: retried
    assert "server_error" in rec.error_detail
