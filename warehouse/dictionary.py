"""The warehouse's data dictionary: every table and view, every column with its unit and
meaning (which clock a second is on, which kind of token). `dualpath schema` prints it beside
the live schema; a test keeps it complete."""

from __future__ import annotations

import duckdb
import pandas as pd

from dualpath.warehouse.energy import DICTIONARY as ENERGY_TABLES
from dualpath.warehouse.search_index import DICTIONARY as SEARCH_TABLES
from dualpath.warehouse.unit_inputs import DICTIONARY as INPUT_TABLES
from dualpath.warehouse.candidates import DICTIONARY as CANDIDATE_TABLES

WALL = "epoch s (Unix time, comparable across machines)"
MONO = "s on the harness's monotonic clock (differences only, one boot)"

_CALL = {
    "call_id": "id — one LLM call", "run_id": "id — experiment/night/path",
    "path": "name — serving path", "night": "date — session the night scores",
    "ticker": "symbol", "draw": "1.. — independent scoring of the ticker tonight",
    "unit_attempt": "1.. — attempt of the unit (a rerun re-scores failed units)",
    "agent": "name — the pipeline role that made the call", "call_seq": "1.. — call order in the unit",
    "start_wall": f"{WALL} — request start", "end_wall": f"{WALL} — last byte",
    "start_mono": MONO, "first_token_mono": MONO + " — first streamed token",
    "end_mono": MONO,
    "latency_s": "s, client clock, compressed for simulated paths (v_calls_real: real-scale)",
    "ttft_s": "s, client clock — time to first token (streaming only)",
    "http_status": "HTTP status of the last attempt", "attempts": "count — attempts incl. retries",
    "attempt_errors": "JSON — each failed attempt before the last: attempt, kind, status, "
                      "detail, wait_s",
    "error_kind": "class of the final failure (NULL: ok)", "error_detail": "text",
    "finish_reason": "stop | length (length = runaway: hit max_tokens); any other end is a "
                     "failed attempt (error_kind bad_finish)",
    "response_model": "model name the server answered with",
    "system_fingerprint": "build the server answered with (llama-server: its build; vLLM: "
                          "vllm-<version>-<config hash>)",
    "prompt_tokens": "tokens — whole prompt (usage)", "completion_tokens": "tokens — generated (usage)",
    "cached_tokens": "tokens — prompt tokens served from cache",
    "prompt_n": "tokens — prompt tokens the server processed (llama.cpp timings; excludes cache)",
    "prompt_ms": "ms, server clock, real-scale — prefill time (vLLM: its per-request "
                 "time_to_first_token_ms)",
    "prompt_per_second": "tokens/s, server — prefill speed of this call",
    "predicted_n": "tokens — generated (llama.cpp timings)",
    "predicted_ms": "ms, server clock, real-scale — decode time (vLLM: generation_time_ms)",
    "predicted_per_second": "tokens/s, server — decode speed of this call",
    "cache_n": "tokens — reused from the slot's cache (llama.cpp)",
    "draft_n": "tokens — drafted by speculative decoding", "draft_n_accepted": "tokens — accepted drafts",
    "timings_json": "JSON — every timing the server returned, verbatim",
    "server_metrics_json": "JSON — vLLM per-request metrics, verbatim",
    "contaminated": "why this response came from another server (NULL: it did not)",
    "request_hash": "hash → texts: the request body sent (without messages)",
    "prompt_hash": "hash → v_prompts: the messages sent", "output_hash": "hash → texts: the answer",
    "reasoning_hash": "hash → texts: the model's thinking, apart from the answer (NULL: none); "
                      "never quoted into later prompts, never read for a grade",
    "reasoning_tokens": "tokens — of completion_tokens, the thinking's (see its basis)",
    "reasoning_tokens_basis": "server (counted by vLLM's reasoning parser) | chars (estimated: "
                              "completion_tokens × the thinking's share of the characters)",
    "untrusted": "JSON — what the server sent that was not kept as sent: a usage count or "
                 "timing out of range or of the wrong type (field path → the value's JSON "
                 "text; NULL in its column), the models one reply named (model); NULL: none. "
                 "A run with such a call has no speed (v_runs disturbed: untrusted)",
}
_UNIT = {
    "run_id": "id — experiment/night/path", "path": "name", "night": "date", "ticker": "symbol",
    "draw": "1..", "unit_attempt": "1.. — earlier attempts stay, marked not final",
    "start_wall": WALL, "end_wall": WALL,
    "seconds": "s, client monotonic, compressed for simulated paths — first call start to "
               "last call end (slot-latency basis)",
    "n_calls": "count", "grade": "1-5 (NULL: no grade)",
    "failure_kind": "legacy (before m004); see outcome", "failure_detail": "text — why no grade",
    "final_hash": "hash → texts: the answer that carried the grade",
    "outcome": "graded | parse_failed (measurements) | call_failed | input_failed | "
               "pipeline_failed | contaminated | abandoned",
}
_RUN = {
    "run_id": "id — experiment/night/path", "experiment": "name", "night": "date", "path": "name",
    "engine": "llama.cpp | vllm | openai | sim", "config_hash": "hash of what the night measures",
    "status": "complete | partial | failed | running — only complete runs are results",
    "units_planned": "count — tickers × draws", "units_done": "count — units with an outcome",
    "slots": "count — requests kept in flight", "time_scale": "factor — simulated clock compression (1: real)",
    "started_at": "timestamp", "ended_at": "timestamp",
    "wall_s": "s, compressed for simulated paths — sum of segment wall clocks",
    "segments": "count — scoring sessions (a resume adds one)", "status_detail": "text — why not complete",
    "units_measured": "count — graded or parse_failed", "tickers_planned": "count",
}
_SESSION = {
    "session_id": "id — run_id#segment", "run_id": "id", "segment": "1..", "path": "name",
    "engine": "configured engine", "dialect": "llama.cpp | vllm — what the server speaks",
    "base_url": "URL", "how": "attached | launched | simulated", "model": "as the server reports it",
    "model_path": "as the server reports it", "slots": "count (llama-server /props)",
    "n_ctx_per_slot": "tokens — context per slot", "build": "build or version",
    "speculative": "bool — speculative decoding / MTP on", "sampling_json": "JSON — server defaults",
    "raw_json": "JSON — identity endpoints, verbatim", "command": "launch argv, secrets redacted",
    "env_json": "JSON — launch env overrides, secrets redacted", "gpu_state": "nvidia-smi / rocm-smi text",
    "started_wall": WALL, "stopped_wall": WALL, "log_path": "path — launched server's log",
    "metrics_before_json": "JSON — server /metrics at start", "metrics_after_json": "JSON — at end",
    "effective_sampling_json": "JSON — sampling the server applied (llama-server /slots)",
    "external_load_max": "count — busy slots that were not dualpath's",
    "external_load_polls": "count — polls that saw them", "load_polls": "count",
    "identity_checks": "count — identity re-reads during the run",
    "identity_lost_after_wall": f"{WALL} — last good re-read before a change (NULL: none)",
    "identity_lost_after_mono": f"{MONO} — the same instant: the window compared with the "
                                "calls' end_mono (NULL: none, or a journal from before m022)",
    "stopped_mono": f"{MONO} — when the segment stopped (NULL: before m022)",
    "identity_problem": "text — what changed",
    "host": "host name of the machine that scored the segment (NULL: before m011)",
    "worker": "Prefect worker that scored it on the path's work pool (NULL: the flow's own "
              "process)",
    "binary_sha256": "hex — the server's binary and the libraries beside it (llama-server "
                     "on the scoring host; NULL elsewhere)",
    "model_sha256": "hex — its model file ('sampled:' over 1 GiB: size, head, tail)",
    "unanswered_s": "s (client clock) — longest stretch, beyond one poll period, in which the "
                    "server answered no /health poll: stopped, hung or restarting (NULL: "
                    "before m017)",
}

