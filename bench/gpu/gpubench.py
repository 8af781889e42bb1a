"""Helpers for the GPU harness runs (bench/gpu/README.md): snapshot a llama-server's /metrics,
and summarise the variants against the direct replay.

usage: python bench/gpu/gpubench.py snap URL OUT.json
       python bench/gpu/gpubench.py summary RESULTS_DIR
       python bench/gpu/gpubench.py brief RESULTS_DIR RUN

RESULTS_DIR holds one folder per harness variant (its dualpath.toml, warehouse.duckdb, and
m0.json / m1.json: /metrics before and after the night, server restarted before each) and
replay_<variant>.json files written by replay_direct.py.
Harness wall clock = runs.wall_s (the run's own scoring clock); aggregate decode tok/s =
Δ llamacpp:tokens_predicted_total ÷ that wall; prefill = Δ llamacpp:prompt_tokens_total
(tokens actually processed, cache hits excluded); cached share = Σ calls.cached_tokens ÷
Σ calls.prompt_tokens (the client's record) and, beside it, the server's
Δ prompt_tokens_cached_total share.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx


def metrics(url: str) -> dict[str, float]:
    out = {}
    for line in httpx.get(url.rstrip("/") + "/metrics", timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def delta(d: Path) -> dict[str, float]:
    m0 = json.loads((d / "m0.json").read_text())
    m1 = json.loads((d / "m1.json").read_text())
    return {k: m1[k] - m0.get(k, 0) for k in m1 if k.endswith("_total")}


def harness(d: Path) -> dict:
    import duckdb
    con = duckdb.connect(str(d / "warehouse.duckdb"), read_only=True)
    run = con.execute("SELECT status, wall_s, tickers_planned, units_planned, segments "
                      "FROM runs").fetchall()
    assert len(run) == 1, run
    status, wall, tickers, units, segs = run[0]
    c = con.execute("""SELECT count(*), sum(prompt_tokens), sum(cached_tokens),
        sum(completion_tokens), count(*) FILTER (WHERE finish_reason = 'length'),
        count(*) FILTER (WHERE attempts > 1), sum(attempts - 1),
        count(*) FILTER (WHERE error_kind IS NOT NULL)
        FROM calls""").fetchone()
    lat = con.execute("SELECT median(seconds), avg(seconds) FROM units "
                      "WHERE outcome IN ('graded', 'parse_failed')").fetchone()
    outcomes = dict(con.execute("SELECT outcome, count(*) FROM units GROUP BY 1").fetchall())
    con.close()
    m = delta(d)
    pred = m.get("llamacpp:tokens_predicted_total", 0)
    return {"status": status, "segments": segs, "wall_s": wall, "tickers": tickers,
            "units": units, "calls": c[0], "prompt_tokens": c[1], "cached_tokens": c[2],
            "completion_tokens": c[3], "runaways": c[4], "calls_retried": c[5],
            "retries": c[6], "calls_failed": c[7], "outcomes": outcomes,
            "unit_s_median": lat[0], "unit_s_mean": lat[1],
            "cached_share": (c[2] or 0) / c[1] if c[1] else None,
            "server_predicted": pred,
            "server_prefill": m.get("llamacpp:prompt_tokens_total", 0),
            "server_cached": m.get("llamacpp:prompt_tokens_cached_total"),
            "decode_tps": pred / wall if wall else None,
            "s_per_ticker": wall / tickers if wall and tickers else None}


def server_side(root: Path, name: str) -> dict:
    """Occupancy and idle gaps from the run's server log (dualpath.slotlog)."""
    from dualpath.slotlog import read_slot_log_file
    log = root / f"{name}.server.log"
    if not log.exists():
        return {}
    return read_slot_log_file(log).summary(4)


