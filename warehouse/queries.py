"""Read-side queries: run summaries, run listing, ad-hoc SQL, frames for `evals`."""

from __future__ import annotations

import duckdb
import pandas as pd

from dualpath.warehouse.counters import cached_growth, counter_growth
from dualpath.warehouse.disturbed import DISTURBED
from dualpath.warehouse.energy import ENERGY_BY_RUN

RUN_SUMMARY = """
WITH u AS (
    SELECT run_id, count(*) AS units,
           count(*) FILTER (WHERE outcome = 'graded') AS graded,
           count(*) FILTER (WHERE outcome = 'parse_failed') AS parse_failed,
           count(*) FILTER (WHERE NOT measured) AS not_measured,
           avg(seconds) FILTER (WHERE measured) AS unit_seconds
    FROM v_units WHERE is_final GROUP BY run_id),
c AS (
    SELECT run_id, count(*) AS calls, count(*) FILTER (WHERE finish_reason = 'length') AS runaway,
           count(*) FILTER (WHERE error_kind IS NOT NULL) AS call_errors,
           count(*) FILTER (WHERE contaminated IS NOT NULL) AS contaminated,
           sum(attempts - 1)::BIGINT AS retries,
           sum(latency_s) AS client_busy_s,
           sum((prompt_ms + predicted_ms) / 1000) AS server_busy_s
    FROM calls GROUP BY run_id)
SELECT r.run_id, r.night, r.path, r.status, r.status_detail, r.units_planned, r.units_done,
       r.tickers_planned,
       -- units are tickers x draws, each run at its own draws: `evals.draws.run_draws`
       -- (through `evals.speed.with_speed`) divides them, the one place that does
       coalesce(u.graded, 0) AS graded, coalesce(u.parse_failed, 0) AS parse_failed,
       coalesce(u.not_measured, 0) AS failed,
       coalesce(c.calls, 0) AS calls, coalesce(c.runaway, 0) AS runaway,
       coalesce(c.call_errors, 0) AS call_errors, coalesce(c.contaminated, 0) AS contaminated,
       coalesce(c.retries, 0) AS retries, r.segments, r.slots, r.time_scale,
       -- Speed is measured only on complete runs scored in one segment: a failed night's
       -- instant "seconds", or a resumed run's missing wall clock, are not speeds.
       -- Nor is a complete run's whose server restarted, stalled or was shared, or whose
       -- harness starved it
       -- (`warehouse.disturbed`): shown with the reason, kept out of every median. The
       -- seconds themselves are computed in one place, `evals.speed.seconds` (via
       -- `with_speed`), from wall_s, the unit counts and unit_seconds.
       d.disturbed,
       r.status = 'complete' AND r.segments = 1 AND d.disturbed IS NULL AS speed_measured,
       r.wall_s, u.unit_seconds,
       -- share of the client-side call time not explained by the server's own timings:
       -- waiting in the server's queue (queue_depth requests wait there by design, so it
       -- is not waste), HTTP and harness overhead; llama-server's timings and vLLM's
       -- per-request metrics say
       1 - c.server_busy_s * r.time_scale / nullif(c.client_busy_s, 0) AS overhead_share,
       -- board energy (warehouse.energy), per ticker only where the seconds are a result;
       -- unknown energy says why, never 0
       CASE WHEN r.status = 'complete' AND r.segments = 1 AND d.disturbed IS NULL
            THEN e.joules / nullif(r.tickers_planned, 0) END AS j_per_ticker,
       e.mean_w, e.idle_w, e.energy_unknown
FROM runs r LEFT JOIN u USING (run_id) LEFT JOIN c USING (run_id)
     LEFT JOIN (""" + DISTURBED + """) d USING (run_id)
     LEFT JOIN (""" + ENERGY_BY_RUN + """) e USING (run_id)
"""

def run_summaries(con: duckdb.DuckDBPyConnection, run_ids: list[str] | None = None) -> pd.DataFrame:
    """Per run: counts, status, the run's wall clock and mean unit seconds (client clock);
    `evals.speed.with_speed` adds the per-ticker seconds on both bases (real-scale)."""
    if run_ids is not None:
        con.execute("CREATE OR REPLACE TEMP TABLE _ids (run_id VARCHAR)")
        if run_ids:
            con.executemany("INSERT INTO _ids VALUES (?)", [[r] for r in run_ids])
        q = f"SELECT * FROM ({RUN_SUMMARY}) WHERE run_id IN (SELECT run_id FROM _ids)"
    else:
        q = RUN_SUMMARY
    return con.execute(q + " ORDER BY night, path").df()


