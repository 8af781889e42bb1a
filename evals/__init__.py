"""Pure statistics over pandas frames: forward returns, RankIC, agreement, speed, comparison.

This package never imports duckdb, httpx or prefect; `warehouse.frames` produces its inputs.
Every function documents which of these frames it takes (extra columns are ignored):

``calls``  one row per LLM call
    run_id str, path str, night datetime64[ns], ticker str, draw int, agent str,
    start_wall float (epoch s), end_wall float, latency_s float, ttft_s float|NaN,
    prompt_tokens, completion_tokens, cached_tokens, prompt_n, predicted_n: Int64 (nullable),
    prompt_ms, predicted_ms: float|NaN (server timings), finish_reason str|None,
    attempts int, error_kind str|None, contaminated bool, abandoned bool,
    reasoning_tokens Int64 (the thinking's, of completion_tokens; <NA>: none),
    reasoning_tokens_basis str|None ('server' counted, 'chars' estimated; `evals.thinking`)

``units``  one row per unit (ticker x draw on one path-run; its final attempt only)
    run_id, path, night, ticker, draw, start_wall, end_wall, seconds float (slot-latency:
    first call start to last call end), grade Int64 (1-5, <NA> when none), failure_kind str|None,
    outcome str (optional: 'graded' | 'parse_failed' | 'call_failed' | 'input_failed' |
    'abandoned'), run_status, clean (for `evals.scores.usable_units`). A draw with grade <NA>
    is a failed draw: it counts in the failed share of the grade distribution.

``runs``   one row per path-run
    run_id, path, night, status ('complete' | 'partial' | 'running' | 'failed'),
    wall_s float (first unit start to last unit end, this run's own clock), units int,
    slots int, time_scale float (1.0 for real servers), segments int (1 unless the run was
    resumed; only one-segment runs are speed results), tickers_planned int (optional:
    per-ticker seconds divide by it, else by the unit count), disturbed str|None (optional:
    why a run's server was not its own — restarted, stalled, shared — or the harness,
    not the server, set its pace — starved; such a run is no speed result); energy
    (optional, `evals.energy`): joules, energy_s, idle_w, energy_unknown, energy_basis
    ('counter' | 'sampled'), energy_hz, energy_error_j

``prices`` one row per ticker x trading day
    ticker str, date datetime64[ns], adj_close float > 0

``scores`` one row per night x path x ticker (see `evals.scores.ticker_scores`)
    night, path, ticker, score float (mean grade of the parsed draws), n_draws int,
    n_failed int

``returns`` one row per night x horizon x ticker (see `evals.returns.forward_returns`)
    night, ticker, horizon, start_date, end_date, start_pos int (start's index on the session
    calendar), fwd_return float (NaN unless status 'ok'), status ('ok' | 'missing' | 'pending')

``sessions`` (optional) a sorted sequence of exchange session dates: horizons step over them.

Inference (t, p, CI, MDE, power, verdict) is on non-overlapping nights (`evals.inference`);
every table that reports one names its ``ci_method``, ``ci_level`` and ``basis``, and says
"insufficient nights (n=…, need …)" in ``note`` where the method is not calibrated.
"""
