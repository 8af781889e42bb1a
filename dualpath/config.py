"""Settings: one `Config` read from `dualpath.toml`, validated strictly.

Every model forbids unknown keys, so a typo is an error naming the key instead of a setting
silently ignored. `load_config` turns any problem into a `ConfigError` whose message names the
field, the bad value and what is allowed.
"""

from __future__ import annotations

import codecs
import hashlib
import re
import tomllib
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dualpath.config_checks import date_format_problem, open_regular, places, plain_path
from dualpath.errors import ConfigError

Engine = Literal["llama.cpp", "vllm", "openai", "sim"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Experiment(_Model):
    """What is scored each night, and how often."""

    name: str = Field("dualpath",
                      description="Experiment name (1-64 letters, digits, '_', '.', '-', "
                      "starting with a letter or digit); runs, warehouse rows, run folders "
                      "and deployments are keyed by it.")
    universe: list[str] | None = Field(None, description="Tickers scored every night (inline).")
    universe_file: Path | None = Field(
        None, description="A text file with one ticker per line ('#' comments allowed); "
        "relative paths are relative to the config file.")
    draws: int = Field(3, ge=1, le=50, description="Independent scorings of each ticker per night.")
    prefix_affinity: bool = Field(True, description="Send a unit's calls to the slot whose "
                                  "prompt cache holds their shared prefix (llama-server "
                                  "id_slot; call order for vLLM's prefix cache).")
    horizons: list[Annotated[int, Field(ge=1, le=260)]] = Field(
        default_factory=lambda: [1, 5, 20],
        description="Forward-return horizons in trading days (1-20 distinct values).")

    _plain = field_validator("universe_file")(lambda v: plain_path(v))

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", v):
            raise ValueError("use 1-64 ASCII letters, digits, '_', '.' and '-', starting "
                             "with a letter or digit (it names run folders and "
                             "deployments), e.g. 'dualpath-2027'")
        return v

    @field_validator("horizons")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if not 1 <= len(v) <= 20:
            raise ValueError(f"{len(v)} horizons; list 1 to 20 horizons in trading days, "
                             "e.g. [1, 5, 20]")
        dupes = sorted(h for h, n in Counter(v).items() if n > 1)
        if dupes:
            raise ValueError(f"horizon(s) {dupes} listed twice; list each once")
        return v

    @model_validator(mode="after")
    def _one_universe(self) -> "Experiment":
        if (self.universe is None) == (self.universe_file is None):
            raise ValueError("give exactly one of 'universe' (a list) or 'universe_file' (a path)")
        if self.universe is not None:
            _check_tickers(self.universe, "universe")
        return self


class Sampling(_Model):
    """Sampling parameters; every one is sent explicitly to every engine.

    Defaults are the user's pipeline. llama-server and vLLM fill unsent parameters with
    different defaults (top_k 40 / min_p 0.05 vs. the model's generation_config), so leaving
    any out would make the two paths sample differently.
    """

    temperature: float = Field(0.7, ge=0.0, le=2.0, description="Softmax temperature.")
    top_p: float = Field(0.8, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    top_k: int = Field(20, ge=0, description="Top-k cut-off (0 = off).")
    min_p: float = Field(0.0, ge=0.0, le=1.0, description="Min-p cut-off (0 = off).")
    presence_penalty: float = Field(1.5, ge=-2.0, le=2.0,
                                    description="Presence penalty over the whole output.")
    max_tokens: int = Field(4096, ge=1, le=131072,
                            description="Generation cap per call; a call that hits it is a runaway.")
    seed_policy: Literal["per-draw", "none"] = Field(
        "per-draw", description="'per-draw': each call's seed is derived from (base_seed, night, "
        "ticker, draw, agent), so draws differ and a rerun repeats them; 'none': no seed sent.")
    base_seed: int = Field(20260101, ge=0, description="Root of the derived seeds.")
    thinking: Literal["off", "on"] = Field(
        "off", description="'off': the chat template's enable_thinking = false on every path; "
        "'on': the model thinks, and its thinking is stored apart from the answer (never "
        "quoted into later prompts, never read for a grade). The same on both paths.")


class ExpectedIdentity(_Model):
    """What the server behind a path must report; unset fields are not checked.

    Only what the path's engine reports can be pinned (`ENGINE_REPORTS`): a pin the server
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


# What each engine's endpoints report, so what an `expect` pin can be checked against.
# vLLM reports no slot count, and shows speculative decoding only by the presence of its
# vllm:spec_decode_* counters (registered only when it is on): neither can be pinned, but a
# pinned vLLM build (system_fingerprint) covers its speculative config in its config hash.
_LLAMA_REPORTS = frozenset({"model", "model_path_contains", "slots", "n_ctx_per_slot",
                            "build", "speculative", "binary_sha256", "model_sha256"})
ENGINE_REPORTS: dict[str, frozenset[str]] = {
    "llama.cpp": _LLAMA_REPORTS,
    "vllm": frozenset({"model", "model_path_contains", "n_ctx_per_slot", "build"}),
    "openai": frozenset({"model"}),
    # a simulated server runs no binary of its own and loads no model file
    "sim:llama.cpp": _LLAMA_REPORTS - {"binary_sha256", "model_sha256"},
    "sim:vllm": frozenset({"model", "model_path_contains", "n_ctx_per_slot", "build"}),
}
_CANNOT_REPORT = {
    ("vllm", "slots"): "vLLM reports no slot count",
    ("vllm", "speculative"): "vLLM shows speculative decoding only as vllm:spec_decode_* "
                             "counters; pin expect.build to its system_fingerprint, whose "
                             "config hash covers it",
}


def unreportable_pins(engine_key: str, expect: ExpectedIdentity) -> list[str]:
    """Each pin in `expect` the engine cannot report, with why (empty: all checkable)."""
    allowed = ENGINE_REPORTS[engine_key]
    base = engine_key.removeprefix("sim:")
    return [f"expect.{name} ({_CANNOT_REPORT.get((base, name), 'not reported')})"
            for name in type(expect).model_fields
            if getattr(expect, name) is not None and name not in allowed]


class SimProfile(_Model):
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
    dialect: Literal["llama.cpp", "vllm"] = Field(
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
                              "/props and /slots; vllm: vllm:spec_decode_* counters appear).")
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
    metrics: bool = Field(True, description="llama.cpp dialect: /metrics on (--metrics); "
                          "false: 501, as llama-server without it.")
    stream_error_share: float = Field(0.0, ge=0, le=1, description="Share of streamed calls "
                                      "that fail mid-stream with the engine's error event.")
    sse_ping_s: float | None = Field(None, ge=0, description="Modelled seconds of silence "
                                     "before an SSE comment ping (None: the engine's default, "
                                     "llama-server 30, vLLM off; 0: off).")
    market_seed: int = Field(7, description="Seed of the synthetic market the answers follow.")


class MeasuredSpeed(_Model):
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


class ServingPath(_Model):
    """One serving path: an engine behind an OpenAI-compatible endpoint."""

    # inf and nan pass every gt/le bound check's spirit but not its letter: refuse them
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    engine: Engine = Field(description="Server software: 'llama.cpp', 'vllm', 'openai' or 'sim'.")
    base_url: str | None = Field(
        None, description="http://host:port of the server; for 'sim' leave unset to start one.")
    model: str = Field(description="Model name sent in requests (llama.cpp ignores it; vLLM checks).")
    slots: int = Field(4, ge=1, le=256, description="Requests kept in flight by dualpath.")
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
    server_down_wait_s: float = Field(60.0, ge=0, le=86400, description="Per call: how long "
                                      "(in backoff sleeps) a server that is not there - "
                                      "connection refused, or reset before replying on a new "
                                      "connection, as while it restarts on its port - is waited "
                                      "for before those faults count toward max_attempts.")
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
                                    "nights 4-12% shorter; 0 for vLLM and others, which batch "
                                    "what they get).")
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
        return 1 if self.dialect == "llama.cpp" else 0

    def queue_depth_for(self, pinned: bool) -> int:
        """Requests kept queued beyond the slots: with prefix affinity (`pinned`), 0 unless
        set (bench/gpu/README.md, 2026-12-01 afternoon)."""
        if self.queue_depth is None and pinned:
            return 0
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
        """Which row of `ENGINE_REPORTS` says what this path's server can report."""
        return f"sim:{self.sim.dialect}" if self.engine == "sim" else self.engine


class WarehouseSettings(_Model):
    """Where results live."""

    path: Path = Field(Path(".dualpath/warehouse.duckdb"), description="DuckDB file.")
    runs_dir: Path = Field(Path(".dualpath/runs"), description="Run folders (journals, logs).")
    journal_store: str | None = Field(None, description="Where workers on other hosts ship "
                                      "their journals: a folder or an fsspec URL.")

    _plain = field_validator("path", "runs_dir")(lambda v: plain_path(v))


class PipelineSettings(_Model):
    """Which scoring pipeline runs per unit."""

    name: str = Field("builtin", description="'builtin' or 'package.module:function'.")
    history_days: int = Field(60, ge=5, le=2000, description="Trading days of history in prompts.")
    documents_dir: Path | None = Field(
        None, description="Optional folder of TICKER.md documents added to analyst prompts.")

    _plain = field_validator("documents_dir")(lambda v: plain_path(v))

    @field_validator("name")
    @classmethod
    def _ref(cls, v: str) -> str:
        if v != "builtin" and (":" not in v or v.startswith(":") or v.endswith(":")):
            raise ValueError("must be 'builtin' or 'package.module:function'")
        return v


class MarketSettings(_Model):
    """Where prices come from (a file, a drop folder, an online source, or the demo's synthetic
    market), how strictly they are read, and which exchange's sessions a night is counted in."""

    calendar: str = Field("XKRX", min_length=1, description="Exchange calendar "
                          "(exchange_calendars code, e.g. XKRX, XNYS, XTKS), or 'synthetic' "
                          "for the demo's market. A night must be one of its sessions.")
    timezone: str = Field("Asia/Seoul", description="The market's time zone (IANA name); "
                          "unset = the exchange's own (XKRX: Asia/Seoul, XNYS: "
                          "America/New_York; 'synthetic': Asia/Seoul). The default night is "
                          "the latest session whose close has passed there; schedules run in "
                          "it.")
    prices_file: Path | None = Field(None, description="A CSV/Parquet of daily prices, "
                                     "imported (what is new) before every night.")
    prices_dir: Path | None = Field(None, description="A drop folder: every *.csv / *.parquet "
                                    "in it is imported (what is new) before every night; later "
                                    "file names win where two files give the same day.")
    columns: dict[str, str] = Field(default_factory=dict, description="Column mapping for "
                                    "price files, file header -> ticker|date|close|adj_close, "
                                    "e.g. {Date = 'date', 'Adj Close' = 'adj_close'}.")
    ticker_from_filename: bool = Field(False, description="A price file without a ticker "
                                       "column takes its ticker from its name (005930.csv -> "
                                       "005930): a drop folder of one-ticker exports.")
    date_format: str | None = Field(None, description="strptime format of the files' dates "
                                    "(e.g. '%d/%m/%Y'); unset = ISO YYYY-MM-DD only.")
    encoding: str = Field("utf-8", min_length=1, description="Text encoding of CSV price "
                          "files, e.g. 'cp949' or 'euc-kr' for a Korean Excel/HTS export "
                          "(any Python codec name).")
    thousands: str | None = Field(None, min_length=1, max_length=1, description="Thousands "
                                  "separator in the files' prices, e.g. ',' for '71,000' "
                                  "(unset: plain numbers only).")
    source: Literal["files", "pykrx", "fdr", "yfinance"] = Field(
        "files", description="'files': only prices_file / prices_dir; 'pykrx', 'fdr' "
        "(FinanceDataReader) or 'yfinance': also fetch the universe's recent prices online "
        "(optional extras; a failing source is reported and scoring still runs).")
    symbol_suffix: str = Field("", max_length=8, description="Appended to tickers for the "
                               "online source, e.g. '.KS' for Yahoo's KOSPI symbols.")
    backfill_sessions: int = Field(120, ge=1, le=5000, description="Sessions an online source "
                                   "fetches for a ticker with no prices yet.")
    refetch_sessions: int = Field(5, ge=0, le=260, description="Recent sessions an online "
                                  "source fetches again, so late revisions are picked up.")
    max_abs_log_return: float = Field(0.3365, gt=0, le=10, allow_inf_nan=False,
                                      description="Moves with |log return| above this are "
                                      "warned as suspicious (0.3365 = log 1.4: a 40% day).")
    synthetic_seed: int | None = Field(None, description="Seed of the synthetic market (demo).")
    synthetic_start: date = Field(date(2027, 1, 4), description="First synthetic trading day "
                                  "(the synthetic calendar's holidays count from it).")

    _plain = field_validator("prices_file", "prices_dir")(lambda v: plain_path(v))

    @field_validator("date_format")
    @classmethod
    def _strptime(cls, v: str | None) -> str | None:
        problem = date_format_problem(v) if v is not None else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("not an IANA time zone; use e.g. 'Asia/Seoul' or "
                             "'America/New_York'") from None
        return v

    @field_validator("columns")
    @classmethod
    def _targets(cls, v: dict[str, str]) -> dict[str, str]:
        bad = sorted(set(v.values()) - {"ticker", "date", "close", "adj_close"})
        if bad:
            raise ValueError(f"maps to unknown column(s) {bad}; targets are ticker, date, "
                             "close, adj_close")
        return v

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        # the synthetic market's days are the synthetic calendar's: its default calendar
        if data.get("synthetic_seed") is not None and "calendar" not in data:
            data["calendar"] = "synthetic"
        # an exchange trades in its own zone: the default, so XNYS is never judged in Seoul
        if data.get("timezone") is None and isinstance(data.get("calendar", "XKRX"), str):
            from dualpath.calendar import exchange_zone
            data["timezone"] = exchange_zone(data.get("calendar", "XKRX"))
        return data

    @model_validator(mode="after")
    def _synthetic(self) -> "MarketSettings":
        if self.synthetic_seed is not None and self.calendar != "synthetic":
            raise ValueError(f"synthetic_seed imports the synthetic market, whose days are the "
                             f"'synthetic' calendar's, not {self.calendar}'s; set calendar = "
                             "\"synthetic\", or remove synthetic_seed to use real prices")
        return self


class ComparisonSettings(_Model):
    """The path comparison: which path is the candidate, and the non-inferiority question."""

    baseline: str | None = Field(None, description="The reference path (default: 'main' if "
                                 "present, else the first path).")
    candidate: str | None = Field(None, description="The cheaper path whose signal is judged "
                                  "against the baseline (default: 'backup', else the second).")
    margin: float = Field(0.03, gt=0, le=1, description="Non-inferiority margin δ on RankIC: "
                          "the candidate may be worse than the baseline by at most this much.")
    alpha: float = Field(0.05, gt=0, lt=0.5, description="One-sided significance level.")
    primary_horizon: int | None = Field(None, ge=1, description="The horizon of the primary "
                                        "test (default: the experiment's shortest horizon > 1, "
                                        "else its first); the others are exploratory.")


class ScheduleSettings(_Model):
    """The night window: when a night must be done, and what to do when it cannot be."""

    deadline: str | None = Field(
        None, pattern=r"^([01]\d|2[0-3]):[0-5]\d$",
        description="HH:MM in the market's time zone by which the night must end (the next "
        "morning when earlier than the close), e.g. '07:00'; unset: no deadline.")
    over_deadline: Literal["stop", "fewer-draws"] = Field(
        "stop", description="When the measured speed says the night cannot fit: 'stop' scores "
        "until the deadline (the run is partial, never complete); 'fewer-draws' starts only "
        "the draws that fit (draw-major order keeps them whole; the run is still partial).")


class UiSettings(_Model):
    """The read-only web viewer (`dualpath ui`) and the links other outputs make to it."""

    host: str = Field("127.0.0.1", description="Address `dualpath ui` listens on (127.0.0.1: "
                      "this machine only; 0.0.0.0 to share it on your own network).")
    port: int = Field(8765, ge=0, le=65535, description="Port `dualpath ui` listens on (0: any "
                      "free port).")
    base_url: str | None = Field(None, pattern=r"^https?://[^\s]+$", description="The viewer's "
                                 "address as others reach it, e.g. 'http://host:8765': the weekly "
                                 "report and `dualpath runs` link each night to its page there.")


class Config(_Model):
    """A whole dualpath.toml."""

    experiment: Experiment
    sampling: Sampling = Field(default_factory=Sampling, description="Sampling parameters.")
    paths: dict[str, ServingPath] = Field(description="Serving paths by name, e.g. main, backup.")
    warehouse: WarehouseSettings = Field(default_factory=WarehouseSettings, description="Storage.")
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings, description="Pipeline.")
    market: MarketSettings = Field(default_factory=MarketSettings, description="Prices.")
    comparison: ComparisonSettings = Field(default_factory=ComparisonSettings,
                                           description="How the paths are compared.")
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings,
                                       description="The night window.")
    ui: UiSettings = Field(default_factory=UiSettings, description="The web viewer.")
    base_dir: Path = Field(Path("."), description="Folder relative paths are resolved against.")

    @field_validator("paths")
    @classmethod
    def _names(cls, v: dict[str, ServingPath]) -> dict[str, ServingPath]:
        if not v:
            raise ValueError("define at least one path, e.g. [paths.main]")
        seen: dict[str, str] = {}
        for name in v:
            if not (0 < len(name) <= 64 and name.isascii()
                    and name.replace("-", "").replace("_", "").isalnum()):
                raise ValueError(f"path name {_short(name)} may hold only 1-64 ASCII letters, "
                                 "digits, '-' and '_'")
            # run folders and endpoint locks live on file systems that may ignore case
            other = seen.setdefault(name.lower(), name)
            if other != name:
                raise ValueError(f"path names '{other}' and '{name}' differ only in case; "
                                 "rename one")
        return v

    @model_validator(mode="after")
    def _pooled_paths_need_a_store(self) -> "Config":
        pooled = [n for n, p in self.paths.items() if p.work_pool]
        if pooled and not self.warehouse.journal_store:
            raise ValueError(f"paths {', '.join(pooled)} name a work_pool, so their journals "
                             "are written on another host: set [warehouse] journal_store to a "
                             "folder every host mounts or an fsspec URL (e.g. "
                             "\"s3://bucket/dualpath\")")
        return self

    def resolve(self, p: Path) -> Path:
        """A config-relative path made absolute."""
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    def tickers(self) -> list[str]:
        """The universe, from the inline list or the universe file."""
        if self.experiment.universe is not None:
            return list(self.experiment.universe)
        return read_universe(self.resolve(self.experiment.universe_file))

    def fingerprint(self) -> str:
        """Hash of everything that changes what a night measures (not where files live).

        "The same config", defined once: the resume guard, each run's `config_hash` and the
        preregistration all compare this. The universe counts by its tickers
        (`universe_sha256`), never by the path of the file that lists them: a universe file
        edited between two segments of a night is another config."""
        # How results are analysed (comparison) and where files live do not change a night.
        # Nor do where prices come from and how files are read: only which market it is.
        price_io = {"prices_file", "prices_dir", "columns", "ticker_from_filename",
                    "date_format", "encoding", "thousands", "source", "symbol_suffix", "backfill_sessions",
                    "refetch_sessions", "max_abs_log_return"}
        # Nor does which worker scores a path, or a sweep's note of its measured speed.
        data = self.model_dump(mode="json", exclude={"warehouse": True, "base_dir": True,
                                                     "comparison": True, "schedule": True,
                                                     "ui": True,     # the viewer's address
                                                     "market": price_io,
                                                     "experiment": {"universe",
                                                                    "universe_file"},
                                                     "paths": {"__all__": {"work_pool",
                                                                           "measured"}}})
        data["experiment"]["universe_sha256"] = universe_sha256(self.tickers())
        return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def universe_sha256(tickers: list[str]) -> str:
    """The universe's identity: SHA-256 of its tickers, one per line, in order."""
    return hashlib.sha256("\n".join(tickers).encode()).hexdigest()


