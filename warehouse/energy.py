"""Energy per run: the GPU telemetry each segment appended beside its journal
(`flows.telemetry`), stored in `energy_runs` (one row per run segment) and `energy_samples`
(its power over time, at most `[telemetry] max_samples` rows per segment), and read back.

A segment whose GPUs could not be read has `unknown` set (the reason) and NULL joules:
never 0; one whose reader stopped answering mid-night has `unknown` = "sampling stopped at
HH:MM:SS (why)", the joules read until then in `partial_j` and every sample taken. Each
figure states its basis (m024): the device's counter, or power sampled at `sample_hz` and
integrated within `error_j`. `changes` (the power limit changed, the link trained narrower,
another process on the GPU) marks the run disturbed (`warehouse.disturbed`).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd

M026_ENERGY = """
CREATE TABLE energy_runs (
    run_id VARCHAR NOT NULL, segment INTEGER NOT NULL, host VARCHAR, source VARCHAR,
    gpus VARCHAR, gpu_name VARCHAR, driver VARCHAR, vram_total_mb DOUBLE,
    power_limit_w DOUBLE, link VARCHAR, link_max VARCHAR, basis VARCHAR, joules DOUBLE,
    seconds DOUBLE, mean_w DOUBLE, peak_w DOUBLE, idle_w DOUBLE, idle_s DOUBLE,
    samples INTEGER, changes VARCHAR, shared_with VARCHAR, unknown VARCHAR,
    started_wall DOUBLE, ended_wall DOUBLE, PRIMARY KEY (run_id, segment)
);
CREATE TABLE energy_samples (
    run_id VARCHAR NOT NULL, segment INTEGER NOT NULL, t_s DOUBLE NOT NULL, width_s DOUBLE,
    power_w REAL, max_w REAL, mem_used_mb REAL, sm_mhz REAL, temp_c REAL
);
"""

# The basis of each figure, stated (m024_energy_basis).
M024_ENERGY_BASIS = """
ALTER TABLE energy_runs ADD COLUMN IF NOT EXISTS sample_hz DOUBLE;
ALTER TABLE energy_runs ADD COLUMN IF NOT EXISTS error_j DOUBLE;
ALTER TABLE energy_runs ADD COLUMN IF NOT EXISTS gap_s DOUBLE;
ALTER TABLE energy_runs ADD COLUMN IF NOT EXISTS faults VARCHAR;
ALTER TABLE energy_runs ADD COLUMN IF NOT EXISTS partial_j DOUBLE;
"""

RUN_COLUMNS = ["run_id", "segment", "host", "source", "gpus", "gpu_name", "driver",
               "vram_total_mb", "power_limit_w", "link", "link_max", "basis", "joules",
               "seconds", "mean_w", "peak_w", "idle_w", "idle_s", "samples", "changes",
               "shared_with", "unknown", "started_wall", "ended_wall", "sample_hz",
               "error_j", "gap_s", "faults", "partial_j"]
SAMPLE_COLUMNS = ["run_id", "segment", "t_s", "width_s", "power_w", "max_w", "mem_used_mb",
                  "sm_mhz", "temp_c"]


def _row(rec: dict) -> tuple[dict, list[list]]:
    info = rec.get("info") or []
    s = rec.get("summary") or {}
    first = info[0] if info else {}
    gpus = rec.get("gpus")
    stopped = s.get("stopped")      # the part read is no night's energy: kept apart
    joules = None if stopped else s.get("joules")
    row = {"run_id": rec["run_id"], "segment": rec["segment"], "host": rec.get("host"),
           "source": s.get("source"),
           "gpus": "all" if gpus is None else ",".join(map(str, gpus)),
           "gpu_name": " + ".join(sorted({i["name"] for i in info})) or None,
           "driver": first.get("driver"),
           "vram_total_mb": sum(i["vram_total_mb"] or 0 for i in info) or None,
           "power_limit_w": sum(i["power_limit_w"] or 0 for i in info) or None,
           "link": rec.get("link"),
           "link_max": f"Gen{first['pcie_gen_max']} x{first['pcie_width_max']}"
           if first.get("pcie_width_max") else None,
           "basis": s.get("basis"), "joules": joules, "seconds": s.get("seconds"),
           "mean_w": joules / s["seconds"] if joules is not None and s.get("seconds")
           else None,
           "peak_w": s.get("peak_w"), "idle_w": s.get("idle_w"), "idle_s": s.get("idle_s"),
           "samples": s.get("samples"),
           "changes": "; ".join(s.get("changes") or []) or None,
           "shared_with": ",".join(rec.get("shared_with") or []) or None,
           "unknown": stopped if s else rec.get("unknown"),
           "started_wall": rec.get("started_wall"), "ended_wall": rec.get("ended_wall"),
           "sample_hz": s.get("hz"), "error_j": None if stopped else s.get("error_j"),
           "gap_s": s.get("gap_s"), "faults": s.get("faults"),
           "partial_j": s.get("joules") if stopped else None}
    samples = [[rec["run_id"], rec["segment"], *b] for b in s.get("buckets") or []]
    return row, samples


def read_telemetry(journals: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every segment record beside these journals (a torn last line is skipped)."""
    rows, samples = [], []
    for j in journals:
        f = Path(j).parent / "telemetry.jsonl"
        if not f.exists():
            continue
        for line in f.read_bytes().splitlines():
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            r, s = _row(rec)
            rows.append(r)
            samples += s
    return (pd.DataFrame(rows, columns=RUN_COLUMNS),
            pd.DataFrame(samples, columns=SAMPLE_COLUMNS))


