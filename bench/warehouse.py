"""Warehouse benchmark: ingest a synthetic six-week warehouse and query it.

42 nights x 2 paths x 100 tickers x 3 draws x 17 calls (~428k calls). Prompts have the
pipeline's structure: a system prompt per agent, a ticker-night block shared by every draw
and both paths (header + price table), and a per-call part carrying upstream answers.
Journals are written first (not timed); then every journal is ingested (timed: read, hash,
insert), the file size is compared with the deduplicated text, and a representative
query is timed. Last line: `ingest_s=... calls=... db_mb=... text_mb=... query_s=...`
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and its name would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import shutil
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

import numpy as np

from dualpath.pipeline import AGENTS
from dualpath.records import CallRecord, RunBegin, RunEnd, UnitResult, UnitStart
from warehouse.db import writer
from warehouse.ingest import ingest_journal, ingest_journals
from warehouse.journal import JournalWriter
from warehouse.prices import import_prices, validate_prices
from dualpath.market import WARMUP_DAYS, SyntheticMarket

WORDS = np.array("trend momentum volume support resistance margin guidance revenue sector "
                 "rates inflation breakout drawdown valuation catalyst risk upside downside "
                 "earnings liquidity".split())


def text(rng: np.random.Generator, n_words: int) -> str:
    return " ".join(WORDS[rng.integers(0, len(WORDS), n_words)])


def bench_market(nights: int, tickers: int) -> SyntheticMarket:
    return SyntheticMarket(7, n_tickers=tickers, n_days=WARMUP_DAYS + nights + 25)


def write_journals(root: Path, nights: int, tickers: int, draws: int, seed: int) -> list[Path]:
    rng = np.random.default_rng(seed)
    systems = {a: f"You are the {a} agent. " + text(rng, 25) for a in AGENTS}
    journals = []
    market = bench_market(nights, tickers)
    for night in market.nights(nights):
        blocks = {t: f"TICKER: SYN{t:03d} | AS OF: {night}\n" + "\n".join(
            f"{night - timedelta(days=k)},{100 + rng.normal():.2f}" for k in range(60))
            for t in range(tickers)}
        for path in ("main", "backup"):
            run_id = f"bench/{night}/{path}"
            jp = root / f"{night}-{path}.jsonl"
            w = JournalWriter(jp, max_delay_s=5)
            w.write(RunBegin(run_id=run_id, experiment="bench", night=night.isoformat(),
                             path=path, engine="sim", config_hash="x",
                             units_planned=tickers * draws, units_remaining=tickers * draws,
                             tickers_planned=tickers, slots=4, time_scale=1.0, segment=1,
                             started_wall=time.time()))
            t0 = time.time()
            for d in range(1, draws + 1):
                for t in range(tickers):
                    w.write(UnitStart(run_id, path, f"SYN{t:03d}", d, 1, t0))
                    for seq, agent in enumerate(AGENTS, 1):
                        upstream = text(rng, 0 if seq == 1 else 120)   # answers so far
                        prompt = f'[{{"role":"system","content":"{systems[agent]}"}},' \
                                 f'{{"role":"user","content":"{blocks[t]}\\n{upstream}"}}]'
                        w.write(CallRecord(
                            call_id=uuid.uuid4().hex, run_id=run_id, path=path,
                            ticker=f"SYN{t:03d}", draw=d, unit_attempt=1, agent=agent,
                            call_seq=seq, start_wall=t0, start_mono=1.0, end_wall=t0 + 40,
                            end_mono=41.0, http_status=200, attempts=1, finish_reason="stop",
                            response_model="m", system_fingerprint="b1", prompt_tokens=8300,
                            completion_tokens=1260, cached_tokens=0, prompt_n=8300,
                            prompt_ms=11000.0, prompt_per_second=754.0, predicted_n=1260,
                            predicted_ms=29000.0, predicted_per_second=43.4,
                            request_json='{"temperature":0.7,"top_p":0.8,"top_k":20}',
                            prompt_text=prompt, output_text=text(rng, 90)))
                    w.write(UnitResult(run_id, path, f"SYN{t:03d}", d, 1, t0, 1.0, t0 + 600,
                                       601.0, 17, "graded", int(rng.integers(1, 6)), None,
                                       "FINAL GRADE: 3 (HOLD)"))
            w.write(RunEnd(run_id=run_id, segment=1, started_wall=t0, ended_wall=t0 + 17000,
                           status="complete", detail=None, units_done=tickers * draws,
                           units_measured=tickers * draws, calls=tickers * draws * 17))
            w.close()
            journals.append(jp)
    return journals


QUERY = """SELECT path, agent, count(*) AS calls, median(latency_s) AS p50,
                  quantile_cont(latency_s, 0.95) AS p95, sum(completion_tokens) AS tokens,
                  avg(length(t.text)) AS avg_prompt_chars
           FROM calls c JOIN texts t ON t.hash = c.prompt_hash
           WHERE night >= DATE '2027-01-20' GROUP BY ALL ORDER BY ALL"""


def main(nights: int, tickers: int, draws: int, keep: Path | None, repeats: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="dualpath-bench-"))
    try:
        t = time.monotonic()
        journals = write_journals(root, nights, tickers, draws, seed=1)
        jsize = sum(j.stat().st_size for j in journals) / 2**20
        print(f"wrote {len(journals)} journals ({jsize:,.0f} MB) in {time.monotonic() - t:.1f} s")
        # The machine is shared and noisy: ingest into fresh databases several times, keep the median.
        times = []
        for rep in range(repeats):
            db = root / f"w{rep}.duckdb"
            t = time.monotonic()
            with writer(db) as con:
                calls = sum(s.new_calls for s in ingest_journals(con, journals))
            times.append(time.monotonic() - t)
            if rep < repeats - 1:
                db.unlink()
        ingest_s = float(np.median(times))
        print("ingest runs: " + ", ".join(f"{x:.1f} s" for x in times))
        with writer(db) as con:   # prices for bench/evals.py (not timed)
            import_prices(con, validate_prices(bench_market(nights, tickers).prices())[0])
        with writer(db) as con:
            again = sum(ingest_journal(con, j).new_calls for j in journals[:4])
            text_mb = con.execute("SELECT sum(strlen(text)) FROM texts").fetchall()[0][0] / 2**20
            raw_mb = con.execute("SELECT sum(strlen(t.text)) FROM calls c JOIN texts t "
                                 "ON t.hash = c.prompt_hash").fetchall()[0][0] / 2**20
            con.execute("CHECKPOINT")
        db_mb = db.stat().st_size / 2**20
        with writer(db) as con:
            t = time.monotonic()
            rows = con.execute(QUERY).fetchall()
            query_s = time.monotonic() - t
        print(f"ingest: {calls:,} calls in {ingest_s:.1f} s, median ({calls / ingest_s:,.0f} calls/s); "
              f"re-ingest added {again}")
        print(f"text: prompts as sent {raw_mb:,.0f} MB; all texts (prompts, outputs, requests) "
              f"deduplicated {text_mb:,.0f} MB; "
              f"database {db_mb:,.0f} MB = {db_mb / text_mb:.2f}x the deduplicated text")
        print(f"query (per path x agent latency quantiles, {len(rows)} rows): {query_s:.3f} s")
        if keep:
            shutil.copy(db, keep)
        print(f"ingest_s={ingest_s:.2f} calls={calls} db_mb={db_mb:.0f} text_mb={text_mb:.0f} "
              f"query_s={query_s:.3f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=42)
    ap.add_argument("--tickers", type=int, default=100)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="copy the built warehouse here (for bench/evals.py)")
    ap.add_argument("--repeats", type=int, default=3, help="ingests into fresh databases")
    a = ap.parse_args()
    main(a.nights, a.tickers, a.draws, a.keep, a.repeats)
