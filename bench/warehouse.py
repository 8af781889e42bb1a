"""Warehouse benchmark: six weeks of real-size journals, ingested, and one more night.

42 nights x 2 paths x 100 tickers x 3 draws x 17 calls (~428k calls), written through the
real journal writer by the real built-in pipeline (`dualpath.pipeline.builtin`) driven by a
stand-in LLM, so prompts share exactly what the pipeline shares: every call of a unit the
ticker context (header, prices, documents), later calls the earlier agents' answers. Sizes
are the real ones: answers ~1.4k tokens (lognormal, ~5.6 KB of fresh text each, never
reused), documents sized (on trial units) so that prompts average ~8.3k tokens
(~33 KB; the largest come to ~22k), new documents every night. 4 bytes per token.

Journals are written first (not timed); every ingest runs in a fresh process so its peak
RSS is its own: one week and six weeks into empty warehouses (the two peaks show whether
memory grows with calls), then one more night into the six-week warehouse. Then the file
is checkpointed, its size compared with the bytes of text as sent, and one unit's prompts
are read back (by `warehouse.prompts.prompt_texts`, and through v_prompts) and compared,
byte for byte, with what was sent, and one night's prompts of one path are read back.
Last line: `ingest_s=... calls=... db_mb=... text_mb=... night_ingest_s=... peak_rss_mb=...`
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and its name would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import asyncio
import hashlib
import json
import resource
import shutil
import subprocess
import tempfile
import time
import uuid
from datetime import date

import numpy as np
import orjson

from dualpath.market import WARMUP_DAYS, SyntheticMarket
from dualpath.pipeline import UnitInput, builtin
from dualpath.records import CallRecord, RunBegin, RunEnd, UnitResult, UnitStart
from dualpath.warehouse.db import writer
from dualpath.warehouse.ingest import ingest_journals
from dualpath.warehouse.journal import JournalWriter, prompt_parts
from dualpath.warehouse.prices import import_prices, validate_prices
from dualpath.warehouse.prompts import prompt_texts

BYTES_PER_TOKEN = 4
PROMPT_MEAN_BYTES = 8300 * BYTES_PER_TOKEN
ANSWER_MEAN_BYTES = 1400 * BYTES_PER_TOKEN
REQUEST = '{"temperature":0.7,"top_p":0.8,"top_k":20,"max_tokens":4096,"seed":1}'


class Words:
    """Fresh English-like text: Zipf-distributed words of a 6,000-word vocabulary, with a
    paragraph break every ~70 words (so it compresses like prose, and no two texts share a
    paragraph by accident)."""

    def __init__(self, rng: np.random.Generator):
        letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
        freq = 1 / np.arange(1, 27) ** 0.9
        lens = rng.integers(2, 11, 6000)
        vocab = ["".join(rng.choice(letters, n, p=freq / freq.sum())) for n in lens]
        vocab += [".\n\nThe", "%", ","]
        p = 1 / np.arange(1, len(vocab) + 1) ** 1.05
        p[:-3] *= (1 - 1 / 70 - 1 / 300 - 1 / 25) / p[:-3].sum()
        p[-3:] = [1 / 70, 1 / 300, 1 / 25]     # a blank line every ~70 words, as answers have
        self.cdf = np.cumsum(p)
        self.vocab = np.array(vocab, dtype=object)
        self.rng = rng

    def text(self, n_bytes: int) -> str:
        n = max(1, n_bytes // 7)     # a word, its space and punctuation: ~7 bytes
        idx = np.searchsorted(self.cdf, self.rng.random(n))
        return " ".join(self.vocab[np.minimum(idx, len(self.vocab) - 1)])


class StandInLLM:
    """The pipeline's `llm`: records each call as the client does (messages as
    `orjson.dumps(messages)`) into the journal and answers with fresh text."""

    json_grades = False

    def __init__(self, words: Words, sink, run_id: str, path: str, unit: UnitInput):
        self.words, self.sink, self.run_id, self.path, self.unit = words, sink, run_id, path, unit
        self.calls, self.sent = 0, []

    async def __call__(self, agent, messages, *, json_schema=None) -> str:
        self.calls += 1
        size = int(self.words.rng.lognormal(np.log(ANSWER_MEAN_BYTES) - 0.045, 0.3))
        answer = self.words.text(size) + ("\nFINAL GRADE: 3 (HOLD)" if agent ==
                                          "portfolio_manager" else "")
        prompt = orjson.dumps(messages).decode()
        self.sent.append(prompt)
        t = time.time()
        self.sink(CallRecord(
            call_id=uuid.uuid4().hex, run_id=self.run_id, path=self.path,
            ticker=self.unit.ticker, draw=self.unit.draw, unit_attempt=1, agent=agent,
            call_seq=self.calls, start_wall=t, start_mono=1.0, end_wall=t + 40, end_mono=41.0,
            http_status=200, attempts=1, finish_reason="stop", response_model="m",
            system_fingerprint="b1", prompt_tokens=len(prompt) // BYTES_PER_TOKEN,
            completion_tokens=len(answer) // BYTES_PER_TOKEN, cached_tokens=0,
            prompt_n=len(prompt) // BYTES_PER_TOKEN, prompt_ms=11000.0,
            prompt_per_second=754.0, predicted_n=len(answer) // BYTES_PER_TOKEN,
            predicted_ms=29000.0, predicted_per_second=43.4, request_json=REQUEST,
            prompt_text=prompt, output_text=answer))
        return answer


def unit_input(market: SyntheticMarket, ticker: str, draw: int, night: date, docs: str) -> UnitInput:
    h = market.history(ticker, night, 60)
    return UnitInput(ticker, draw, night, tuple(zip(h["date"], h["adj_close"])), docs)


async def _score(words, sink, run_id, path, unit) -> list[str]:
    llm = StandInLLM(words, sink, run_id, path, unit)
    await builtin(unit, llm)
    return llm.sent


def calibrate_docs(market: SyntheticMarket, words: Words) -> int:
    """Documents' size for a prompt mean of ~8.3k tokens: the mean is linear in it."""
    night = market.nights(1)[0]
    means = []
    for size in (0, 40_000):      # 20 trial units each: one unit's answers vary too much
        sent = [p for d in range(20) for p in asyncio.run(_score(
            words, lambda r: None, "x", "main",
            unit_input(market, market.tickers[0], d, night, words.text(size) if size else None)))]
        means.append(np.mean([len(p) for p in sent]))
    slope = (means[1] - means[0]) / 40_000
    return max(0, int((PROMPT_MEAN_BYTES - means[0]) / slope))


