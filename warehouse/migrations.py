"""Schema by ordered, named migrations recorded in `schema_migrations`.

DuckDB has no `PRAGMA user_version`, so the applied names are kept in a table. A migration
never changes once released; a new one is appended with the next number (names sort in order).
"""

from __future__ import annotations

import duckdb

from dualpath.warehouse.db import transaction
from dualpath.warehouse.energy import M024_ENERGY_BASIS
from dualpath.warehouse.energy import M026_ENERGY as ENERGY_TABLES
from dualpath.warehouse.search_index import build_search_index
from dualpath.warehouse.candidates import CANDIDATE_RUNS
from dualpath.warehouse.unit_inputs import M025_UNIT_INPUTS

M001_INITIAL = """
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY, experiment VARCHAR NOT NULL, night DATE NOT NULL,
    path VARCHAR NOT NULL, engine VARCHAR, config_hash VARCHAR NOT NULL,
    status VARCHAR NOT NULL,            -- running | complete | partial | failed
    units_planned INTEGER, units_done INTEGER, slots INTEGER, time_scale DOUBLE,
    started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, wall_s DOUBLE, segments INTEGER,
    status_detail VARCHAR
);
CREATE TABLE run_segments (              -- one scoring session of a run (a resume adds one)
    run_id VARCHAR, segment INTEGER, started_wall DOUBLE, ended_wall DOUBLE, wall_s DOUBLE,
    units_done INTEGER, calls INTEGER, status VARCHAR, PRIMARY KEY (run_id, segment)
);
CREATE TABLE server_sessions (
    session_id VARCHAR PRIMARY KEY, run_id VARCHAR, segment INTEGER, path VARCHAR,
    engine VARCHAR, base_url VARCHAR, how VARCHAR,  -- attached | launched | simulated
    model VARCHAR, model_path VARCHAR, slots INTEGER, n_ctx_per_slot INTEGER, build VARCHAR,
    speculative BOOLEAN, sampling_json VARCHAR, raw_json VARCHAR, command VARCHAR,
    env_json VARCHAR, gpu_state VARCHAR, started_wall DOUBLE, stopped_wall DOUBLE,
    log_path VARCHAR
);
-- Deduplicated text. hash = DuckDB hash() of the text (64-bit, computed in SQL at ingest;
-- ~1e-8 chance of any collision at a million texts). Ingest keeps keys unique (one writer,
-- anti-joins), which is several times faster than index maintenance on bulk loads.
CREATE TABLE texts (hash UBIGINT NOT NULL, text VARCHAR NOT NULL);
CREATE TABLE calls (
    call_id VARCHAR NOT NULL, run_id VARCHAR NOT NULL, path VARCHAR, night DATE,
    ticker VARCHAR, draw INTEGER, unit_attempt INTEGER, agent VARCHAR, call_seq INTEGER,
    start_wall DOUBLE, end_wall DOUBLE, start_mono DOUBLE, first_token_mono DOUBLE,
    end_mono DOUBLE, latency_s DOUBLE, ttft_s DOUBLE, http_status INTEGER, attempts INTEGER,
    error_kind VARCHAR, error_detail VARCHAR, finish_reason VARCHAR, response_model VARCHAR,
    system_fingerprint VARCHAR, prompt_tokens INTEGER, completion_tokens INTEGER,
    cached_tokens INTEGER, prompt_n INTEGER, prompt_ms DOUBLE, prompt_per_second DOUBLE,
    predicted_n INTEGER, predicted_ms DOUBLE, predicted_per_second DOUBLE, cache_n INTEGER,
    draft_n INTEGER, draft_n_accepted INTEGER, timings_json VARCHAR,
    server_metrics_json VARCHAR, contaminated VARCHAR,
    request_hash UBIGINT, prompt_hash UBIGINT, output_hash UBIGINT
);
CREATE TABLE units (
    run_id VARCHAR NOT NULL, path VARCHAR, night DATE, ticker VARCHAR NOT NULL,
    draw INTEGER NOT NULL, unit_attempt INTEGER NOT NULL, start_wall DOUBLE, end_wall DOUBLE,
    seconds DOUBLE, n_calls INTEGER, grade TINYINT, failure_kind VARCHAR,
    failure_detail VARCHAR, final_hash UBIGINT,
    PRIMARY KEY (run_id, ticker, draw, unit_attempt)
);
CREATE TABLE prices (
    ticker VARCHAR NOT NULL, date DATE NOT NULL, close DOUBLE, adj_close DOUBLE NOT NULL,
    PRIMARY KEY (ticker, date)
);
"""

