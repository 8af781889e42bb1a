"""Runs whose speed is not a measurement although they completed: the server was disturbed.

A complete run's seconds are a speed only if the server spent the run on this run alone.
Three disturbances are read from what each segment's watcher recorded (`server_sessions`)
and the run's own calls:

* **restarted** — the server's monotonic counters went down during the session (the
  watcher counted `dualpath:restarts`, or the end reading is below the start's): its calls
  waited out a restart and were retried.
* **stalled** — the server answered no /health poll for `STALL_S` seconds or more beyond one
  poll period (a SIGSTOP, a hang): every call in flight waited that long.
* **shared** — someone else's requests ran on the server: the watcher saw more busy slots
  than dualpath had in flight (vLLM), or the server generated more tokens than this run's
  calls received (its own counter vs the calls' sum). The second is the one that works on
  llama-server, where dualpath keeps more requests in flight than there are slots
  (`queue_depth`), so busy slots can never exceed them. Failed attempts may have made the
  server generate tokens the calls never received: up to twice the retried call's length
  each (a seeded retry repeats the answer; the run's longest answer for a call that never
  got one) is allowed, and 1% + 64 tokens of slack.

`DISTURBED` is a SELECT of (run_id, disturbed): the reasons in words, NULL for an undisturbed
run (or one without the evidence). `warehouse.queries.RUN_SUMMARY` and
`warehouse.frames.runs_frame` join it; such runs are shown with the reason and kept out of
every speed median, as runs that were not complete are.
"""

from __future__ import annotations

STALL_S = 15.0          # longer than one poll's timeout (10 s): a slow answer is not a stall
SHARED_SLACK = 0.01     # share of the run's generated tokens the server may count beyond it
SHARED_SLACK_TOKENS = 64


def _counter(col: str, llama: str, vllm: str) -> str:
    return (f"coalesce(json_extract({col}, '$.\"llamacpp:{llama}\"'), "
            f"json_extract({col}, '$.\"vllm:{vllm}\"'))::DOUBLE")


_PREDICTED = (f"({_counter('metrics_after_json', 'tokens_predicted_total', 'generation_tokens_total')}"
              f" - {_counter('metrics_before_json', 'tokens_predicted_total', 'generation_tokens_total')})")
_PROMPT = (f"({_counter('metrics_after_json', 'prompt_tokens_total', 'prompt_tokens_total')}"
           f" - {_counter('metrics_before_json', 'prompt_tokens_total', 'prompt_tokens_total')})")

DISTURBED = f"""
SELECT run_id, nullif(concat_ws('; ',
    CASE WHEN s.restarts > 0 OR s.went_down THEN 'restarted: the server''s counters reset '
         || 'mid-run' END,
    CASE WHEN s.unanswered_s >= {STALL_S} THEN 'stalled: the server answered nothing for '
         || round(s.unanswered_s)::BIGINT || ' s' END,
    CASE WHEN s.external_load_polls > 0 THEN 'shared: up to ' || s.external_load_max
         || ' request(s) on the server were not this run''s' END,
    CASE WHEN NOT (s.restarts > 0 OR s.went_down)
              AND s.server_predicted - c.predicted > {SHARED_SLACK} * c.predicted
                  + {SHARED_SLACK_TOKENS} + c.allowance
         THEN 'shared: the server generated ' || (s.server_predicted - c.predicted)::BIGINT
              || ' tokens more than this run received' END), '') AS disturbed
FROM (
    SELECT run_id,
           max(coalesce(json_extract(metrics_after_json,
                                     '$."dualpath:restarts"')::INTEGER, 0)) AS restarts,
           coalesce(bool_or({_PREDICTED} < 0 OR {_PROMPT} < 0), false) AS went_down,
           sum({_PREDICTED}) AS server_predicted,
           max(unanswered_s) AS unanswered_s,
           max(external_load_max) AS external_load_max,
           sum(external_load_polls) AS external_load_polls
    FROM server_sessions GROUP BY run_id) s
JOIN (
    SELECT run_id, coalesce(sum(predicted_n), sum(completion_tokens)) AS predicted,
           -- a failed attempt (all of a failed call's) may have generated up to twice the
           -- call's answer, or the run's longest answer where the call never got one
           coalesce(sum((attempts - (error_kind IS NULL)::INTEGER)
                        * (2 * coalesce(completion_tokens, longest) + 64)), 0) AS allowance
    FROM (SELECT *, max(completion_tokens) OVER (PARTITION BY run_id) AS longest FROM calls)
    GROUP BY run_id) c USING (run_id)
"""
