"""Read-side queries: run summaries, run listing, ad-hoc SQL, frames for `evals`."""

from __future__ import annotations

import duckdb
import pandas as pd

RUN_SUMMARY = """
WITH u AS (
    SELECT run_id, count(*) AS units, count(grade) AS graded,
           count(*) - count(grade) AS failed, avg(seconds) AS unit_seconds
    FROM units GROUP BY run_id),
c AS (
    SELECT run_id, count(*) AS calls, count(*) FILTER (WHERE finish_reason = 'length') AS runaway,
           count(*) FILTER (WHERE error_kind IS NOT NULL) AS call_errors,
           count(*) FILTER (WHERE contaminated IS NOT NULL) AS contaminated,
           sum(attempts - 1)::BIGINT AS retries,
           sum(latency_s) AS client_busy_s,
           sum((prompt_ms + predicted_ms) / 1000) AS server_busy_s
    FROM calls GROUP BY run_id)
SELECT r.run_id, r.night, r.path, r.status, r.status_detail, r.units_planned, r.units_done,
       coalesce(u.graded, 0) AS graded, coalesce(u.failed, 0) AS failed,
       coalesce(c.calls, 0) AS calls, coalesce(c.runaway, 0) AS runaway,
       coalesce(c.call_errors, 0) AS call_errors, coalesce(c.contaminated, 0) AS contaminated,
       coalesce(c.retries, 0) AS retries, r.segments, r.slots, r.time_scale,
       r.wall_s / nullif(r.units_done, 0) / r.time_scale AS throughput_s,
       u.unit_seconds / r.time_scale AS slot_latency_s,
       -- share of the client-side call time not explained by the server's own timings:
       -- HTTP and harness overhead (and queueing); large only when the clock is compressed
       1 - c.server_busy_s * r.time_scale / nullif(c.client_busy_s, 0) AS overhead_share
FROM runs r LEFT JOIN u USING (run_id) LEFT JOIN c USING (run_id)
"""


def run_summaries(con: duckdb.DuckDBPyConnection, run_ids: list[str] | None = None) -> pd.DataFrame:
    """Per run: counts and per-ticker seconds on both bases (real-scale)."""
    if run_ids is not None:
        con.execute("CREATE OR REPLACE TEMP TABLE _ids (run_id VARCHAR)")
        if run_ids:
            con.executemany("INSERT INTO _ids VALUES (?)", [[r] for r in run_ids])
        q = f"SELECT * FROM ({RUN_SUMMARY}) WHERE run_id IN (SELECT run_id FROM _ids)"
    else:
        q = RUN_SUMMARY
    return con.execute(q + " ORDER BY night, path").df()


def path_totals(con: duckdb.DuckDBPyConnection, experiment: str | None = None) -> pd.DataFrame:
    """Per path over complete runs: nights, units, calls, runaways, both per-ticker bases."""
    where = "WHERE status = 'complete'" + (" AND run_id LIKE ?" if experiment else "")
    params = [f"{experiment}/%"] if experiment else []
    return con.execute(f"""
        SELECT path, count(*) AS nights, sum(units_done)::BIGINT AS units,
               sum(graded)::BIGINT AS graded, sum(failed)::BIGINT AS failed,
               sum(calls)::BIGINT AS calls, sum(runaway)::BIGINT AS runaway,
               sum(retries)::BIGINT AS retries,
               median(throughput_s) AS throughput_s_median,
               median(slot_latency_s) AS slot_latency_s_median,
               median(overhead_share) AS overhead_share
        FROM ({RUN_SUMMARY}) {where} GROUP BY path ORDER BY path""", params).df()


def sql(con: duckdb.DuckDBPyConnection, query: str) -> pd.DataFrame:
    """Run an ad-hoc read-only query."""
    return con.execute(query).df()


def suspect_runs(con: duckdb.DuckDBPyConnection) -> dict[str, list]:
    """Rows behind the run warnings: contaminated calls, external load, effective sampling."""
    return {
        "contaminated": con.execute("""SELECT run_id, count(*) FROM calls
                                       WHERE contaminated IS NOT NULL GROUP BY 1 ORDER BY 1""").fetchall(),
        "external_load": con.execute("""SELECT run_id, max(external_load_max), sum(external_load_polls)
                                        FROM server_sessions WHERE external_load_max > 0
                                        GROUP BY 1 ORDER BY 1""").fetchall(),
        "sampling": con.execute("""SELECT r.experiment, r.night, s.path, s.effective_sampling_json,
                                          s.n_ctx_per_slot
                                   FROM server_sessions s JOIN runs r USING (run_id)
                                   WHERE s.effective_sampling_json IS NOT NULL
                                   ORDER BY r.experiment, r.night, s.path, s.segment""").fetchall(),
    }


def server_evidence(con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Per session: what the calls say the server did vs the server's own /metrics counters,
    and slot occupancy (sum of call time / (slots x wall)). Sessions without /metrics: NaN."""
    return con.execute("""
        WITH c AS (
            SELECT run_id, sum(prompt_n) AS prompt_n, sum(predicted_n) AS predicted_n,
                   sum(latency_s) AS busy_s
            FROM calls GROUP BY run_id)
        SELECT s.session_id, s.path, s.how, s.slots,
               c.prompt_n::BIGINT AS calls_prompt_tokens,
               (json_extract(s.metrics_after_json, '$."llamacpp:prompt_tokens_total"')::DOUBLE
                 - json_extract(s.metrics_before_json, '$."llamacpp:prompt_tokens_total"')::DOUBLE)::BIGINT
                 AS server_prompt_tokens,
               c.predicted_n::BIGINT AS calls_predicted_tokens,
               (json_extract(s.metrics_after_json, '$."llamacpp:tokens_predicted_total"')::DOUBLE
                 - json_extract(s.metrics_before_json, '$."llamacpp:tokens_predicted_total"')::DOUBLE)::BIGINT
                 AS server_predicted_tokens,
               c.busy_s / nullif(r.slots * r.wall_s, 0) AS occupancy,
               s.external_load_max
        FROM server_sessions s JOIN runs r USING (run_id) JOIN c USING (run_id)
        WHERE r.segments = 1
        ORDER BY s.session_id""").df()