M002_VIEWS = """
-- Calls with the flags every metric filters on. A call is abandoned when its unit never
-- finished (crash, cut-short night): it used server time but belongs to no result.
CREATE OR REPLACE VIEW v_calls AS
SELECT c.*,
       c.finish_reason = 'length' AS runaway,
       c.contaminated IS NOT NULL AS is_contaminated,
       u.run_id IS NULL AND r.status <> 'running' AS abandoned,
       r.status AS run_status, r.experiment
FROM calls c
JOIN runs r USING (run_id)
LEFT JOIN units u ON u.run_id = c.run_id AND u.ticker = c.ticker AND u.draw = c.draw
                 AND u.unit_attempt = c.unit_attempt;

-- Units with their run's status; `clean` = usable for metrics (no contaminated call).
CREATE OR REPLACE VIEW v_units AS
SELECT u.*, r.status AS run_status, r.experiment,
       NOT EXISTS (SELECT 1 FROM calls c WHERE c.run_id = u.run_id AND c.ticker = u.ticker
                   AND c.draw = u.draw AND c.unit_attempt = u.unit_attempt
                   AND c.contaminated IS NOT NULL) AS clean
FROM units u JOIN runs r USING (run_id);
"""

M003_SERVER_EVIDENCE = """
-- What the server itself counted during the session, the sampling it applied, and load
-- that was not ours (another client on the same server contaminates every timing).
ALTER TABLE server_sessions ADD COLUMN metrics_before_json VARCHAR;
ALTER TABLE server_sessions ADD COLUMN metrics_after_json VARCHAR;
ALTER TABLE server_sessions ADD COLUMN effective_sampling_json VARCHAR;
ALTER TABLE server_sessions ADD COLUMN external_load_max INTEGER;
ALTER TABLE server_sessions ADD COLUMN external_load_polls INTEGER;
ALTER TABLE server_sessions ADD COLUMN load_polls INTEGER;
"""