def row(root: Path, name: str) -> dict:
    """One run's figures: a dualpath night (a folder) or a bare replay (NAME.json)."""
    if (root / name / "m1.json").exists():
        h = harness(root / name)
        r = {"kind": "night", "wall_s": h["wall_s"], "tickers": h["tickers"],
             "status": h["status"], "retries": h["retries"], "failed": h["calls_failed"],
             "prefill": h["server_prefill"], "cached_share": h["cached_share"],
             "unit_s_median": h["unit_s_median"], "calls": h["calls"]}
    elif (root / f"{name}.json").exists():
        j = json.loads((root / f"{name}.json").read_text())
        r = {"kind": f"bare x{j.get('in_flight', '?')}", "wall_s": j["wall_s"],
             "tickers": j["tickers"], "status": "-", "retries": j["retries"], "failed": 0,
             "prefill": j["prefill_tokens"], "cached_share": j["cached_share"],
             "unit_s_median": None, "calls": j["calls"]}
    else:
        return {"error": "missing"}
    r["s_per_ticker"] = r["wall_s"] / r["tickers"] if r["wall_s"] and r["tickers"] else None
    r.update(server_side(root, name))
    return r


def brief(root: Path, name: str) -> str:
    try:
        r = row(root, name)
        return (f"wall {r['wall_s']:.1f} s, {r['s_per_ticker']:.2f} s/ticker, occupancy "
                f"{r.get('occupancy', float('nan')):.3f}, gaps median "
                f"{r.get('gap_median_ms', float('nan')):.0f} ms p90 "
                f"{r.get('gap_p90_ms', float('nan')):.0f} ms, prefill {int(r['prefill'])}, "
                f"retries {r['retries']}, status {r['status']}")
    except Exception as e:          # a run that did not finish: say so
        return f"({type(e).__name__}: {e})"


def summary(root: Path, replay_of: str = "") -> None:
    """Every run's row, then the issue's ratios per round and their medians."""
    import statistics
    names = sorted({p.name for p in root.iterdir() if (p / "m1.json").exists()}
                   | {p.stem for p in root.glob("b*_*.json")})
    rows = {n: row(root, n) for n in names}
    print(json.dumps(rows, indent=1, default=str))
    print("\n| run | kind | wall s | s/ticker | occupancy (server) | idle gap median / p90 ms "
          "| prefill tok | cached share | retries |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, r in rows.items():
        if "error" in r:
            print(f"| {n} | {r['error']} |")
            continue
        print(f"| {n} | {r['kind']} | {r['wall_s']:.1f} | {r['s_per_ticker']:.2f} | "
              f"{r.get('occupancy', float('nan')):.3f} | {r.get('gap_median_ms', float('nan')):.0f}"
              f" / {r.get('gap_p90_ms', float('nan')):.0f} | {int(r['prefill'])} | "
              f"{r['cached_share']:.3f} | {r['retries']} |")
    ratios = []
    for k in ("1", "2", "3"):
        d, b4, b5 = rows.get(f"d{k}"), rows.get(f"b4_{k}"), rows.get(f"b5_{k}")
        if not d or "error" in d or not b4 or not b5 or "error" in b4 or "error" in b5:
            continue
        best = min(b4["wall_s"], b5["wall_s"])
        ratios.append((d["wall_s"] / best, d["wall_s"] / b4["wall_s"], d.get("occupancy")))
        print(f"round {k}: default s/ticker / better bare = {ratios[-1][0]:.3f}; / bare at "
              f"slots in flight = {ratios[-1][1]:.3f}; occupancy {ratios[-1][2]:.3f}")
    if ratios:
        print(f"medians: default / better bare = {statistics.median(r[0] for r in ratios):.3f} "
              f"(goal <= 1.01, and <= 0.92 for the affinity's savings); occupancy "
              f"{statistics.median(r[2] for r in ratios):.3f} (goal >= 0.98)")


def main() -> None:
    if sys.argv[1] == "snap":
        Path(sys.argv[3]).write_text(json.dumps(metrics(sys.argv[2])))
    elif sys.argv[1] == "summary":
        summary(Path(sys.argv[2]))
    elif sys.argv[1] == "brief":
        print(brief(Path(sys.argv[2]), sys.argv[3]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