def store_telemetry(con, journals: list[Path]) -> int:
    """Store (replace) the telemetry of these journals' segments; returns the rows stored.
    Runs inside the ingest's transaction."""
    runs, samples = read_telemetry(journals)
    if not len(runs):
        return 0
    con.register("_energy_runs", runs)
    con.register("_energy_samples", samples)
    try:
        con.execute("DELETE FROM energy_samples WHERE (run_id, segment) IN "
                    "(SELECT (run_id, segment) FROM _energy_runs)")
        con.execute("INSERT OR REPLACE INTO energy_runs BY NAME SELECT * FROM _energy_runs")
        con.execute("INSERT INTO energy_samples BY NAME SELECT * FROM _energy_samples")
    finally:
        con.unregister("_energy_runs")
        con.unregister("_energy_samples")
    return len(runs)


# Per run: the board energy of its scoring (every segment), the idle floor read before it,
# whether any segment could not be read (and why), what changed on the GPU.
ENERGY_BY_RUN = """
SELECT run_id,
       CASE WHEN bool_and(unknown IS NULL) THEN sum(joules) END AS joules,
       CASE WHEN bool_and(unknown IS NULL) THEN sum(joules) / nullif(sum(seconds), 0) END
           AS mean_w,
       CASE WHEN bool_and(unknown IS NULL) THEN sum(seconds) END AS energy_s,
       any_value(idle_w ORDER BY segment) AS idle_w,
       CASE WHEN bool_and(basis = 'counter') THEN 'counter' ELSE 'sampled' END
           AS energy_basis,
       min(sample_hz) AS energy_hz,
       CASE WHEN bool_and(unknown IS NULL) THEN sum(coalesce(error_j, 0)) END
           AS energy_error_j,
       string_agg(faults, '; ') AS energy_faults,
       string_agg(DISTINCT unknown, '; ') AS energy_unknown,
       any_value(host ORDER BY segment) AS gpu_host,
       any_value(gpu_name ORDER BY segment) AS gpu_name,
       any_value(power_limit_w ORDER BY segment) AS power_limit_w,
       any_value(link ORDER BY segment) AS link, any_value(link_max ORDER BY segment) AS link_max,
       string_agg(DISTINCT shared_with, ',') AS gpu_shared_with,
       string_agg(changes, '; ') AS gpu_changes
FROM energy_runs GROUP BY run_id
"""


def energy_runs_frame(con, experiment: str) -> pd.DataFrame:
    """Per run of the experiment: night, path, status, tickers, joules and the idle floor."""
    return con.execute(f"""SELECT r.run_id, r.path, r.night, r.status, r.segments,
                                  r.tickers_planned, r.units_planned, r.time_scale, r.wall_s, e.*
                                  EXCLUDE (run_id)
                           FROM runs r JOIN ({ENERGY_BY_RUN}) e USING (run_id)
                           WHERE r.experiment = ?""", [experiment]).df()