M004_OUTCOMES = """
-- Every unit attempt has an explicit outcome; only graded and parse_failed are measurements.
-- A run is complete only when every planned unit's latest attempt is one.
ALTER TABLE units ADD COLUMN outcome VARCHAR;
UPDATE units SET outcome = CASE
    WHEN grade IS NOT NULL THEN 'graded'
    WHEN failure_kind = 'parse_failure' THEN 'parse_failed'
    WHEN failure_kind = 'server_error' THEN 'call_failed'
    ELSE 'pipeline_failed' END;
ALTER TABLE runs ADD COLUMN units_measured INTEGER;
ALTER TABLE runs ADD COLUMN tickers_planned INTEGER;
ALTER TABLE run_segments ADD COLUMN units_measured INTEGER;
ALTER TABLE run_segments ADD COLUMN detail VARCHAR;
ALTER TABLE server_sessions ADD COLUMN dialect VARCHAR;
ALTER TABLE server_sessions ADD COLUMN identity_checks INTEGER;
ALTER TABLE server_sessions ADD COLUMN identity_lost_after_wall DOUBLE;
ALTER TABLE server_sessions ADD COLUMN identity_problem VARCHAR;
-- Runs stored 'complete' by earlier versions although some units never got a measurement
-- (e.g. every unit failed): not results. Re-label them and say why.
UPDATE runs SET
    units_measured = m.measured,
    status = CASE WHEN m.measured = 0 THEN 'failed' ELSE 'partial' END,
    status_detail = 'relabelled by m004: ' || m.measured || ' of ' || runs.units_planned
                    || ' units measured'
FROM (SELECT run_id, count(*) FILTER (WHERE outcome IN ('graded', 'parse_failed')) AS measured
      FROM units GROUP BY run_id) m
WHERE m.run_id = runs.run_id AND runs.status = 'complete' AND m.measured < runs.units_planned;
UPDATE runs SET status = 'failed', units_measured = 0,
    status_detail = 'relabelled by m004: no unit measured'
WHERE status = 'complete' AND run_id NOT IN (SELECT run_id FROM units);
UPDATE runs SET units_measured = units_done WHERE units_measured IS NULL;

-- The latest attempt of each unit is its outcome; earlier attempts stay, marked not final.
CREATE OR REPLACE VIEW v_units AS
SELECT u.*, r.status AS run_status, r.experiment,
       u.unit_attempt = max(u.unit_attempt) OVER (PARTITION BY u.run_id, u.ticker, u.draw)
           AS is_final,
       u.outcome IN ('graded', 'parse_failed') AS measured,
       NOT EXISTS (SELECT 1 FROM calls c WHERE c.run_id = u.run_id AND c.ticker = u.ticker
                   AND c.draw = u.draw AND c.unit_attempt = u.unit_attempt
                   AND c.contaminated IS NOT NULL) AND u.outcome <> 'contaminated' AS clean
FROM units u JOIN runs r USING (run_id);

-- Calls with the flags every metric filters on. A call is abandoned when its unit attempt
-- never finished (crash, cut-short night): it used server time but belongs to no result.
CREATE OR REPLACE VIEW v_calls AS
SELECT c.*,
       c.finish_reason = 'length' AS runaway,
       c.contaminated IS NOT NULL AS is_contaminated,
       (u.run_id IS NULL OR u.outcome = 'abandoned') AND r.status <> 'running' AS abandoned,
       u.outcome AS unit_outcome,
       r.status AS run_status, r.experiment
FROM calls c
JOIN runs r USING (run_id)
LEFT JOIN units u ON u.run_id = c.run_id AND u.ticker = c.ticker AND u.draw = c.draw
                 AND u.unit_attempt = c.unit_attempt;
"""

M005_PREREGISTRATION = """
-- A frozen plan: its canonical SHA-256, when it was frozen, and whether the freeze was forced
-- (after nights of its window already existed; every report says so).
CREATE TABLE plans (
    plan_hash VARCHAR PRIMARY KEY, experiment VARCHAR NOT NULL, frozen_at TIMESTAMPTZ NOT NULL,
    forced BOOLEAN NOT NULL, nights_before_freeze INTEGER, plan_path VARCHAR,
    plan_json VARCHAR NOT NULL
);
-- What happened that the plan did not foresee: a night run with another config, a refused
-- night, a missed or failed night (recorded when the report is built), a rule change.
CREATE TABLE deviations (
    experiment VARCHAR NOT NULL, night DATE, kind VARCHAR NOT NULL, detail VARCHAR,
    plan_hash VARCHAR, recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
"""

M006_REAL_SECONDS = """
-- Calls in real-scale seconds: a simulated path's clock is compressed by its own factor
-- (runs.time_scale), so raw latencies of two simulated paths are not comparable; real
-- servers have time_scale 1 and read the same here as in v_calls.
CREATE OR REPLACE VIEW v_calls_real AS
SELECT c.call_id, c.run_id, c.path, c.night, c.ticker, c.draw, c.unit_attempt, c.agent,
       c.call_seq, c.http_status, c.attempts, c.error_kind, c.finish_reason,
       c.prompt_tokens, c.completion_tokens, c.cached_tokens,
       c.latency_s / r.time_scale AS latency_s,
       c.ttft_s / r.time_scale AS ttft_s,
       c.prompt_ms / 1000.0 AS server_prefill_s,
       c.predicted_ms / 1000.0 AS server_decode_s,
       c.runaway, c.is_contaminated, c.abandoned, c.unit_outcome, c.run_status, c.experiment
FROM v_calls c JOIN runs r USING (run_id);
"""

