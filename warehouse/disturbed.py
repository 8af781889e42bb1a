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
* **gpu** — the path's GPU changed during the run (`warehouse.energy`): its power limit
  changed, its PCIe link trained narrower, or a process that was not there when the night
  began took memory on it.
* **untrusted** — a call's server sent a token count or timing out of range or of the
  wrong type (`calls.untrusted`): the run's tokens and speed lack it.
* **starved** — the harness, not the server, set the pace: while units were still waiting
  to start (the run's first call to its last unit's start; the scheduler admits a unit
  whenever a slot would sit idle, so a fast enough harness keeps every slot busy there), the
  calls' own server timings fill fewer than `STARVED_BELOW` of slots x that time. The server
  sat idle more than it worked while dualpath held the work: the client's machine was too
  slow to send, read and journal the calls (a loaded CPU, or a simulated path's compressed
  clock, where each millisecond of harness delay reads as seconds). A real server idle
  because the last units are finishing is not starved: that tail is outside the window.
  Each call's service is counted in the window in proportion to the part of its client
  interval inside it. Runs whose calls carry no server timings (an engine that reports none)
  and runs whose window is under `STARVED_MIN_WINDOW` of the wall clock (too few units
  for their slots to judge) are not judged.

`DISTURBED` is a SELECT of (run_id, disturbed): the reasons in words, NULL for an undisturbed
run (or one without the evidence). `warehouse.queries.RUN_SUMMARY` and
`warehouse.frames.runs_frame` join it; such runs are shown with the reason and kept out of
every speed median, as runs that were not complete are.
"""

from __future__ import annotations

from dualpath.warehouse.counters import counter_growth

STALL_S = 15.0          # longer than one poll's timeout (10 s): a slow answer is not a stall
SHARED_SLACK = 0.01     # share of the run's generated tokens the server may count beyond it
SHARED_SLACK_TOKENS = 64
# Half: below it the slots spent more of the queued time idle than serving, so the harness
# set the pace more than the server did. A real server whose slots are kept full reads
# 0.94-0.99 (H200, llama-server's log). The demo's 20 nights at --clock 0.3 on 2 cores
# (s/ticker x busy stays ~257 backup, ~44 main: the pace is the harness's): lightly loaded,
# backup 0.60-0.75 and main 0.72-0.84 (369 and 55 s/ticker), none flagged; at a load of 4-5,
# 0.40-0.66 and 0.48-0.77, 12 of 40 flagged; the trial's at 8.5-12, 0.11-0.46 and 0.14-0.65
# (962 and 132 s/ticker), 38 of 40 flagged.
STARVED_BELOW = 0.5
STARVED_MIN_WINDOW = 0.25
KEPT_FULL = 0.9         # client-side requests in flight per slot: "dualpath kept them full"


# the server's own token counters, whichever engine's (llama-server, vLLM, SGLang): the
# growth over the session; prompt tokens as counted (cache hits included where the engine
# counts them), which is all "went down" needs
_PREDICTED = counter_growth("predicted_tokens")
_PROMPT = counter_growth("prompt_tokens")

# Per run, over the window in which units waited to start (first call to last unit start):
# `busy` = the calls' server time there ÷ (slots × window), `in_flight` = the calls' client
# time there ÷ the same. NULL where the run cannot be judged (see the module docstring).
# Times are on the harness's monotonic clock (t0, t1) where every call of the run has it,
# else (journals from before monotonic stamps) the wall clock: a wall clock stepped during
# the night (NTP, an operator) put hours of nothing inside the window and read as starved.
# A unit's start is its first call's.
QUEUED = f"""
WITH c AS (
    SELECT *, CASE WHEN mono THEN start_mono ELSE start_wall END AS t0,
              CASE WHEN mono THEN end_mono ELSE end_wall END AS t1
    FROM (SELECT *, bool_and(start_mono IS NOT NULL AND end_mono IS NOT NULL)
                    OVER (PARTITION BY run_id) AS mono FROM calls)),
a AS (SELECT run_id, min(t0) AS w0 FROM c GROUP BY run_id),
b AS (SELECT run_id, max(u0) AS w1
      FROM (SELECT run_id, min(t0) AS u0 FROM c GROUP BY run_id, ticker, draw, unit_attempt)
      GROUP BY run_id)
SELECT run_id,
       sum(service * share) / nullif(any_value(slots) * any_value(w1 - w0), 0) AS busy,
       sum(inside) / nullif(any_value(slots) * any_value(w1 - w0), 0) AS in_flight