def speed_runs(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Every complete, one-segment, undisturbed run's path, slots, wall clock, units and time
    scale: the runs whose speed is a result (`evals.speed.seconds` turns them into seconds)."""
    return con.execute(f"""SELECT path, slots, wall_s, units_planned AS units, tickers_planned,
                                  time_scale FROM runs
                           WHERE status = 'complete' AND segments = 1 AND wall_s > 0
                           AND run_id NOT IN (SELECT run_id FROM ({DISTURBED})
                                              WHERE disturbed IS NOT NULL)""").df()


def sql(con: duckdb.DuckDBPyConnection, query: str) -> pd.DataFrame:
    """Run an ad-hoc read-only query (one that returns no result, e.g. only a comment, is
    refused)."""
    from dualpath.errors import UserError

    result = con.execute(query)
    if result is None or result.description is None:
        raise UserError("the query returns no result; give a SELECT (or another statement "
                        "that returns rows)")
    return result.df()


def suspect_runs(con: duckdb.DuckDBPyConnection) -> dict[str, list]:
    """Rows behind the run warnings: contaminated calls, external load, effective sampling."""
    return {
        "contaminated": con.execute("""SELECT run_id, count(*) FROM calls
                                       WHERE contaminated IS NOT NULL GROUP BY 1 ORDER BY 1""").fetchall(),
        "identity": con.execute("""SELECT run_id, identity_problem FROM server_sessions
                                   WHERE identity_problem IS NOT NULL ORDER BY 1""").fetchall(),
        "external_load": con.execute("""SELECT run_id, max(external_load_max), sum(external_load_polls)
                                        FROM server_sessions WHERE external_load_max > 0
                                        GROUP BY 1 ORDER BY 1""").fetchall(),
        "disturbed": con.execute(f"""SELECT d.run_id, d.disturbed FROM ({DISTURBED}) d
                                     JOIN runs r USING (run_id)
                                     WHERE d.disturbed IS NOT NULL AND r.status = 'complete'
                                     ORDER BY 1""").fetchall(),
        "sampling": con.execute("""SELECT r.experiment, r.night, s.path, s.effective_sampling_json,
                                          s.n_ctx_per_slot
                                   FROM server_sessions s JOIN runs r USING (run_id)
                                   WHERE s.effective_sampling_json IS NOT NULL
                                   ORDER BY r.experiment, r.night, s.path, s.segment""").fetchall(),
    }


def server_evidence(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per session (with its night and run): what the calls say the server did vs the
    server's own /metrics counters, in tokens and in seconds, the server's aggregate rates,
    and slot occupancy.

    Seconds: `calls_*_s` sum each call's own server timings (slot-seconds; under batching
    they overlap, so they are per-call figures), `server_*_s` are the server's counters
    (llama-server prompt_seconds_total / tokens_predicted_seconds_total, vLLM's prefill and
    decode time sums). `server_prefill_tps` / `server_decode_tps` are the server's tokens over
    its own seconds; `decode_tps_over_wall` is generated tokens over the run's wall clock,
    the aggregate a night gets from all its slots. Occupancy is from the server's side: the
    calls' service time (prompt + decode, real-scale) over slots x wall; `occupancy_client`
    counts client-side in-flight time instead (it includes queueing and HTTP). Sessions
    without /metrics: NaN.

    A server that restarted on the same port during the session (the watcher saw its
    counters go down; `dualpath:restarts` in metrics_after_json) has counters that cover
    only part of it: its server columns are left empty, `comparable` is false and `note`
    says why, instead of comparing reset counters with the whole session's calls."""
    prompt = f"({counter_growth('prompt_tokens', 's')} - {cached_growth('s')})"
    predicted = counter_growth("predicted_tokens", "s")
    prompt_s = counter_growth("prompt_seconds", "s")
    predicted_s = counter_growth("predicted_seconds", "s")
    ok = "s.restarts = 0 AND NOT coalesce(s.went_down, false)"
    return con.execute(f"""
        WITH c AS (
            -- prefill: llama-server's processed prompt tokens (prompt_n); a vLLM call's
            -- prompt tokens less its cached ones (known with --enable-prompt-tokens-details)
            SELECT run_id, coalesce(sum(prompt_n),
                                    sum(prompt_tokens - coalesce(cached_tokens, 0))) AS prompt_n,
                   coalesce(sum(predicted_n), sum(completion_tokens)) AS predicted_n,
                   sum(prompt_ms) / 1e3 AS prompt_s, sum(predicted_ms) / 1e3 AS predicted_s,
                   sum(latency_s) AS busy_s,
                   count(*) FILTER (WHERE http_status = 200 AND cached_tokens IS NULL)
                       AS no_cached_count
            FROM calls GROUP BY run_id),
        s AS (
            SELECT *, coalesce(json_extract(metrics_after_json,
                                            '$."dualpath:restarts"')::INTEGER, 0) AS restarts,
                   -- counters that went down between the session's first and last reading
                   -- are a restart even when no poll in between saw it
                   {prompt} < 0 OR {predicted} < 0 AS went_down,
                   {prompt_s} AS d_prompt_s, {predicted_s} AS d_predicted_s
            FROM server_sessions s)
        SELECT r.night, s.run_id, s.session_id, s.path, s.how, s.slots,
               c.prompt_n::BIGINT AS calls_prompt_tokens,
               CASE WHEN {ok} THEN {prompt}::BIGINT END AS server_prompt_tokens,
               c.predicted_n::BIGINT AS calls_predicted_tokens,
               CASE WHEN {ok} THEN {predicted}::BIGINT END AS server_predicted_tokens,
               round(c.prompt_s, 3) AS calls_prompt_s,
               CASE WHEN {ok} THEN round(s.d_prompt_s, 3) END AS server_prompt_s,
               round(c.predicted_s, 3) AS calls_predicted_s,
               CASE WHEN {ok} THEN round(s.d_predicted_s, 3) END AS server_predicted_s,
               CASE WHEN {ok} THEN {prompt} / nullif(s.d_prompt_s, 0) END AS server_prefill_tps,
               CASE WHEN {ok} THEN {predicted} / nullif(s.d_predicted_s, 0)
                    END AS server_decode_tps,
               CASE WHEN {ok} THEN {predicted} / nullif(r.wall_s / r.time_scale, 0)
                    END AS decode_tps_over_wall,
               (c.prompt_s + c.predicted_s) * r.time_scale
                   / nullif(r.slots * r.wall_s, 0) AS occupancy,
               c.busy_s / nullif(r.slots * r.wall_s, 0) AS occupancy_client,
               s.external_load_max,
               greatest(s.restarts, coalesce(s.went_down, false)::INTEGER) AS restarts,
               s.metrics_after_json IS NOT NULL AND s.restarts = 0
                   AND NOT coalesce(s.went_down, false) AS comparable,
               CASE WHEN s.restarts > 0 OR coalesce(s.went_down, false) THEN
                        'server restarted mid-session: counters reset, not compared'
                    WHEN s.metrics_after_json IS NULL THEN 'no /metrics from the server'
                    WHEN s.dialect = 'vllm' AND c.no_cached_count > 0 THEN
                        'vLLM without --enable-prompt-tokens-details: its calls do not say '
                        || 'which prompt tokens were cached, so calls_prompt_tokens reads high'
               END AS note
        FROM s JOIN runs r USING (run_id) JOIN c USING (run_id)
        WHERE r.segments = 1
        ORDER BY s.session_id""").df()


def run_hosts(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per segment of each run: the host and the Prefect worker that scored it (worker empty:
    the nightly flow's own process), and how the server was obtained there."""
    return con.execute("""
        SELECT r.night, s.path, s.segment, s.host, s.worker, s.how, s.base_url
        FROM server_sessions s JOIN runs r USING (run_id)
        ORDER BY r.night, s.path, s.segment""").df()


def night_runs(con: duckdb.DuckDBPyConnection, experiment: str, night) -> dict[str, tuple]:
    """Path -> (status, config_hash) of each stored run of the experiment's night."""
    rows = con.execute("SELECT path, status, config_hash FROM runs WHERE experiment = ? "
                       "AND night = ?", [experiment, night]).fetchall()
    return {path: (status, config_hash) for path, status, config_hash in rows}