M007_PRICE_LOG = """
-- Known halts (a blank price in a file): the freshness gate does not call them stale.
CREATE TABLE IF NOT EXISTS price_gaps (
    ticker VARCHAR NOT NULL, date DATE NOT NULL,
    reason VARCHAR NOT NULL,                    -- 'halt': a blank price in a file
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (ticker, date)
);
-- Each nightly price update, per source: what it brought and what went wrong.
CREATE TABLE IF NOT EXISTS price_updates (
    updated_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    night DATE NOT NULL, source VARCHAR NOT NULL, files INTEGER NOT NULL,
    new_rows INTEGER NOT NULL, revised_rows INTEGER NOT NULL,
    error VARCHAR, warnings_json VARCHAR NOT NULL
);
"""

M008_ATTEMPT_ERRORS = """
-- Each failed attempt of a call before its last (kind, status, detail, wait): retries by
-- fault class, on the record.
ALTER TABLE calls ADD COLUMN attempt_errors VARCHAR;
CREATE OR REPLACE VIEW v_calls AS
SELECT c.*,
       c.finish_reason = 'length' AS runaway,
       c.contaminated IS NOT NULL AS is_contaminated,
       (u.run_id IS NULL OR u.outcome = 'abandoned') AND r.status <> 'running' AS abandoned,
       u.outcome AS unit_outcome,
       r.status AS run_status, r.experiment
FROM calls c
JOIN runs r USING (run_id)
LEFT JOIN units u ON u.run_id = c.run_id AND u.ticker = c.ticker AND u.draw = c.draw
                 AND u.unit_attempt = c.unit_attempt;
"""

M009_PROMPT_VIEW = """
-- The messages each call sent, as recorded (JSON array), by prompt hash: the one way to read
-- prompts back, whatever the storage beneath.
CREATE OR REPLACE VIEW v_prompts AS
SELECT hash AS prompt_hash, text AS prompt_text FROM texts;
"""

# sweeps of engine settings over a frozen replay set (issue: retuning a path)
M010_SWEEPS = """
-- A frozen replay set: recorded requests of N tickers (the Parquet file holds the bodies).
CREATE TABLE replay_sets (
    replay_hash VARCHAR PRIMARY KEY, experiment VARCHAR NOT NULL, night DATE NOT NULL,
    path VARCHAR NOT NULL, tickers INTEGER, units INTEGER, calls INTEGER,
    prompt_tokens BIGINT, file_path VARCHAR, created_at TIMESTAMPTZ DEFAULT now()
);
-- A sweep: one spec over one replay set; its id hashes both, so a rerun resumes it.
CREATE TABLE sweeps (
    sweep_id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, experiment VARCHAR, path VARCHAR,
    replay_hash VARCHAR NOT NULL, mode VARCHAR, knee_share DOUBLE, spec_json VARCHAR,
    started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ,
    status VARCHAR,                       -- running | done
    chosen_point VARCHAR, proposal_path VARCHAR
);
-- One launch + replay of one point (a rerun of an unfinished one adds an attempt).
CREATE TABLE sweep_points (
    sweep_id VARCHAR NOT NULL, point_key VARCHAR NOT NULL, repeat INTEGER NOT NULL,
    attempt INTEGER NOT NULL, label VARCHAR, argv_json VARCHAR, slots INTEGER,
    settings_json VARCHAR,
    status VARCHAR NOT NULL,              -- ready | failed to start | incomplete
    failure_kind VARCHAR, detail VARCHAR, log_tail VARCHAR, base_url VARCHAR,
    model VARCHAR, build VARCHAR, identity_json VARCHAR,
    calls_planned INTEGER, calls_ok INTEGER, wall_s DOUBLE, time_scale DOUBLE,
    prompt_tokens BIGINT, predicted_tokens BIGINT, prefill_tps DOUBLE, decode_tps DOUBLE,
    prefill_tps_per_slot DOUBLE, decode_tps_per_slot DOUBLE, ticker_s_throughput DOUBLE,
    ticker_s_latency DOUBLE, runaway_share DOUBLE, cached_share DOUBLE,
    probe_prefill_tps DOUBLE, probe_decode_tps DOUBLE, gpu_state VARCHAR,
    metrics_before_json VARCHAR, metrics_after_json VARCHAR,
    started_wall DOUBLE, ended_wall DOUBLE,
    PRIMARY KEY (sweep_id, point_key, repeat, attempt)
);
-- Every replayed call of a point attempt.
CREATE TABLE sweep_calls (
    sweep_id VARCHAR NOT NULL, point_key VARCHAR NOT NULL, repeat INTEGER NOT NULL,
    attempt INTEGER NOT NULL, ticker VARCHAR, draw INTEGER, call_seq INTEGER, agent VARCHAR,
    start_mono DOUBLE, first_token_mono DOUBLE, end_mono DOUBLE, latency_s DOUBLE,
    http_status INTEGER, attempts INTEGER, error_kind VARCHAR, finish_reason VARCHAR,
    prompt_tokens INTEGER, completion_tokens INTEGER, cached_tokens INTEGER,
    prompt_n INTEGER, prompt_ms DOUBLE, predicted_n INTEGER, predicted_ms DOUBLE,
    contaminated VARCHAR
);
"""