_POINT = {
    "sweep_id": "id", "point_key": "hash of the point's argv", "repeat": "1.. — fresh launch each",
    "attempt": "1.. — a rerun measures an unfinished point again", "label": "what differs from base",
    "argv_json": "JSON — launch argv (placeholders unexpanded)", "slots": "count — in flight",
    "settings_json": "JSON — the axis values", "status": "ready | failed to start | incomplete "
    "(incomplete = tentative: never chosen)", "failure_kind": "out of memory | exited | not ready "
    "in time | not found | identity mismatch", "detail": "text — why not ready",
    "log_tail": "server log tail of a failed start", "base_url": "URL — a fresh port",
    "model": "as the server reports it", "build": "as the server reports it",
    "identity_json": "JSON — identity read after launch",
    "calls_planned": "count — frozen calls", "calls_ok": "count — answered by the checked server",
    "wall_s": "s, real-scale — replay wall clock", "time_scale": "factor (1: real server)",
    "prompt_tokens": "tokens — server counter delta over the replay",
    "predicted_tokens": "tokens — server counter delta over the replay",
    "prefill_tps": "tokens/s — aggregate: prompt tokens ÷ replay wall (server counters)",
    "decode_tps": "tokens/s — aggregate: generated tokens ÷ replay wall (server counters)",
    "prefill_tps_per_slot": "tokens/s — per busy slot (counter tokens ÷ counter seconds)",
    "decode_tps_per_slot": "tokens/s — per busy slot (counter tokens ÷ counter seconds)",
    "ticker_s_throughput": "s/ticker, throughput basis (replay wall ÷ tickers), real-scale",
    "ticker_s_latency": "s/ticker, slot-latency basis (median unit first to last call)",
    "runaway_share": "share of calls that hit max_tokens",
    "cached_share": "share of prompt tokens served from cache",
    "probe_prefill_tps": "tokens/s — verify probe, one request, long prompt",
    "probe_decode_tps": "tokens/s — verify probe, one request, short prompt",
    "gpu_state": "nvidia-smi / rocm-smi text: memory per device, PCIe link ('not available')",
    "metrics_before_json": "JSON — /metrics before the replay", "metrics_after_json": "JSON — after",
    "started_wall": WALL, "ended_wall": WALL,
}

TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "runs": ("one night × one path", _RUN),
    "run_segments": ("one scoring session of a run (a resume adds one)", {
        "run_id": "id", "segment": "1..", "started_wall": WALL, "ended_wall": WALL,
        "wall_s": "s, compressed for simulated paths", "units_done": "count", "calls": "count",
        "status": "complete | partial | failed | interrupted", "units_measured": "count",
        "detail": "text — the cause when not complete"}),
    "server_sessions": ("the server a segment talked to and what it said it was", _SESSION),
    "calls": ("one LLM call with the client's clocks and the server's timings", _CALL),
    "units": ("one attempt of one ticker × draw on one path", _UNIT),
    "texts": ("every answer, request body and prompt part (whole prompts before m012), "
              "stored once", {"hash": "hash — the key other tables refer to", "text": "text"}),
    "prompts": ("one distinct prompt (since m012) as its parts; read prompts in v_prompts "
                "(ad hoc, scans texts) or warehouse.prompts.prompt_texts (fast, by hash)", {
        "prompt_hash": "hash — calls.prompt_hash: DuckDB hash() of the whole JSON text",
        "parts": "hashes → texts (or quotes): the JSON text cut after each message, each "
                 "blank line inside one and around each earlier answer quoted whole, in "
                 "order; concatenated, they are the text as sent"}),
    "quotes": ("a prompt part that is an earlier answer quoted whole (since m013): stored "
               "once, as the answer", {
        "hash": "hash — the part's (prompts.parts): DuckDB hash() of the escaped text",
        "text_hash": "hash → texts: the answer (calls.output_hash); the part is its JSON "
                     "string escaping, to_json(text) without the quotes"}),
    "prices": ("one ticker × trading day", {
        "ticker": "symbol", "date": "date — session", "close": "currency — raw close",
        "adj_close": "currency — split/dividend-adjusted close (returns use this)"}),
    "price_gaps": ("days a ticker is known halted (a blank price in a file)", {
        "ticker": "symbol", "date": "date — session", "reason": "halt",
        "recorded_at": "timestamp"}),
    "price_updates": ("each nightly price update, per source", {
        "updated_at": "timestamp", "night": "date — the night it prepared",
        "source": "prices_file | prices_dir | pykrx | fdr | yfinance", "files": "count",
        "new_rows": "count", "revised_rows": "count — rows whose price changed",
        "error": "text — why the source failed (NULL: it did not)",
        "warnings_json": "JSON — the import's warnings"}),
    "plans": ("frozen preregistration plans", {
        "plan_hash": "SHA-256 of the validated plan", "experiment": "name",
        "frozen_at": "timestamp", "forced": "bool — frozen with --force (after nights of the window, or a primary the "
        "window cannot test)",
        "nights_before_freeze": "count", "plan_path": "path (absolute, as frozen)",
        "plan_json": "JSON — the plan",
        "plan_relpath": "path — relative to the config's folder (what reports check)",
        "force_reason": "text — why a forced freeze was forced (NULL: not forced)"}),
    "deviations": ("what happened that the plan did not foresee", {
        "experiment": "name", "night": "date (NULL: not tied to a night)",
        "kind": "config differs from plan | night refused | plan replaced",
        "detail": "text", "plan_hash": "hash", "recorded_at": "timestamp"}),
    "experiments": ("each experiment's runs folder, bound by its first night (since m019): "
                    "a config of the same name with another folder is refused", {
        "experiment": "name", "runs_dir": "path — where its journals live",
        "config_path": "path — the config that bound it", "host": "where it was bound",
        "bound_at": "timestamp"}),
    "schema_migrations": ("applied schema migrations", {"name": "migration", "applied_at": "timestamp"}),
    "replay_sets": ("a frozen replay set: N tickers' recorded requests (`dualpath freeze`)", {
        "replay_hash": "SHA-256 (16 hex) of what the set sends", "experiment": "name",
        "night": "date — the night frozen", "path": "name — the path whose requests they are",
        "tickers": "count", "units": "count — ticker × draw", "calls": "count",
        "prompt_tokens": "tokens — as recorded", "file_path": "path — the Parquet file",
        "created_at": "timestamp"}),
    "sweeps": ("one sweep of engine settings over one replay set", {
        "sweep_id": "hash of the spec and the replay set (a rerun resumes it)",
        "name": "the spec's name", "experiment": "name", "path": "name — the path retuned",
        "replay_hash": "hash → replay_sets", "mode": "grid | one-at-a-time | ablation",
        "knee_share": "share — the knee: fewest slots within this of the best",
        "spec_json": "JSON — the spec", "started_at": "timestamp", "ended_at": "timestamp",
        "status": "running | done", "chosen_point": "point_key of the knee (NULL: no point ready)",
        "proposal_path": "path — the [paths.X] proposal written"}),
    "sweep_points": ("one launch + replay of one sweep point (latest attempt counts)", _POINT),
    "sweep_calls": ("every replayed call of a sweep point", {
        "sweep_id": "id", "point_key": "hash of the point's argv", "repeat": "1..",
        "attempt": "1..", "ticker": "symbol", "draw": "1.. — as frozen",
        "call_seq": "1.. — call order in the unit, as frozen", "agent": "name",
        "start_mono": MONO, "first_token_mono": MONO, "end_mono": MONO,
        "latency_s": "s, client clock (compressed for simulated servers)",
        "http_status": "HTTP status", "attempts": "count", "error_kind": "NULL: ok",
        "finish_reason": "stop | length (runaway)", "prompt_tokens": "tokens (usage)",
        "completion_tokens": "tokens (usage)", "cached_tokens": "tokens from cache",
        "prompt_n": "tokens the server prefilled", "prompt_ms": "ms, server clock",
        "predicted_n": "tokens generated", "predicted_ms": "ms, server clock",
        "contaminated": "why another server answered (NULL: it did not)"}),
    "v_calls": ("calls with the flags every metric filters on", {
        **_CALL, "runaway": "bool — finish_reason = length", "is_contaminated": "bool",
        "abandoned": "bool — its unit attempt never finished",
        "unit_outcome": "outcome of the call's unit attempt", "run_status": "status of its run",
        "experiment": "name"}),
    "v_calls_real": ("calls in real-scale seconds (compare paths here)", {
        **{k: v for k, v in _CALL.items()},
        "latency_s": "s, real-scale (client clock ÷ time_scale)",
        "ttft_s": "s, real-scale — time to first token",
        "server_prefill_s": "s, server clock — prefill", "server_decode_s": "s, server clock — decode",
        "runaway": "bool", "is_contaminated": "bool", "abandoned": "bool",
        "unit_outcome": "outcome of the call's unit attempt", "run_status": "status",
        "experiment": "name",
        "service_s": "s, server clock — prefill + decode (NULL without server timings)",
        "outside_service_s": "s, real-scale — latency not covered by the server's timings: "
                             "its queue (by design with queue_depth), HTTP, the harness"}),
    "v_prompts": ("the messages each call sent, by prompt hash; every read scans texts, "
                  "so read a few prompts with warehouse.prompts.prompt_texts", {
        "prompt_hash": "hash — calls.prompt_hash", "prompt_text": "JSON — the messages as sent"}),
    "v_units": ("units with their run's status and the flags metrics use", {
        **_UNIT, "run_status": "status of its run", "experiment": "name",
        "is_final": "bool — the latest attempt of this ticker × draw",
        "measured": "bool — graded or parse_failed", "clean": "bool — no contaminated call"}),
}
TABLES.update(ENERGY_TABLES)     # energy_runs, energy_samples (warehouse.energy)
TABLES.update(SEARCH_TABLES)     # search_terms, search_docs, search_postings
TABLES.update(INPUT_TABLES)      # unit_inputs, night_inputs (warehouse.unit_inputs)
TABLES.update(CANDIDATE_TABLES)  # candidate_runs (warehouse.candidates)


def dictionary(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """The live schema joined with the dictionary: table, kind, column, type, meaning."""
    live = con.execute("""SELECT c.table_name, t.table_type, c.column_name, c.data_type
                          FROM information_schema.columns c JOIN information_schema.tables t
                          USING (table_name) WHERE t.table_schema = 'main'
                          ORDER BY t.table_type, c.table_name, c.ordinal_position""").df()
    meaning = [TABLES.get(t, ("", {}))[1].get(c, "") for t, c in
               zip(live["table_name"], live["column_name"])]
    kind = live["table_type"].map({"BASE TABLE": "table", "VIEW": "view"})
    return pd.DataFrame({"table": live["table_name"], "kind": kind, "column": live["column_name"],
                         "type": live["data_type"], "unit and meaning": meaning})