async def _night(market, words, night, root, tickers, draws, doc_bytes, stats) -> list[Path]:
    docs = {t: words.text(int(doc_bytes * words.rng.uniform(0.7, 1.3))) for t in tickers}
    journals = []
    for path in ("main", "backup"):
        run_id = f"bench/{night}/{path}"
        jp = root / f"{night}-{path}.jsonl"
        w = JournalWriter(jp, max_delay_s=5)
        w.write(RunBegin(run_id=run_id, experiment="bench", night=night.isoformat(), path=path,
                         engine="sim", config_hash="x", units_planned=len(tickers) * draws,
                         units_remaining=len(tickers) * draws, tickers_planned=len(tickers),
                         slots=4, time_scale=1.0, segment=1, started_wall=time.time()))
        t0 = time.time()
        for d in range(1, draws + 1):
            for t in tickers:
                w.write(UnitStart(run_id, path, t, d, 1, t0))
                unit = unit_input(market, t, d, night, docs[t])
                sent = await _score(words, _counting(w.write, stats), run_id, path, unit)
                stats.setdefault("first_unit", sent)
                w.write(UnitResult(run_id, path, t, d, 1, t0, 1.0, t0 + 600, 601.0, len(sent),
                                   "graded", 3, None, "FINAL GRADE: 3 (HOLD)"))
        w.write(RunEnd(run_id=run_id, segment=1, started_wall=t0, ended_wall=t0 + 17000,
                       status="complete", detail=None, units_done=len(tickers) * draws,
                       units_measured=len(tickers) * draws,
                       calls=len(tickers) * draws * 17))
        w.close()
        journals.append(jp)
    return journals