# which host and worker scored each path-run
M011_HOSTS = """
ALTER TABLE server_sessions ADD COLUMN IF NOT EXISTS host VARCHAR;
ALTER TABLE server_sessions ADD COLUMN IF NOT EXISTS worker VARCHAR;
"""

# prompts stored as their messages, each distinct message once
M012_MESSAGES = """
-- A prompt (the JSON text of its messages) as its parts: the text cut after each message and
-- after each blank line inside one, each distinct part stored once in texts. A unit's 17
-- prompts repeat the ticker context and earlier answers, section by section, so a prompt
-- costs a list of hashes. Prompts ingested before this stay whole in texts; v_prompts reads
-- both, and returns each call's prompt_hash once, byte for byte the text that was sent.
CREATE TABLE prompts (prompt_hash UBIGINT NOT NULL, parts UBIGINT[] NOT NULL);
CREATE OR REPLACE VIEW v_prompts AS
SELECT p.prompt_hash, string_agg(t.text, '' ORDER BY u.seq) AS prompt_text
FROM prompts p, unnest(p.parts) WITH ORDINALITY AS u(part_hash, seq)
JOIN texts t ON t.hash = u.part_hash
GROUP BY p.prompt_hash
UNION ALL
SELECT hash AS prompt_hash, text AS prompt_text FROM texts
WHERE hash IN (SELECT prompt_hash FROM calls) AND hash NOT IN (SELECT prompt_hash FROM prompts);
"""

# an answer quoted whole in later prompts is stored once, as the answer
M013_QUOTES = """
-- A prompt part that is an earlier answer quoted whole: its text is not in texts under its own
-- hash but is the answer (texts.hash = text_hash, the call's output_hash) as JSON escapes it
-- inside a string, which is what DuckDB's to_json writes (checked when it was journaled).
CREATE TABLE quotes (hash UBIGINT NOT NULL, text_hash UBIGINT NOT NULL);
-- The slow, ad-hoc way to read prompts: a filter on prompt_hash reaches the prompts table,
-- but every read still scans texts whole. Read a few prompts with
-- warehouse.prompts.prompt_texts, which looks up only the rows it needs.
CREATE OR REPLACE VIEW v_prompts AS
SELECT p.prompt_hash,
       string_agg(coalesce(t.text, (to_json(a.text)::VARCHAR)[2:-2]), '' ORDER BY u.seq)
           AS prompt_text
FROM prompts p, unnest(p.parts) WITH ORDINALITY AS u(part_hash, seq)
LEFT JOIN texts t ON t.hash = u.part_hash
LEFT JOIN quotes q ON q.hash = u.part_hash AND t.hash IS NULL
LEFT JOIN texts a ON a.hash = q.text_hash
GROUP BY p.prompt_hash
UNION ALL
SELECT hash AS prompt_hash, text AS prompt_text FROM texts
WHERE hash IN (SELECT prompt_hash FROM calls) AND hash NOT IN (SELECT prompt_hash FROM prompts);
"""

