"""The settings of one serving path (`[paths.NAME]` of `dualpath.toml`): its engine and
endpoint, retries and time-outs, how to launch it, what its server must report (`expect`,
checked against what each engine can report), the simulated server's profile and the speed
a sweep measured. Read as part of `dualpath.config.Config`, which re-exports every name.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (BeforeValidator, ConfigDict, Field, Strict, field_validator,
                      model_serializer,
                      model_validator)

from dualpath import engines
from dualpath.strict import StrictModel
from dualpath.telemetry.settings import SimPower


def _whole_draws(v: object) -> object:
    """A bool is an int to Python, so `draws = true` would read as 1 draw: refuse it by name
    (`Strict` then refuses strings and decimals)."""
    if isinstance(v, bool):
        raise ValueError("draws is a whole number of scorings from 1 to 50 (e.g. draws = 2), "
                         "not true or false")
    return v


# a count of draws in the config: a whole number, never a bool, a string or a decimal
Draws = Annotated[int, BeforeValidator(_whole_draws), Strict()]

# The registered engines (`dualpath.engines.registry`), and those the simulated server speaks.
Engine = Literal[engines.names()]
SimDialect = Literal[engines.simulated_dialects()]


def _quoted(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{n}'" for n in names[:-1]) + f" or '{names[-1]}'"



class ExpectedGpu(StrictModel):
    """What each GPU a path's server uses must be (`[paths.X.expect.gpu]`); unset fields are
    not checked. Read from the GPU's own counters (NVML, amdgpu sysfs), not from the engine,
    by `dualpath check` where the GPU is on this host and by `dualpath doctor`."""

    model: str | None = Field(None, min_length=1, description="The GPU's model name as its "
                              "driver reports it (NVML name, amdgpu product_name).")
    driver: str | None = Field(None, min_length=1, description="Driver version (NVML's; "
                               "amdgpu's module version).")
    power_limit_w: float | None = Field(None, gt=0, le=5000, description="Enforced power "
                                        "limit in watts (NVML enforced limit, amdgpu "
                                        "power1_cap), matched to within 0.5 W.")
    pcie: str | None = Field(None, pattern=r"^Gen[1-6] x(1|2|4|8|16|32)$", description="PCIe "
                             "link as 'Gen4 x16': the generation the link can reach (its "
                             "maximum: the generation drops at idle) and the width it is "
                             "trained at now.")
    vram_total_mb: int | None = Field(None, ge=1, description="VRAM total in MiB, matched to "
                                      "within 1 MiB.")
    pcie_width: Literal[1, 2, 4, 8, 16, 32] | None = Field(
        None, description="PCIe lanes the link to the slot is trained at now (read past an "
        "RDNA card's own switch): 16 refuses a night on a card stuck in an x4 slot.")

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        # a pin added later dumps only when set (a preregistration's hash stays the same)
        out = handler(self)
        if out.get("pcie_width") is None:
            out.pop("pcie_width", None)
        return out


class ExpectedIdentity(StrictModel):
    """What the server behind a path must report; unset fields are not checked.

    Only what the path's engine reports can be pinned (`reports`): a pin the server
    can never confirm would fail every night, so it is refused when the config is read."""

    model: str | None = Field(None, description="Model alias (/props model_alias, /v1/models id).")
    model_path_contains: str | None = Field(None, description="Substring of the model's path "
                                            "(llama-server /props model_path, vLLM /v1/models "
                                            "root).")
    slots: int | None = Field(None, ge=1, description="Parallel slots (/props total_slots; "
                              "llama-server only).")
    n_ctx_per_slot: int | None = Field(None, ge=1, description="Context per slot: llama-server "
                                       "/props n_ctx (padded, see `dualpath check`), vLLM "
                                       "max_model_len (per request).")
    build: str | None = Field(None, description="Build: llama-server build_info (also its "
                              "system_fingerprint); vLLM 'vllm-<version>' (/version) or its "
                              "whole system_fingerprint 'vllm-<version>-<config hash>', then "
                              "pinned on every response.")
    speculative: bool | None = Field(None, description="Whether speculative decoding / MTP is "
                                     "on (llama-server only; vLLM shows it only through "
                                     "counters that exist while it is on).")
    binary_sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$", description="SHA-256 "
                                      "of the server's binary and the libraries beside it "
                                      "(llama-server on this host; `dualpath doctor` shows "
                                      "it): catches a rebuilt binary whose build_info reads "
                                      "the same.")
    model_sha256: str | None = Field(None, min_length=8, description="Hash of the model file "
                                     "the server loaded (llama-server on this host; files "
                                     "over 1 GiB are hashed by size, head and tail, marked "
                                     "'sampled:').")
    backend: str | None = Field(None, description="Backend the server runs the model on: "
                                "'Vulkan', 'CUDA', 'ROCm', 'CPU' (llama-server on this host: "
                                "the ggml backend library its process mapped, else its "
                                "devices' names; `dualpath doctor` shows it).")
    device_contains: str | None = Field(None, description="Substring of the devices the "
                                        "server uses, each 'NAME (DESCRIPTION)' as its own "
                                        "`llama-server --list-devices` says under its "
                                        "environment, narrowed by `--device`, e.g. 'Vulkan0 "
                                        "(AMD Radeon AI PRO R9700 (RADV GFX1201))': pin "
                                        "'Vulkan0' or 'R9700'.")
    gpu: ExpectedGpu | None = Field(None, description="What the path's GPUs must be (read "
                                    "from the GPUs, not the server; `[paths.X.expect.gpu]`).")

    @model_serializer(mode="wrap")
    def _dump(self, handler):
        # no GPU or backend pin dumps as before they existed (a preregistration's hash
        # stays the same)
        out = handler(self)
        for name in ("gpu", "backend", "device_contains"):
            if out.get(name) is None:
                out.pop(name, None)
        return out


def reports(engine_key: str) -> frozenset[str]:
    """The pins a server of `engine_key` (an engine, or `sim:<dialect>`) can confirm."""
    name, _, dialect = engine_key.partition(":")
    return engines.reports(name, dialect)


def unreportable_pins(engine_key: str, expect: ExpectedIdentity) -> list[str]:
    """Each pin in `expect` the engine cannot report, with why (empty: all checkable)."""
    allowed = reports(engine_key)
    why = engines.engine(engine_key.rpartition(":")[2]).facts.cannot_report
    return [f"expect.{name} ({why.get(name, 'not reported')})"
            for name in type(expect).model_fields
            if getattr(expect, name) is not None and name not in allowed
            and name != "gpu"]       # read from the GPU's counters, whatever the engine


class SimProfile(StrictModel):
    """Time and answer model of a simulated llama-server (engine 'sim').

    Rates are per slot with all slots busy. Defaults are the user's backup path (R9700, llama.cpp): with
    ~8.3k-token prompts and ~1.26k-token outputs a 17-call ticker takes ~172 s on the
    throughput basis at 4 slots. The demo sends short prompts over the wire; `context_tokens`
    stands for the documents a real pipeline attaches and is added to the counted prompt.
    """

    prefill_tps: float = Field(745.0, gt=0, description="Prompt tokens per second per busy slot.")
    decode_tps: float = Field(43.0, gt=0, description="Generated tokens per second per busy slot.")
    time_scale: float = Field(1.0, gt=0, le=1.0,
                              description="Real seconds slept per modelled second (demo: tiny).")
    knee_slots: int | None = Field(None, ge=1, le=256, description="Busy slots beyond which "
                                   "aggregate speed stops growing (each slot slows by busy / "
                                   "knee_slots); unset: every slot runs at full speed.")
    context_tokens: int = Field(8200, ge=0, description="Unsent prompt tokens added to each call.")
    intake_ms_per_kb: float = Field(0.0, ge=0, le=1000, description="Modelled milliseconds the "
                                    "server spends reading and tokenizing each KB of a request "
                                    "before it can queue it (llama-server's HTTP thread: ~0.4 "
                                    "on an H200 at ~5k-token prompts once its RAM-cache copies "
                                    "are modelled apart, bench/gpu/README.md).")
    cache_save_ms_per_kb: float = Field(0.0, ge=0, le=1000, description="Modelled milliseconds "
                                        "llama-server's main thread spends copying a slot's "
                                        "state to its RAM prompt cache, per KB of the saved "
                                        "prompt; no slot launches or decodes meanwhile (~2.3 on "
                                        "an H200, bench/gpu/README.md).")
    cache_ram: bool = Field(True, description="The RAM prompt cache is on (llama-server's "
                            "default); off is `--cache-ram 0`: no saves, loads or idle-slot "
                            "saves.")
    output_mean_tokens: float = Field(1260.0, gt=0, description="Mean generated tokens per call.")
    output_sigma: float = Field(0.35, ge=0, le=2, description="Log-normal sigma of output length.")
    runaway_share: float = Field(0.01, ge=0, le=1,
                                 description="Share of calls that never stop before max_tokens.")
    malformed_share: float = Field(0.01, ge=0, le=1,
                                   description="Share of final answers with no parseable grade.")
    signal_weight: float = Field(0.35, ge=0, description="How strongly grades follow the hidden signal.")
    night_noise: float = Field(0.8, ge=0, description="Noise shared by all draws of a ticker-night.")
    draw_noise: float = Field(1.0, ge=0, description="Noise of each draw.")
    dialect: SimDialect = Field(
        "llama.cpp", description="Which real server the simulated one speaks like: "
        "llama-server (/props, /slots, timings, build in system_fingerprint) or vLLM "
        "(/version, vllm: metrics, 404 for an unknown model, no timings, system_fingerprint "
        "vllm-<version>-<config hash>).")
    model_alias: str = Field("sim-model", description="Alias the simulated server reports.")
    build: str = Field("sim-b0001", description="Build the simulated server reports.")
    n_ctx: int = Field(131072, ge=1024, description="Total context: llama.cpp dialect "
                       "split over the slots and padded as -c is; vLLM's max_model_len, "
                       "per request.")
    speculative: bool = Field(False, description="Speculative decoding on (llama.cpp: in "
                              "/props and /slots; vllm: its speculative-decoding counters appear).")
    prompt_tokens_details: bool = Field(False, description="vllm: report usage."
                                        "prompt_tokens_details.cached_tokens, as vLLM does "
                                        "only with --enable-prompt-tokens-details.")
    per_request_metrics: bool = Field(False, description="vllm: add `metrics` (first-token, "
                                      "generation and queue ms) to each response, as vLLM "
                                      "does with --enable-per-request-metrics.")
    thinks: bool = Field(False, description="The model thinks before it answers unless the "
                         "request's chat_template_kwargs say enable_thinking = false.")
    thinking_share: float = Field(0.4, ge=0, lt=1, description="Share of a thinking call's "
                                  "generated tokens that are thinking.")
    reasoning_parser: bool = Field(True, description="vLLM dialect: launched with "
                                   "--reasoning-parser (thinking in `reasoning`, counted); "
                                   "false: inline <think>...</think> in content.")
    template_opens_think: bool = Field(False, description="The chat template opens <think> in "
                                       "the prompt when thinking is on (Qwen3.5/3.6): inline, "
                                       "the reply starts inside the block (T</think>A; cut: "
                                       "T, no tag at all).")
    thinks_when_off: bool = Field(False, description="The model thinks even when the request "
                                  "says enable_thinking = false (vLLM's qwen3 parser then "
                                  "keeps <think> in the content and drops </think>).")
    metrics: bool = Field(True, description="llama.cpp dialect: /metrics on (--metrics); "
                          "false: 501, as llama-server without it.")
    stream_error_share: float = Field(0.0, ge=0, le=1, description="Share of streamed calls "
                                      "that fail mid-stream with the engine's error event.")
    sse_ping_s: float | None = Field(None, ge=0, description="Modelled seconds of silence "
                                     "before an SSE comment ping (None: the engine's default, "
                                     "llama-server 30, vLLM off; 0: off).")
    market_seed: int = Field(7, description="Seed of the synthetic market the answers follow.")


class MeasuredSpeed(StrictModel):
    """A path's speed as measured by a sweep's replay (written back by `dualpath sweep`)."""

    prefill_tps: float = Field(gt=0, description="Aggregate prompt tokens per second "
                               "(server counters).")
    decode_tps: float = Field(gt=0, description="Aggregate generated tokens per second "
                              "(server counters).")
    ticker_s_throughput: float | None = Field(None, gt=0, description="Seconds per ticker, "
                                              "throughput basis (wall clock / tickers).")
    ticker_s_latency: float | None = Field(None, gt=0, description="Seconds per ticker, "
                                           "latency basis (median unit seconds).")
    replay_set: str | None = Field(None, description="Content hash of the frozen replay set.")
    measured_on: date | None = Field(None, description="Date of the measurement.")
    build: str | None = Field(None, description="Server build measured.")
    slots: int | None = Field(None, ge=1, description="Parallel slots measured.")
    probe_prefill_tps: float | None = Field(None, gt=0, description="Single-request prefill "
                                            "tokens per second of the verify probe's long "
                                            "prompt (what `dualpath verify` compares).")
    probe_decode_tps: float | None = Field(None, gt=0, description="Single-request decode "
                                           "tokens per second of the verify probe's short "
                                           "prompt (what `dualpath verify` compares).")
    probe_long_tokens: int | None = Field(None, ge=16, description="Length of the probe's "
                                          "long prompt (approximate tokens).")
    sweep: str | None = Field(None, description="Id of the sweep that measured it.")


class ServingPath(StrictModel):
    """One serving path: an engine behind an OpenAI-compatible endpoint."""

    # inf and nan pass every gt/le bound check's spirit but not its letter: refuse them
    model_config = ConfigDict(allow_inf_nan=False)     # merged with StrictModel's

    engine: Engine = Field(description=f"Server software: {_quoted(engines.names())}.")
    base_url: str | None = Field(
        None, description="http://host:port of the server; for 'sim' leave unset to start one.")
    model: str = Field(description="Model name sent in requests (llama.cpp ignores it; vLLM checks).")
    slots: int = Field(4, ge=1, le=256, description="Requests kept in flight by dualpath.")
    draws: Draws | None = Field(None, ge=1, le=50, description="Draws of each ticker per night "
                              "on this path (default: experiment.draws); e.g. 3 on a fast "
                              "main path and 2 on the backup decide interchangeability "
                              "sooner.")
    stream: bool = Field(True, description="Stream responses (needed for client-side first-token time).")
    launch: list[str] | None = Field(
        None, description="argv to start the server; unset = attach to a running one. "
        "Placeholders: {llama_server}, {gemma3_270m}.")
    launch_env: dict[str, str] = Field(default_factory=dict,
                                       description="Environment overrides for the launched server.")
    ready_timeout_s: float = Field(600.0, gt=0, le=86400,
                                   description="Wait for a launched server's /health.")
    load_poll_s: float = Field(2.0, gt=0, le=3600, description="How often /slots is read to detect "
                               "requests that are not dualpath's (external load).")
    identity_poll_s: float = Field(30.0, gt=0, le=86400, description="How often the server's identity "
                                   "(/props or /version, /v1/models) is re-read during a run; "
                                   "a change contaminates every later response.")
    expect: ExpectedIdentity = Field(default_factory=ExpectedIdentity,
                                     description="Identity the server must show.")
    api_key_env: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
                                    description="Environment variable holding the API key.")
    connect_timeout_s: float = Field(5.0, gt=0, le=600, description="TCP connect timeout "
                                     "per attempt (seconds, at most 600).")
    read_timeout_s: float = Field(1800.0, gt=0, le=86400, description="Max silence while "
                                  "reading a response (seconds, at most a day).")
    max_attempts: int = Field(4, ge=1, le=20, description="Attempts per call on transient "
                              "faults (resets, 408/429/5xx, timeouts, cut bodies); 1 = no retry.")
    backoff_s: float = Field(1.0, ge=0, le=600, description="First retry delay in seconds; "
                             "doubles each attempt, with jitter (x0.5-1).")
    backoff_max_s: float = Field(60.0, ge=0, le=3600, description="Cap on one retry delay.")
    retry_after_max_s: float = Field(120.0, ge=0, le=3600, description="Longest server "
                                     "Retry-After honoured; longer ones are cut to this.")
    retry_budget_s: float = Field(3600.0, gt=0, le=7 * 86400, description="Per call: no "
                                  "retry starts later than this after the call began (a "
                                  "generation under way is never cut by it).")
    server_down_wait_s: float = Field(60.0, ge=0, le=86400, description="How long a server "
                                      "that is not there - connection refused, or reset "
                                      "before replying on a new connection, as while it "
                                      "restarts on its port - is waited for (in backoff "
                                      "sleeps, from the path's first such fault) before those "
                                      "faults count toward max_attempts.")
    grade_format: Literal["text", "json"] = Field(
        "text", description="'json' constrains the final-grade call to a JSON schema.")
    sim: SimProfile = Field(default_factory=SimProfile, description="Simulated server model.")
    queue_depth: int | None = Field(None, ge=0, le=64, description="Requests kept queued at "
                                    "the server beyond `slots`, so a slot never waits for the "
                                    "next request (default: 1 for llama.cpp with slots shared, "
                                    "whose slots are fixed; 0 for llama.cpp with prefix "
                                    "affinity, where a request queued at its busy slot makes "
                                    "llama-server copy that slot's state to RAM on its main "
                                    "thread (~50 ms on an H200, every slot stalls): measured "
                                    "nights 4-12% shorter; 1 there too when dualpath launches it "
                                    "with `--cache-ram 0`, which copies nothing; 0 for vLLM "
                                    "and others, which batch what they get).")
    units_per_slot: int | None = Field(None, ge=1, le=8, description="With prefix affinity "
                                       "(llama.cpp): units that own one slot (default 1). With "
                                       "2, one unit's call is always queued at the slot while "
                                       "the other waits on the harness between its steps, but "
                                       "the units' contexts then alternate in the slot's cache "
                                       "(measured on an H200: occupancy 0.94 -> 0.99, prefill "
                                       "2.2x, nights 7-11% longer; bench/gpu/README.md).")
    call_timeout_s: float = Field(3600.0, gt=0, le=7 * 86400, description="Per attempt: the "
                                  "whole reply must arrive within this many seconds of its "
                                  "first byte (a reply trickled slowly is cut here; a request "
                                  "waiting in the server's queue is not counted).")
    work_pool: str | None = Field(None, min_length=1, max_length=128, description="Prefect "
                                  "work pool whose worker scores this path on its own host "
                                  "(unset: scored by the flow's own process).")
    measured: MeasuredSpeed | None = Field(None, description="Speed measured by a sweep "
                                           "(informational; used by `dualpath plan`).")
    gpus: list[int] | None = Field(None, description="Host GPU indices (NVML / amdgpu order) "
                                   "the path's server uses, for its energy and GPU state; "
                                   "unset: read from the launch argv and env, else every GPU "
                                   "of the host.")
    gpu_vendor: Literal["nvidia", "amd"] | None = Field(
        None, description="Whose driver reads this path's GPUs for energy and GPU state "
        "('nvidia': NVML, 'amd': amdgpu sysfs); `gpus` count in that vendor's order. Unset: "
        "from the launch (a CUDA or ROCm --device, CUDA_/HIP_/ROCR_VISIBLE_DEVICES), else "
        "the host's only kind; on a host with both, energy stays unknown until it is set "
        "(a Vulkan build runs on either).")
    power: SimPower = Field(default_factory=SimPower, description="engine 'sim': the "
                            "simulated GPU's power model.")

    @property
    def dialect(self) -> str:
        """The server dialect spoken on the wire: a simulated path speaks its profile's."""
        return self.sim.dialect if self.engine == "sim" else self.engine

    @property
    def server_queue_depth(self) -> int:
        """Requests dualpath keeps queued at the server beyond its slots (slots shared; the
        most any setting keeps queued: what transports and time-outs are sized for)."""
        if self.queue_depth is not None:
            return self.queue_depth
        return engines.engine(self.dialect).facts.default_queue_depth

    def pins_slots(self, prefix_affinity: bool) -> bool:
        """Whether each unit runs on one slot of its own: prefix affinity, on an engine
        whose requests can name their slot (llama-server's `id_slot`)."""
        return prefix_affinity and engines.engine(self.dialect).facts.pins_slots

    def queue_depth_for(self, pinned: bool) -> int:
        """Requests kept queued beyond the slots: with prefix affinity (`pinned`), unless
        set, 0 (a call queued at a busy slot costs a RAM-cache copy), or 1 on a llama-server
        dualpath launches with `--cache-ram 0`, which copies nothing (bench/gpu/README.md)."""
        if self.queue_depth is None and pinned:
            return engines.engine(self.dialect).pinned_queue_depth(self.launch, self.launch_env)
        return self.server_queue_depth

    @property
    def server_units_per_slot(self) -> int:
        """Units sharing one slot under prefix affinity (bench/gpu/README.md measures it)."""
        return self.units_per_slot if self.units_per_slot is not None else 1

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        example = "e.g. http://127.0.0.1:8080"
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"must start with http:// or https://, {example}")
        if len(v) > 2048 or any(c.isspace() or not c.isprintable() for c in v):
            raise ValueError(f"must be a URL without spaces or control characters, {example}")
        parts = urlsplit(v)
        try:
            port = parts.port          # raises for a port outside 0-65535 or not a number
        except ValueError:
            raise ValueError(f"port must be a number from 1 to 65535, {example}") from None
        if port == 0:
            raise ValueError(f"port must be a number from 1 to 65535, {example}")
        if not parts.hostname:
            raise ValueError(f"has no host, {example}")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("must not carry a query, fragment or credentials (a key goes in "
                             f"api_key_env), {example}")
        return v.rstrip("/")

    @model_validator(mode="after")
    def _needs_url(self) -> "ServingPath":
        if self.engine != "sim" and self.base_url is None:
            raise ValueError(f"engine '{self.engine}' needs base_url (e.g. http://127.0.0.1:8080)")
        if self.launch is not None and not self.launch:
            raise ValueError("launch must be a non-empty argv list, or left out to attach")
        problems = unreportable_pins(self.reports_key, self.expect)
        if problems:
            raise ValueError(f"a {self.reports_key} server cannot confirm "
                             + "; ".join(problems) + ": remove the pin")
        return self

    @property
    def reports_key(self) -> str:
        """Whose facts say what this path's server can report (`reports`)."""
        return f"sim:{self.sim.dialect}" if self.engine == "sim" else self.engine
