"""The viewer's answer search (`warehouse.viewer.search_answers`) on answers of the six-week
warehouse's size, without writing six weeks of journals first (`bench/warehouse.py` writes
~6 GB of them; `bench/ui.py` then times the page over HTTP).

    python bench/search.py [--scale 1.0] [--keep PATH]

Builds a warehouse through the real migrations holding `--scale` × 42 nights × 2 paths ×
100 tickers × 3 draws × 17 calls, each with its own answer: its id and 8 fragments of ~700
bytes drawn from 4,000 made-up ones (~5.6 KB, as the bench's answers; a third of the
fragments hold "evidence"). Then times the search for a word most answers hold and for one
none does (both read every answer's text), 5 times each.
Last line: `calls=… text_mb=… search_common_s=<median> search_none_s=<median>`
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and would shadow the `evals` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import os
import random
import statistics
import tempfile
import time

KEYS = """CREATE TEMP TABLE k AS SELECT row_number() OVER () AS id, n, p, tk, d, a
    FROM range($nights) t(n), (VALUES ('main'), ('backup')) v(p), range(100) x(tk),
         range(1, 4) y(d), range(17) z(a)"""
PICK = ", ".join(f"(hash(id, {j}) % 4000) + 1 AS a{j}" for j in range(1, 9))
TEXTS = ("INSERT INTO texts (hash, text) SELECT id, concat_ws(' ', id::VARCHAR, "
         + ", ".join(f"f{j}.f" for j in range(1, 9)) + f") FROM (SELECT id, {PICK} FROM k) s "
         + " ".join(f"JOIN frags f{j} ON f{j}.i = a{j}" for j in range(1, 9))
         + " ORDER BY id")      # night by night, as ingest appends them


def build(path: Path, nights: int) -> None:
    from warehouse.db import writer

    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    frags = [" ".join(rng.choice(words) for _ in range(110)) + (" evidence" if i % 3 == 0 else "")
             for i in range(4000)]
    day = "DATE '2027-01-04' + n::INTEGER"
    with writer(path) as con:
        con.execute("CREATE TEMP TABLE frags AS SELECT unnest($f) AS f, "
                    "generate_subscripts($f, 1) AS i", {"f": frags})
        con.execute(f"INSERT INTO runs (run_id, experiment, night, path, config_hash, status) "
                    f"SELECT 'r' || n || p, 'bench', {day}, p, 'h', 'complete' FROM range($n) "
                    "t(n), (VALUES ('main'), ('backup')) v(p)", {"n": nights})
        con.execute(KEYS, {"nights": nights})
        con.execute(TEXTS)
        con.execute(f"INSERT INTO calls (call_id, run_id, night, path, ticker, draw, "
                    f"unit_attempt, agent, call_seq, finish_reason, output_hash) SELECT "
                    f"'c' || id, 'r' || n || p, {day}, p, 'T' || lpad(tk::VARCHAR, 3, '0'), d, "
                    "1, 'agent' || a, a, 'stop', id FROM k")
        con.execute("CHECKPOINT")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="share of the 42 nights")
    ap.add_argument("--keep", type=Path, help="build here (reused when it exists)")
    a = ap.parse_args()
    import warehouse.viewer as wv
    from warehouse.db import reader

    path = a.keep or Path(tempfile.mkdtemp()) / "search.duckdb"
    if not path.exists():
        t = time.perf_counter()
        build(path, max(1, round(42 * a.scale)))
        print(f"built {path} in {time.perf_counter() - t:.0f} s")
    with reader(path) as con:
        calls, mb = con.execute("SELECT count(*), sum(strlen(text)) / 2^20 FROM texts").fetchone()
        medians = []
        for q in ("evidence", "zq-not-a-word"):
            took = []
            for _ in range(5):
                t = time.perf_counter()
                rows = len(wv.search_answers(con, "bench", q))
                took.append(time.perf_counter() - t)
            medians.append(statistics.median(took))
            print(f"search {q!r}: {rows} row(s) shown of at most 51; "
                  + " ".join(f"{s:.2f}" for s in took) + " s")
    print(f"load {os.getloadavg()[0]:.1f}")
    print(f"calls={calls} text_mb={mb:.0f} search_common_s={medians[0]:.3f} "
          f"search_none_s={medians[1]:.3f}")


if __name__ == "__main__":
    main()