M014_SERVICE_SPLIT = """
-- A call's time split by the server's own timings (llama-server sends them; vLLM does not:
-- NULL there): service_s, what the server spent on it (prefill + decode), and
-- outside_service_s, the rest of its client-side latency: waiting in the server's queue
-- (where queue_depth requests wait by design), HTTP and the harness. Real-scale seconds.
CREATE OR REPLACE VIEW v_calls_real AS
SELECT c.call_id, c.run_id, c.path, c.night, c.ticker, c.draw, c.unit_attempt, c.agent,
       c.call_seq, c.http_status, c.attempts, c.error_kind, c.finish_reason,
       c.prompt_tokens, c.completion_tokens, c.cached_tokens,
       c.latency_s / r.time_scale AS latency_s,
       c.ttft_s / r.time_scale AS ttft_s,
       c.prompt_ms / 1000.0 AS server_prefill_s,
       c.predicted_ms / 1000.0 AS server_decode_s,
       c.runaway, c.is_contaminated, c.abandoned, c.unit_outcome, c.run_status, c.experiment,
       (c.prompt_ms + c.predicted_ms) / 1000.0 AS service_s,
       c.latency_s / r.time_scale - (c.prompt_ms + c.predicted_ms) / 1000.0
           AS outside_service_s
FROM v_calls c JOIN runs r USING (run_id);
"""

M015_PLAN_PROVENANCE = """
-- Where the plan file lies relative to the config's folder (a copied or moved study folder
-- is checked against its own copy of the plan, not the original's absolute path), and why a
-- forced freeze was forced (a report names it).
ALTER TABLE plans ADD COLUMN plan_relpath VARCHAR;
ALTER TABLE plans ADD COLUMN force_reason VARCHAR;
"""

M016_SERVER_FILES = """
-- What a server on the scoring host ran: the SHA-256 of its binary and the libraries beside
-- it, and of its model file (NULL: the server is on another host, or not a llama-server).
ALTER TABLE server_sessions ADD COLUMN IF NOT EXISTS binary_sha256 VARCHAR;
ALTER TABLE server_sessions ADD COLUMN IF NOT EXISTS model_sha256 VARCHAR;
"""

# The watcher records how long the server went without answering (a SIGSTOP, a hang, a
# restart): a run that waited on a stopped server has no trustworthy speed.
M017_UNANSWERED = """
ALTER TABLE server_sessions ADD COLUMN IF NOT EXISTS unanswered_s DOUBLE;
"""

M018_THINKING = """
-- A thinking model's thinking, kept apart from its answer: the text in texts (by hash; NULL
-- when the call thought nothing), never quoted into later prompts nor read for a grade; its
-- tokens as the server counted them (basis 'server': vLLM with a reasoning parser) or
-- estimated from the characters' share of completion_tokens (basis 'chars': llama-server,
-- which does not count them, and vLLM's inline <think>).
ALTER TABLE calls ADD COLUMN IF NOT EXISTS reasoning_hash UBIGINT;
ALTER TABLE calls ADD COLUMN IF NOT EXISTS reasoning_tokens INTEGER;
ALTER TABLE calls ADD COLUMN IF NOT EXISTS reasoning_tokens_basis VARCHAR;
"""