def _counting(sink, stats):
    """Counts the bytes as sent, the largest prompt, and what each way of deduplicating
    would keep (whole messages vs parts), on the way to the journal."""
    def count(rec: CallRecord) -> None:
        n = len(rec.prompt_text.encode())
        stats["prompt_bytes"] += n
        stats["max_prompt"] = max(stats["max_prompt"], n)
        stats["text_bytes"] += n + len(rec.output_text.encode()) + len(rec.request_json)
        if stats["tally_dedup"]:
            for m in orjson.loads(rec.prompt_text):
                raw = orjson.dumps(m)
                k = hashlib.blake2b(raw, digest_size=8).digest()
                if k not in stats["messages"]:
                    stats["messages"].add(k)
                    stats["message_bytes"] += len(raw)
            for p in prompt_parts(rec.prompt_text):
                k = hashlib.blake2b(p.encode(), digest_size=8).digest()
                if k not in stats["parts"]:
                    stats["parts"].add(k)
                    stats["part_bytes"] += len(p)
        stats["calls"] += 1
        sink(rec)
    return count


def write_journals(root: Path, market: SyntheticMarket, nights: list[date], draws: int,
                   tally_nights: int) -> tuple[list[list[Path]], dict]:
    words = Words(np.random.default_rng(1))
    doc_bytes = calibrate_docs(market, words)
    stats = {"prompt_bytes": 0, "max_prompt": 0, "text_bytes": 0, "calls": 0,
             "messages": set(), "parts": set(), "message_bytes": 0, "part_bytes": 0,
             "doc_bytes": doc_bytes, "tally_dedup": True}
    out = []
    for i, night in enumerate(nights):
        stats["tally_dedup"] = i < tally_nights
        if i == tally_nights:
            stats["tally"] = (stats["prompt_bytes"], stats["message_bytes"], stats["part_bytes"])
        out.append(asyncio.run(_night(market, words, night, root, market.tickers, draws,
                                      doc_bytes, stats)))
        if i == len(nights) - 2:
            stats["six_weeks_text_bytes"] = stats["text_bytes"]
    return out, stats


def run_ingest(db: Path, journals: list[Path]) -> dict:
    """Ingest in a fresh process: its own seconds and peak RSS."""
    r = subprocess.run([sys.executable, __file__, "--ingest", str(db), *map(str, journals)],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout.splitlines()[-1])


def _ingest_child(db: Path, journals: list[Path]) -> None:
    with writer(db) as con:      # migrations: not timed
        pass
    t = time.monotonic()
    with writer(db) as con:
        calls = sum(s.new_calls for s in ingest_journals(con, journals))
    seconds = time.monotonic() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "calls": calls, "peak_rss_mb": rss}))


UNIT_PROMPTS = """SELECT prompt_hash FROM calls WHERE run_id = ? AND ticker = ? AND draw = 1
                  ORDER BY call_seq"""
QUERY = """SELECT path, agent, count(*) AS calls, median(latency_s) AS p50,
                  quantile_cont(latency_s, 0.95) AS p95, sum(completion_tokens) AS tokens,
                  avg(prompt_tokens) AS avg_prompt_tokens
           FROM calls WHERE night >= DATE '2027-01-20' GROUP BY ALL ORDER BY ALL"""


