"""Helpers for the GPU harness runs (bench/gpu/README.md): snapshot a llama-server's /metrics,
and summarise the variants against the direct replay.

usage: python bench/gpu/gpubench.py snap URL OUT.json
       python bench/gpu/gpubench.py summary RESULTS_DIR [--replay-of a]

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


def summary(root: Path, replay_of: str) -> None:
    rows = {}
    for d in sorted(p for p in root.iterdir() if (p / "warehouse.duckdb").exists()
                    and (p / "m1.json").exists()):
        try:
            rows[d.name] = harness(d)
        except Exception as e:              # a variant that did not finish: say so, go on
            rows[d.name] = {"error": repr(e)}
    reps = {p.stem.removeprefix("replay_"): json.loads(p.read_text())
            for p in sorted(root.glob("replay_*.json"))}
    print(json.dumps({"harness": rows, "replay": reps}, indent=1, default=str))
    print()
    hdr = ("run", "status", "wall_s", "s/ticker", "unit_s_med", "calls", "retries",
           "pred_tok", "decode_tps", "prefill_tok", "cached_share", "srv_cached")
    print(" | ".join(hdr))
    for name, r in rows.items():
        if "error" in r:
            print(name, r["error"])
            continue
        srv_c = r["server_cached"]
        srv_share = (srv_c / (srv_c + r["server_prefill"])) if srv_c is not None and \
            (srv_c + r["server_prefill"]) else None
        print(" | ".join(str(x) for x in (
            name, r["status"], f"{r['wall_s']:.1f}", f"{r['s_per_ticker']:.2f}",
            f"{r['unit_s_median']:.1f}", r["calls"], r["retries"], int(r["server_predicted"]),
            f"{r['decode_tps']:.1f}", int(r["server_prefill"]), f"{r['cached_share']:.3f}",
            f"{srv_share:.3f}" if srv_share is not None else "-")))
    for name, r in reps.items():
        print(" | ".join(str(x) for x in (
            f"replay_{name}", "-", f"{r['wall_s']:.1f}", f"{r['wall_s'] / r['tickers']:.2f}", "-",
            r["calls"], r["retries"], int(r["metrics_delta"].get("llamacpp:tokens_predicted_total", 0)),
            f"{r['decode_tps']:.1f}", int(r["prefill_tokens"]),
            f"{r['cached_share']:.3f}" if r["cached_share"] is not None else "-", "-")))
    print()
    for name, r in rows.items():
        rep = reps.get(name) or reps.get(replay_of)
        if "error" in r or rep is None:
            continue
        print(f"{name} vs replay_{name if name in reps else replay_of}: decode tok/s ratio "
              f"{r['decode_tps'] / rep['decode_tps']:.3f}; wall ratio (replay/harness) "
              f"{rep['wall_s'] / r['wall_s']:.3f}; s/ticker harness {r['s_per_ticker']:.2f} vs "
              f"replay {rep['wall_s'] / r['tickers']:.2f}")


def main() -> None:
    if sys.argv[1] == "snap":
        Path(sys.argv[3]).write_text(json.dumps(metrics(sys.argv[2])))
    elif sys.argv[1] == "summary":
        replay_of = sys.argv[sys.argv.index("--replay-of") + 1] if "--replay-of" in sys.argv \
            else "a"
        summary(Path(sys.argv[2]), replay_of)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