M019_EXPERIMENTS = """
-- Each experiment is bound to the runs folder its journals live in, by its first night:
-- the same experiment name scored into a second folder overwrote its runs and stored their
-- calls twice (408 duplicated). A config with another folder is refused by name.
CREATE TABLE experiments (
    experiment VARCHAR PRIMARY KEY, runs_dir VARCHAR NOT NULL, config_path VARCHAR,
    host VARCHAR, bound_at TIMESTAMPTZ
);
"""

# A server's numbers are untrusted: what a reply sent that was not kept as sent (a count past
# any context or of the wrong type, several models in one reply) is recorded with the call.
M020_UNTRUSTED = """
ALTER TABLE calls ADD COLUMN IF NOT EXISTS untrusted VARCHAR;
"""

M022_SESSION_MONO = """
ALTER TABLE server_sessions ADD COLUMN IF NOT EXISTS identity_lost_after_mono DOUBLE;
ALTER TABLE server_sessions ADD COLUMN IF NOT EXISTS stopped_mono DOUBLE;
"""

MIGRATIONS: list[tuple] = [
    ("m001_initial", M001_INITIAL),
    ("m002_views", M002_VIEWS),
    ("m003_server_evidence", M003_SERVER_EVIDENCE),
    ("m004_outcomes", M004_OUTCOMES),
    ("m005_preregistration", M005_PREREGISTRATION),
    ("m006_real_seconds", M006_REAL_SECONDS),
    ("m007_price_log", M007_PRICE_LOG),
    ("m008_attempt_errors", M008_ATTEMPT_ERRORS),
    ("m009_prompt_view", M009_PROMPT_VIEW),
    ("m010_sweeps", M010_SWEEPS),
    ("m011_hosts", M011_HOSTS),
    ("m012_messages", M012_MESSAGES),
    ("m013_quotes", M013_QUOTES),
    ("m014_service_split", M014_SERVICE_SPLIT),
    ("m015_plan_provenance", M015_PLAN_PROVENANCE),
    ("m016_server_files", M016_SERVER_FILES),
    ("m017_unanswered", M017_UNANSWERED),
    ("m018_thinking", M018_THINKING),
    ("m019_experiments", M019_EXPERIMENTS),
    ("m020_untrusted", M020_UNTRUSTED),
    ("m021_energy", ENERGY_TABLES),
    ("m022_session_mono", M022_SESSION_MONO),
    ("m023_search_index", build_search_index),      # SQL that fills tables: a function
    ("m024_energy_basis", M024_ENERGY_BASIS),
    ("m025_unit_inputs", M025_UNIT_INPUTS + CANDIDATE_RUNS),
]

# Former names of MIGRATIONS[14:22], in order: numbered when written, on branches that landed
# in another order. A warehouse keeps the names it was given until its next writer renames them.
FORMER_NAMES: dict[str, str] = dict(zip(
    ["m018_plan_provenance", "m021_server_files", "m023_unanswered", "m015_thinking",
     "m017_experiments", "m025_untrusted", "m026_energy", "m028_session_mono"],
    [name for name, _ in MIGRATIONS[14:22]], strict=True))


def applied(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The migrations this warehouse has had applied, by today's names."""
    rows = con.execute("SELECT name FROM schema_migrations").fetchall()
    return {FORMER_NAMES.get(r[0], r[0]) for r in rows}


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply every migration not yet applied, each in its own transaction; returns their names."""
    con.execute("CREATE TABLE IF NOT EXISTS schema_migrations "
                "(name VARCHAR PRIMARY KEY, applied_at TIMESTAMPTZ DEFAULT now())")
    done = applied(con)
    with transaction(con):
        con.executemany("UPDATE schema_migrations SET name = ? WHERE name = ?",
                        [(new, old) for old, new in FORMER_NAMES.items()])
    applied_now = []
    for name, sql in [m for m in MIGRATIONS if m[0] not in done]:
        with transaction(con):
            sql(con) if callable(sql) else con.execute(sql)
            con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [name])
        applied_now.append(name)
    return applied_now