def samples_frame(con, run_id: str) -> pd.DataFrame:
    """A run's stored power samples (every segment), in time order."""
    return con.execute("SELECT * FROM energy_samples WHERE run_id = ? ORDER BY segment, t_s",
                       [run_id]).df()


_W = "epoch s (Unix time)"
DICTIONARY = {
    "energy_runs": ("GPU energy and state per run segment (one row each; flows.telemetry)", {
        "run_id": "id — experiment/night/path", "segment": "1.. — scoring session of the run",
        "host": "host whose GPUs were read", "source": "nvml | hwmon (amdgpu) | sim",
        "gpus": "host GPU indices read ('all': nothing narrowed them)",
        "gpu_name": "model of the GPU(s)", "driver": "driver version",
        "vram_total_mb": "MiB — VRAM of the GPU(s)",
        "power_limit_w": "W — enforced power limit (summed over the GPUs) at the start",
        "link": "PCIe link at the start, 'GenN xW' (idle GPUs may train a lower generation)",
        "link_max": "PCIe link the GPU and slot can reach",
        "basis": "counter (the device's energy counter) | sampled (power × time)",
        "joules": "J — board energy over the scoring window (NULL: unknown, never 0; "
                  "partial_j holds what was read before sampling stopped)",
        "seconds": "s — the scoring window (modelled seconds for simulated paths)",
        "mean_w": "W — joules ÷ seconds", "peak_w": "W — highest power sample",
        "idle_w": "W — idle floor read before the first unit (server loaded, nothing in flight)",
        "idle_s": "s — how long the idle floor was read",
        "samples": "count — power samples read (10 Hz by default)",
        "changes": "what changed on the GPU during the run (power limit, link width, another "
                   "process); set: the run is disturbed",
        "shared_with": "other paths whose server uses one of these GPUs on this host",
        "unknown": "why the energy is unknown (no GPU counters on the host, telemetry off, "
                   "'sampling stopped at HH:MM:SS (why)')",
        "sample_hz": "Hz — power samples per second taken",
        "error_j": "J — bound on the joules' error: Σ|Δpower|×Δt between samples plus the "
                   "seconds without samples × peak watts (sampled basis; NULL on a counter)",
        "gap_s": "s — time the reader failed and came back (retried; the last value held, "
                 "or the counter spanned it)",
        "faults": "the reader's failures in words (count, the first error, seconds lost)",
        "partial_j": "J — read before sampling stopped (the segment's joules are then NULL)",
        "started_wall": f"{_W} — telemetry start", "ended_wall": f"{_W} — telemetry end"}),
    "energy_samples": ("a run segment's power over time, at most [telemetry] max_samples rows "
                       "(neighbours merged as a night grows)", {
        "run_id": "id", "segment": "1..", "t_s": "s since the scoring window began",
        "width_s": "s — span the row averages", "power_w": "W — mean board power over it",
        "max_w": "W — highest sample in it", "mem_used_mb": "MiB — VRAM in use (last read)",
        "sm_mhz": "MHz — graphics/SM clock (last read)", "temp_c": "°C — GPU temperature"}),
}


def gpu_evidence(con) -> pd.DataFrame:
    """Per run (every run, night and path order): what its GPU read at the night's start
    (model, power limit, PCIe link now and at most, VRAM), its board energy, mean watts and
    idle floor; `energy_unknown` says why where none was stored (never 0)."""
    return con.execute(f"""
        SELECT r.night, r.run_id, r.path, e.gpu_host AS host, e.gpu_name AS gpu,
               e.power_limit_w, e.link, e.link_max, v.vram_total_mb, e.joules, e.mean_w,
               e.idle_w, e.energy_basis, e.energy_hz, e.energy_error_j, e.energy_faults,
               CASE WHEN e.joules IS NOT NULL THEN NULL
                    WHEN e.run_id IS NULL THEN 'no GPU telemetry stored for this run'
                    ELSE coalesce(e.energy_unknown, 'no energy reading') END AS energy_unknown
        FROM runs r LEFT JOIN ({ENERGY_BY_RUN}) e USING (run_id)
        LEFT JOIN (SELECT run_id, any_value(vram_total_mb ORDER BY segment) AS vram_total_mb
                   FROM energy_runs GROUP BY run_id) v USING (run_id)
        ORDER BY r.night, r.path""").df()
