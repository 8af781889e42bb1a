"""What a simulated path's time model says a run should have taken.

A simulated server reports each call's modelled prefill and decode (`prompt_ms`,
`predicted_ms`, real-scale). `SERVED` sums them per run and divides by its slots: the run's
wall clock, real-scale, had the slots been kept busy from the first call to the last (the
basis `dualpath.sim.model.expected_unit_seconds` uses). `bench/demo_load.py` compares the
measured slowdown with the ratio of these: the harness's own delays show up as the gap.
"""

from __future__ import annotations

import pandas as pd

SERVED = """
SELECT r.run_id, r.path, r.night, r.tickers_planned AS tickers,
       sum(c.prompt_ms + c.predicted_ms) / 1e3 / any_value(r.slots) AS served_s
FROM calls c JOIN runs r USING (run_id)
WHERE r.slots > 0 AND c.error_kind IS NULL
GROUP BY ALL
HAVING bool_and(c.prompt_ms IS NOT NULL AND c.predicted_ms IS NOT NULL)
"""


def served_seconds(con) -> pd.DataFrame:
    """Per run: run_id, path, night, tickers, served_s (see the module docstring)."""
    return con.execute(SERVED).df()
