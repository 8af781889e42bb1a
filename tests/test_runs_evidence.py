"""`dualpath runs --evidence`: each server-evidence row says which night and run it is, in
the table and in -f json (the rows of a 20-night warehouse were otherwise told apart only by
their order)."""

from __future__ import annotations

import json

from tests.seeded import seed_warehouse
from tests.test_glance import dualpath
from dualpath.warehouse.db import writer

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


GPU_EVIDENCE = """\
 GPU evidence: what each run's GPU read as the night began and the board energy of its scoring, idle floor included                           
┏━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ night      ┃ path   ┃ gpu                 ┃ power_limit_w ┃ link    ┃ vram_total_mb ┃  joules ┃ idle_w ┃ energy                                                     ┃
┡━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ 2027-04-29 │ backup │ Radeon AI PRO R9700 │           210 │ Gen4 x4 │        32,624 │ 524,400 │     30 │ the GPU's energy counter                                   │
│ 2027-04-29 │ main   │ —                   │             — │ —       │             — │       — │     70 │ energy unknown (no GPU counters on host h: NVML not found) │
│ 2027-04-30 │ backup │ —                   │             — │ —       │             — │       — │      — │ energy unknown (no GPU telemetry stored for this run)      │
│ 2027-04-30 │ main   │ —                   │             — │ —       │             — │ 253,760 │     70 │ the GPU's energy counter                                   │
└────────────┴────────┴─────────────────────┴───────────────┴─────────┴───────────────┴─────────┴────────┴────────────────────────────────────────────────────────────┘
  link: PCIe generation x width as trained at the night's start (link_max: the most the card and slot reach)
  energy: how the joules were measured (the GPU's counter, or power sampled and integrated within a bound); 'energy unknown (why)' where no joules were stored; never 0
"""


def test_evidence_shows_each_runs_gpu_readings_and_says_when_energy_is_unknown(tmp_path):
    cfg_path, cfg, nights = seed_warehouse(tmp_path, nights=2)
    n0, n1 = nights
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("UPDATE energy_runs SET gpu_name = 'Radeon AI PRO R9700', "
                    "power_limit_w = 210, link = 'Gen4 x4', link_max = 'Gen4 x16', "
                    "vram_total_mb = 32624 WHERE run_id = ?", [f"demo/{n0}/backup"])
        con.execute("UPDATE energy_runs SET joules = NULL, unknown = 'no GPU counters on "
                    "host h: NVML not found' WHERE run_id = ?", [f"demo/{n0}/main"])
        con.execute("DELETE FROM energy_runs WHERE run_id = ?", [f"demo/{n1}/backup"])
    out = dualpath("runs", "-c", str(cfg_path), "--evidence", columns=200).stdout
    # joules: board W x modelled s/ticker x 8 tickers (tests/seeded.py): backup 190 W x 345 s
    # x 8 = 524,400; main the second night 520 W x 61 s x 8 = 253,760; the main run the first
    # night has no joules, only its reason, and the second night's backup nothing stored
    assert out[out.index(" GPU evidence"):] == GPU_EVIDENCE
    doc = json.loads(dualpath("runs", "-c", str(cfg_path), "--evidence", "-f", "json").stdout)
    first = doc["gpu"][0]
    assert (first["gpu"], first["power_limit_w"], first["link"], first["link_max"],
            first["vram_total_mb"], first["joules"], first["idle_w"]) == (
        "Radeon AI PRO R9700", 210.0, "Gen4 x4", "Gen4 x16", 32624.0, 524400.0, 30.0)
    assert doc["gpu"][2]["energy"] == "energy unknown (no GPU telemetry stored for this run)"