MAX_TICKER_LEN = 32
MAX_UNIVERSE = 100_000


def _short(value: object, limit: int = 60) -> str:
    """A value for an error message: repr, cut to `limit` characters."""
    r = repr(value)
    return r if len(r) <= limit else r[:limit - 3] + "..."


def _cut(text: str, limit: int = 200) -> str:
    """Plain text (a file name, a message) cut to `limit` characters."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _some(items: list, n: int = 5) -> str:
    """At most `n` items for a message, and how many more there are."""
    shown = ", ".join(_short(x, 40) for x in items[:n])
    return shown + (f" and {len(items) - n} more" if len(items) > n else "")


def _check_tickers(tickers: list[str], where: str) -> None:
    if not tickers:
        raise ValueError(f"{where} is empty; list at least one ticker")
    if len(tickers) > MAX_UNIVERSE:
        raise ValueError(f"{where}: {len(tickers)} tickers; at most {MAX_UNIVERSE} are allowed")
    bad = [t for t in tickers if not isinstance(t, str) or not 0 < len(t) <= MAX_TICKER_LEN
           or not all(c.isalnum() or c in ".-_^" for c in t)]
    if bad:
        raise ValueError(f"{where}: {len(bad)} malformed ticker(s): {_some(bad)}; use 1-"
                         f"{MAX_TICKER_LEN} letters, digits, . - _ ^")
    dupes = sorted(t for t, n in Counter(tickers).items() if n > 1)
    if dupes:
        raise ValueError(f"{where}: {len(dupes)} duplicate ticker(s): {_some(dupes)}")


def read_universe(path: Path) -> list[str]:
    """Tickers from a file: one per line, blank lines and '#' comments ignored."""
    from dualpath.errors import DataError

    what = f"universe file {_cut(str(path))}"
    lines = _read_text(path, what, DataError).splitlines()
    tickers = [ln.split("#", 1)[0].strip() for ln in lines]
    tickers = [t for t in tickers if t]
    try:
        _check_tickers(tickers, f"universe file {path}")
    except ValueError as e:
        raise DataError(str(e))
    return tickers


# Where a config can hold a secret: the launched server's environment (under a
# secret-looking name) and its argv (`--api-key sk-...`). dualpath's own settings never do
# (`max_tokens`, `api_key_env` name a number and a variable), so their values are shown.
_SECRET_NAME = re.compile(r"key|token|secret|passw|auth|credential", re.IGNORECASE)
_MAX_PROBLEMS = 15


def _is_secret(loc: tuple, value: object) -> bool:
    parts = [str(p) for p in loc]
    if "launch_env" in parts:
        i = parts.index("launch_env")
        return i + 1 >= len(parts) or bool(_SECRET_NAME.search(parts[i + 1]))
    return "launch" in parts and isinstance(value, str)


def _value_shown(loc: tuple, value: object) -> str:
    """The offending value for a message: never a secret, never a whole table or list."""
    if isinstance(value, (dict, list, tuple)):
        return ""          # a table's problem is in the message; its contents could be huge
    if _is_secret(loc, value):
        return " = <redacted>"
    if isinstance(value, str):
        value = re.sub(r"//[^/@\s]*@", "//<redacted>@", value)   # credentials in a URL
    return f" = {_short(value, 80)}"


def _closest(loc: tuple) -> str | None:
    """The valid key nearest to an unknown one (`tempreature` -> `temperature`)."""
    import difflib

    model: type[BaseModel] = Config
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        if field is None:
            if model is Config or not hasattr(model, "model_fields"):
                model = ServingPath if loc and loc[0] == "paths" else model
            continue
        ann = field.annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else model
    if not isinstance(loc[-1], str) or not hasattr(model, "model_fields"):
        return None
    near = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1, cutoff=0.6)
    return near[0] if near else None


def format_validation_error(err: ValidationError, source: str) -> str:
    """One line per problem: field, bad value, what is allowed (bounded in length: at most
    15 problems, each cut to about 300 characters)."""
    errors = err.errors(include_url=False)
    lines = [f"{_cut(source)}: {len(errors)} problem(s):"]
    for e in errors[:_MAX_PROBLEMS]:
        loc = ".".join(_short(p, 40) if not isinstance(p, str) or len(p) > 40 else p
                       for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        msg = msg if len(msg) <= 300 else msg[:297] + "..."
        if e["type"] == "extra_forbidden":
            near = _closest(e["loc"])
            lines.append(f"  - {loc}: unknown setting; "
                         + (f"did you mean '{near}'?" if near else
                            "remove it or check its spelling"))
        elif e["type"] == "missing":
            lines.append(f"  - {loc}: required but missing")
        else:
            lines.append(f"  - {loc}{_value_shown(e['loc'], e.get('input'))}: {msg}")
    if len(errors) > _MAX_PROBLEMS:
        lines.append(f"  ... and {len(errors) - _MAX_PROBLEMS} more")
    return "\n".join(lines)


def parse_config(data: dict, source: str = "config", base_dir: Path | None = None) -> Config:
    """Validate a config dict; errors become `ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{_cut(source)}: expected a table of settings, got "
                          f"{type(data).__name__}")
    if base_dir is not None:
        data = {**data, "base_dir": base_dir}
    try:
        cfg = Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source)) from None
    except RecursionError:
        raise ConfigError(f"{_cut(source)}: settings nested too deeply") from None
    problems = places(cfg)      # files and folders that exist as the wrong kind
    if problems:
        raise ConfigError("\n".join([f"{_cut(source)}: {len(problems)} problem(s):"]
                                    + [f"  - {loc}: {_cut(msg, 300)}" for loc, msg in problems]))
    return cfg


def load_config(path: Path | str) -> Config:
    """Read and validate a dualpath.toml."""
    path = Path(path)
    text = _read_text(path, f"config file {_cut(str(path))}", ConfigError)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{_cut(str(path))} is not valid TOML: {_cut(str(e))}") from None
    except RecursionError:     # tomllib recurses into nested arrays and inline tables
        raise ConfigError(f"{_cut(str(path))} is not valid TOML: nested too deeply") from None
    if "base_dir" in data:
        raise ConfigError(f"{path}: 'base_dir' is set by dualpath, not in the file; remove it")
    return parse_config(data, str(path), base_dir=path.resolve().parent)


MAX_TEXT_BYTES = 10_000_000


def _read_text(path: Path, what: str, error: type[Exception]) -> str:
    """A small UTF-8 text file, or `error` saying plainly why it cannot be one."""
    try:
        with open_regular(path) as f:
            raw = f.read(MAX_TEXT_BYTES + 1)
    except IsADirectoryError:
        raise error(f"{what} is a directory; give the file inside it") from None
    except FileNotFoundError:
        hint = ("not found; create one with `dualpath init`" if error is ConfigError else
                "does not exist; create it with one ticker per line")
        raise error(f"{what} {hint}") from None
    except (OSError, ValueError) as e:     # permissions, a NUL in the name, a FIFO...
        raise error(f"cannot read {what}: {_cut(getattr(e, 'strerror', None) or str(e))}") from None
    if len(raw) > MAX_TEXT_BYTES:
        raise error(f"{what} is larger than {MAX_TEXT_BYTES // 1_000_000} MB; is it the right file?")
    if raw[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        raise error(f"{what} is UTF-16 text; save it as UTF-8")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise error(f"{what} is not UTF-8 text (bad byte at offset {e.start}); "
                    "save it as UTF-8") from None


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, date):
        return v.isoformat()
    return orjson.dumps(str(v)).decode()   # a JSON string is a valid TOML basic string


def dump_toml(data: dict, prefix: str = "") -> str:
    """Write a config dict as TOML (tables of scalars and lists; enough for dualpath configs)."""
    scalars = {k: v for k, v in data.items() if v is not None and not isinstance(v, dict)}
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    out = [f"[{prefix}]"] if prefix and scalars else []
    out += [f"{k} = {_toml_value(v)}" for k, v in scalars.items()]
    for k, v in tables.items():
        sub = dump_toml(v, f"{prefix}.{k}" if prefix else k)
        if sub:
            out += ["", sub] if out else [sub]
    return "\n".join(out)
