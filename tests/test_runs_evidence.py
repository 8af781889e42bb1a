"""`dualpath runs --evidence`: each server-evidence row says which night and run it is, in
the table and in -f json (the rows of a 20-night warehouse were otherwise told apart only by
their order)."""

from __future__ import annotations

import json

from tests.seeded import seed_warehouse
from tests.test_glance import dualpath
from warehouse.db import writer

# llama-server's and vLLM's counters alike, read as the watcher stores them: zero before the
# run, the calls' own sums after it (a server that served exactly this run's calls)
COUNTERS = """
    SELECT run_id, '{"llamacpp:prompt_tokens_total": 0, "llamacpp:tokens_predicted_total": 0,
                    "llamacpp:prompt_seconds_total": 0, "llamacpp:tokens_predicted_seconds_total": 0}'
               AS before,
           json_object('llamacpp:prompt_tokens_total', sum(prompt_n),
                       'llamacpp:tokens_predicted_total', sum(predicted_n),
                       'llamacpp:prompt_seconds_total', sum(prompt_ms) / 1e3,
                       'llamacpp:tokens_predicted_seconds_total', sum(predicted_ms) / 1e3)::VARCHAR
               AS after
    FROM calls GROUP BY run_id"""

EVIDENCE = """\
      server evidence: the calls' tokens and seconds vs the server's own /metrics counters, its aggregate rates, and slot occupancy from the server's side      
┏━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━┓
┃ night      ┃ path   ┃ slots ┃ calls_prompt_to… ┃ server_prompt_to… ┃ calls_predicted… ┃ server_predicted… ┃ server_decode_t… ┃ occupancy ┃ comparable ┃ note ┃
┡━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━┩
│ 2027-04-29 │ backup │     4 │           96,000 │            96,000 │           16,000 │            16,000 │            2.899 │     1.000 │ yes        │ —    │
│ 2027-04-29 │ main   │     8 │           96,000 │            96,000 │           16,000 │            16,000 │            8.333 │     1.000 │ yes        │ —    │
│ 2027-04-30 │ backup │     4 │           48,000 │            48,000 │            8,000 │             8,000 │            2.882 │     0.500 │ yes        │ —    │
│ 2027-04-30 │ main   │     8 │           96,000 │            96,000 │           16,000 │            16,000 │            8.197 │     1.000 │ yes        │ —    │
└────────────┴────────┴───────┴──────────────────┴───────────────────┴──────────────────┴───────────────────┴──────────────────┴───────────┴────────────┴──────┘
"""


def test_evidence_rows_carry_their_night_and_run(tmp_path):
    cfg_path, cfg, nights = seed_warehouse(tmp_path, nights=2)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute(f"""INSERT INTO server_sessions (session_id, run_id, segment, path, how,
                                                     slots, metrics_before_json, metrics_after_json)
                        SELECT r.run_id || '#1', r.run_id, 1, r.path, 'simulated', r.slots,
                               m.before, m.after
                        FROM runs r JOIN ({COUNTERS}) m USING (run_id)""")
    out = dualpath("runs", "-c", str(cfg_path), "--evidence").stdout
    table = out[out.index("\n", out.index("runs (only")) + 1:]
    table = table[table.rindex("\n", 0, table.index("server evidence")) + 1:]
    # backup's decode rate: 16,000 tokens over 32 calls × 172.5 s = 2.899; the partial run
    # second night: half its units, so half the slot time (occupancy 0.500)
    assert table[:table.index("  occupancy: ")] == EVIDENCE
    doc = json.loads(dualpath("runs", "-c", str(cfg_path), "--evidence", "-f", "json").stdout)
    assert [(r["night"], r["run_id"], r["path"]) for r in doc["evidence"]] == [
        (str(nights[0]), f"demo/{nights[0]}/backup", "backup"),
        (str(nights[0]), f"demo/{nights[0]}/main", "main"),
        (str(nights[1]), f"demo/{nights[1]}/backup", "backup"),
        (str(nights[1]), f"demo/{nights[1]}/main", "main")]
    assert list(doc["evidence"][0])[:4] == ["night", "run_id", "session_id", "path"]
