"""One contract over every registered engine (`dualpath.engines`): what its facts declare is
what its code does, so an engine added as one module cannot half-exist (sampling fields it
never sends, counters of no known meaning, slots it pins but cannot name)."""

import dataclasses

import httpx
import pytest

from dualpath import engines
from dualpath.config import ExpectedIdentity, Sampling, ServingPath
from dualpath.engines import COUNTER_MEANINGS, Engine, EngineFacts, engine
from dualpath.sampling import sampling_body

ALL = engines.names()
SIMULATED = engines.simulated_dialects()
OPENAI_FIELDS = {"temperature", "top_p", "presence_penalty", "frequency_penalty",
                 "max_tokens", "seed"}
THINKING_FIELDS = {"chat_template_kwargs", "reasoning_format", "include_reasoning",
                   "separate_reasoning"}


def test_the_registry_holds_the_engines_a_config_can_name():
    assert ALL[:4] == ("llama.cpp", "vllm", "openai", "sim")
    assert set(SIMULATED) >= {"llama.cpp", "vllm"}
    for name in ALL:
        ServingPath(engine=name, base_url="http://127.0.0.1:9", model="m")   # accepted
    with pytest.raises(ValueError, match="engine"):
        ServingPath(engine="tgi", base_url="http://127.0.0.1:9", model="m")


@pytest.mark.parametrize("name", ALL)
def test_facts_are_the_engines_own_and_complete(name):
    eng = engine(name)
    assert isinstance(eng, Engine) and isinstance(eng.facts, EngineFacts)
    f = eng.facts
    assert f.name == eng.name == name and f.label
    pins = set(ExpectedIdentity.model_fields)
    assert f.reports <= pins and "model" in f.reports
    assert set(f.cannot_report) <= pins - f.reports      # a reason only for what it lacks
    assert set(f.counters) <= set(COUNTER_MEANINGS)
    assert all(":" in c for c in f.counters.values())    # Prometheus names carry a prefix
    assert not f.prompt_counts_cached or "cached_tokens" in f.counters
    assert f.default_queue_depth >= 0
    assert f.penalty_window in (None, "output", "prompt and output")
    for fld in dataclasses.fields(EngineFacts):
        assert fld.metadata.get("doc"), fld.name         # every fact says what it means


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("thinking", ["on", "off"])
def test_a_request_sends_exactly_the_declared_sampling_fields(name, thinking):
    """Every field beyond OpenAI's is one the engine declares (a field it takes but dualpath
    would not send is how top_k/min_p went missing on an unknown engine)."""
    s = Sampling(top_k=20, min_p=0.05, thinking=thinking)
    body = sampling_body(name, s, 7)
    assert OPENAI_FIELDS <= set(body)
    assert set(body) - OPENAI_FIELDS - THINKING_FIELDS == set(engine(name).facts.sampling_fields)
    if "top_k" in body:
        assert (body["top_k"], body["min_p"]) == (20, 0.05)
    kwargs = body.get("chat_template_kwargs")
    assert kwargs is None or kwargs == {"enable_thinking": thinking == "on"}


@pytest.mark.parametrize("name", ALL)
def test_slots_schema_and_applied_sampling_follow_the_facts(name):
    eng, f = engine(name), engine(name).facts
    assert bool(eng.slot_body(3)) == f.pins_slots
    assert f.pins_slots <= ("slots" in f.reports)
    schema = {"type": "object"}
    assert schema in _values(eng.schema_body(schema))
    sent = eng.sent_sampling(Sampling())
    # an engine reports its applied sampling, or its request is the record, or neither
    assert not (f.reports_applied_sampling and sent is not None)
    if sent is not None:
        assert sent["samplers"] == list(f.sampler_order)


@pytest.mark.parametrize("name", ALL)
def test_counters_turn_into_prefill_and_decode(name):
    f = engine(name).facts
    before = {c: 100.0 for c in f.counters.values()}
    after = {c: 150.0 for c in f.counters.values()}
    if "cached_tokens" in f.counters:
        after[f.counters["cached_tokens"]] = 120.0
    got = engine(name).counter_deltas(before, after)
    want = {m: 50.0 for m in f.counters if m != "cached_tokens"}
    if f.prompt_counts_cached:
        want["prompt_tokens"] = 50.0 - 20.0        # its prompt counter counts the hits too
    assert got == want
    assert engine(name).counter_deltas(None, after) == {}


@pytest.mark.parametrize("dialect", SIMULATED)
async def test_a_simulated_server_of_each_dialect_is_read_as_its_engine(sim_server, dialect):
    srv = sim_server(dialect=dialect, model_alias="m1", build="b1", slots=2)
    eng = engine(dialect)
    async with httpx.AsyncClient() as http:
        ident = await eng.read_identity(http, srv.url)
        busy = await eng.busy_slots(http, srv.url)
        metrics = await engines.http.read_metrics(http, srv.url)
    assert (ident.engine, ident.model) == (dialect, "m1")
    assert busy in (0, None)
    assert set(eng.facts.counters.values()) - {eng.facts.counters.get("prompt_seconds"),
                                               eng.facts.counters.get("predicted_seconds")} \
        <= set(metrics)


async def test_a_plain_openai_server_is_read_from_v1_models_alone():
    seen = []

    def handler(request):
        seen.append(request.url.path)
        return httpx.Response(200, json={"data": [{"id": "gpt-x"}]})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        ident = await engine("openai").read_identity(http, "http://api")
    assert (ident.model, ident.build, ident.slots, seen) == ("gpt-x", None, None, ["/v1/models"])


def test_overflow_markers_and_counters_come_from_every_engine():
    for name in ALL:
        f = engine(name).facts
        assert set(f.overflow_markers) <= set(engines.overflow_markers())
        for meaning, counter in f.counters.items():
            assert counter in engines.counter_names(meaning)


def _values(d: dict):
    for v in d.values():
        yield v
        if isinstance(v, dict):
            yield from _values(v)