FROM (
    SELECT c.run_id, r.slots, a.w0, b.w1,
           (c.prompt_ms + c.predicted_ms) / 1e3 * r.time_scale AS service,
           greatest(0, least(c.t1, b.w1) - greatest(c.t0, a.w0)) AS inside,
           CASE WHEN c.t1 > c.t0 THEN inside / (c.t1 - c.t0)
                ELSE (c.t0 BETWEEN a.w0 AND b.w1)::INTEGER END AS share,
           c.error_kind IS NULL AND (c.prompt_ms IS NULL OR c.predicted_ms IS NULL) AS untimed,
           r.wall_s
    FROM c JOIN runs r USING (run_id) JOIN a USING (run_id) JOIN b USING (run_id)
    WHERE r.slots > 0 AND r.time_scale > 0)
GROUP BY run_id
HAVING NOT bool_or(untimed) AND any_value(w1 - w0) >= {STARVED_MIN_WINDOW} * any_value(wall_s)
"""

# Per run, the calls whose server sent a number dualpath could not keep (a model named twice
# in one reply is contamination instead, counted there)
UNTRUSTED = """
SELECT run_id, count(*) AS calls FROM calls
WHERE len(list_filter(json_keys(untrusted), lambda k: k <> 'model')) > 0 GROUP BY run_id
"""

DISTURBED = f"""
SELECT run_id, nullif(concat_ws('; ',
    CASE WHEN restarted THEN 'restarted: the server''s counters reset mid-run' END,
    CASE WHEN stalled THEN 'stalled: the server answered nothing for '
         || round(s.unanswered_s)::BIGINT || ' s' END,
    CASE WHEN s.external_load_polls > 0 THEN 'shared: up to ' || s.external_load_max
         || ' request(s) on the server were not this run''s' END,
    CASE WHEN overcounted THEN 'shared: the server generated '
         || (s.server_predicted - s.predicted)::BIGINT
         || ' tokens more than this run received' END,
    -- idle slots are the harness's doing only when nothing else explains them: a stopped,
    -- restarted or shared server also leaves this run's calls' timings short of its wall
    CASE WHEN q.busy < {STARVED_BELOW} AND NOT (restarted OR stalled OR overcounted
                                              OR coalesce(s.external_load_polls, 0) > 0)
         THEN 'starved: slots busy '
         || floor(100 * q.busy)::BIGINT || '% of the time units waited to start, while '
         || CASE WHEN q.in_flight >= {KEPT_FULL} THEN 'dualpath kept them full'
                 ELSE 'dualpath held requests for ' || round(100 * q.in_flight)::BIGINT
                      || '% of them' END
         || ' — the harness''s machine, not the server, set the pace' END,
    CASE WHEN g.gpu_changes IS NOT NULL THEN 'gpu: ' || g.gpu_changes END,
    CASE WHEN u.calls > 0 THEN 'untrusted: ' || u.calls || ' call(s) sent token counts or '
         || 'timings out of range or of the wrong type (calls.untrusted)' END), '') AS disturbed
FROM (SELECT *, s.restarts > 0 OR s.went_down AS restarted,
             coalesce(s.unanswered_s >= {STALL_S}, false) AS stalled,
             coalesce(NOT (s.restarts > 0 OR s.went_down)
                      AND s.server_predicted - c.predicted > {SHARED_SLACK} * c.predicted
                          + {SHARED_SLACK_TOKENS} + c.allowance, false) AS overcounted
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
                        * (2 * coalesce(completion_tokens, longest) + 64)), 0)
           -- a segment cut mid-flight (Ctrl-C, SIGTERM, a cancel) abandoned the requests
           -- it had in flight, which the server may have generated and no call received:
           -- up to two per slot (one served, one queued), each up to twice the longest
           -- answer. Without it an interrupted run read `shared`.
           + coalesce(any_value(cut.segments) * 2 * any_value(r.slots)
                      * (2 * coalesce(any_value(longest), 0) + 64), 0) AS allowance
    FROM (SELECT *, max(completion_tokens) OVER (PARTITION BY run_id) AS longest FROM calls)
    JOIN runs r USING (run_id)
    LEFT JOIN (SELECT run_id, count(*) AS segments FROM run_segments
               WHERE status = 'interrupted' OR detail = 'interrupted'
               GROUP BY run_id) cut USING (run_id)
    GROUP BY run_id) c USING (run_id)) s
LEFT JOIN ({QUEUED}) q USING (run_id)
-- the GPU changed under the run (warehouse.energy): its power limit, its link, or another
-- process on it; its seconds and joules are not this configuration's
LEFT JOIN (SELECT run_id, string_agg(changes, '; ') AS gpu_changes FROM energy_runs
           WHERE changes IS NOT NULL GROUP BY run_id) g USING (run_id)
LEFT JOIN ({UNTRUSTED}) u USING (run_id)
"""