def main(a: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="dualpath-bench-", dir=a.tmp))
    market = SyntheticMarket(7, n_tickers=a.tickers, n_days=WARMUP_DAYS + a.nights + 26)
    nights = market.nights(a.nights + 1)
    try:
        t = time.monotonic()
        by_night, st = write_journals(root, market, nights, a.draws, a.tally_nights)
        six = [j for js in by_night[:-1] for j in js]
        jsize = sum(j.stat().st_size for j in six) / 2**20
        pb, mb, qb = st["tally"] if "tally" in st else (st["prompt_bytes"], st["message_bytes"],
                                                        st["part_bytes"])
        print(f"wrote {len(six) + 2} journals ({jsize:,.0f} MB for {a.nights} nights) in "
              f"{time.monotonic() - t:.0f} s; documents {st['doc_bytes'] / 1000:.0f} KB a "
              f"ticker; prompts {st['prompt_bytes'] / st['calls'] / BYTES_PER_TOKEN:,.0f} "
              f"tokens mean, {st['max_prompt'] / BYTES_PER_TOKEN:,.0f} max")
        print(f"prompt bytes kept over the first {min(a.tally_nights, a.nights)} night(s): "
              f"{pb / 2**20:,.0f} MB as sent; distinct messages {mb / 2**20:,.0f} MB "
              f"({mb / pb:.0%}); distinct parts {qb / 2**20:,.0f} MB ({qb / pb:.1%})")
        week = [j for js in by_night[:min(7, a.nights)] for j in js]
        small = run_ingest(root / "week.duckdb", week)
        (root / "week.duckdb").unlink()
        runs = []
        for rep in range(a.repeats):
            db = root / "six.duckdb"
            db.unlink(missing_ok=True)
            runs.append(run_ingest(db, six))
        print("six-week ingests: " + ", ".join(f"{r['seconds']:.1f} s / {r['peak_rss_mb']:.0f} MB"
                                              for r in runs))
        ingest_s = float(np.median([r["seconds"] for r in runs]))
        peak = float(np.median([r["peak_rss_mb"] for r in runs]))
        calls = runs[-1]["calls"]
        with writer(db) as con:
            con.execute("CHECKPOINT")
        db_mb = db.stat().st_size / 2**20
        nights_s = []
        for rep in range(a.repeats):
            copy = root / "plus1.duckdb"
            shutil.copy(db, copy)
            nights_s.append(run_ingest(copy, by_night[-1])["seconds"])
        night_s = float(np.median(nights_s))
        print("one more night into the six-week warehouse: "
              + ", ".join(f"{x:.2f} s" for x in nights_s))
        print(f"peak RSS of the ingesting process: {small['calls']:,} calls "
              f"{small['peak_rss_mb']:.0f} MB; {calls:,} calls {peak:.0f} MB")
        with writer(copy) as con:   # prices for bench/evals.py (not timed)
            import_prices(con, validate_prices(market.prices())[0])
            t = time.monotonic()
            rows = con.execute(QUERY).fetchall()
            query_s = time.monotonic() - t
        # read back cold, in a fresh connection: what a reader process sees
        with writer(copy) as con:
            t = time.monotonic()
            hashes = [h for h, in con.execute(UNIT_PROMPTS, [f"bench/{nights[0]}/main",
                                                               market.tickers[0]]).fetchall()]
            text = prompt_texts(con, hashes)
            back = [(h, text[h]) for h in hashes]
            readback_s = time.monotonic() - t
            night_hashes = [h for h, in con.execute(
                "SELECT DISTINCT prompt_hash FROM calls WHERE run_id = ?",
                [f"bench/{nights[-1]}/main"]).fetchall()]
            t = time.monotonic()
            night_mb = sum(map(len, prompt_texts(con, night_hashes).values())) / 2**20
            night_read_s = time.monotonic() - t
            # the ad-hoc view, by literal hashes: it must give the same bytes (slowly)
            t = time.monotonic()
            view = dict(con.execute("SELECT prompt_hash, prompt_text FROM v_prompts WHERE "
                                    f"prompt_hash IN ({','.join(map(str, hashes))})").fetchall())
            view_s = time.monotonic() - t
        same = [p for _, p in back] == st["first_unit"] and view == text
        text_mb = st["six_weeks_text_bytes"] / 2**20
        print(f"query (per path x agent latency quantiles, {len(rows)} rows) {query_s:.3f} s; "
              f"one unit's {len(back)} prompts by prompt_texts {readback_s:.3f} s (cold), "
              f"through v_prompts {view_s:.1f} s, {'byte-identical' if same else 'DIFFERENT'} "
              f"to what was sent; one night's {len(night_hashes):,} prompts of one path "
              f"({night_mb:,.0f} MB) {night_read_s:.2f} s")
        print(f"ingest {calls / ingest_s:,.0f} calls/s (median of {a.repeats}); text as sent "
              f"{text_mb:,.0f} MB; database {db_mb:,.0f} MB = {db_mb / text_mb:.3f}x")
        if a.keep:
            shutil.copy(copy, a.keep)
        print(f"ingest_s={ingest_s:.2f} calls={calls} db_mb={db_mb:.0f} text_mb={text_mb:.0f} "
              f"night_ingest_s={night_s:.2f} peak_rss_mb={peak:.0f}")
        if not same:
            raise SystemExit("prompts did not come back as sent")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ingest"]:
        _ingest_child(Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
        raise SystemExit
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=42, help="nights ingested (scales the calls)")
    ap.add_argument("--tickers", type=int, default=100)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="ingests into fresh warehouses")
    ap.add_argument("--tally-nights", type=int, default=2,
                    help="nights over which message- vs part-level sharing is tallied")
    ap.add_argument("--tmp", type=Path, help="folder for journals and warehouses (~6 GB)")
    ap.add_argument("--keep", type=Path, help="copy the built warehouse here (for bench/evals.py)")
    main(ap.parse_args())
