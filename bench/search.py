"""The viewer's answer search (`warehouse.viewer.search_answers`) on answers of the six-week
warehouse's size, without writing six weeks of journals first (`bench/warehouse.py` writes
~6 GB of them; `bench/ui.py` then times the page over HTTP).

    python bench/search.py [--scale 1.0] [--keep PATH]

Builds a warehouse through the real migrations holding `--scale` × 42 nights × 2 paths ×
100 tickers × 3 draws × 17 calls, each with its own answer: its id and 8 fragments of ~700
bytes drawn from 4,000 made-up ones (~5.6 KB, as the bench's answers; a third of the
fragments hold "evidence"). Then indexes the answers night by night through ingest's own
step (`warehouse.search_index.index_new_answers`, each night in its transaction) and times
the search for a word most answers hold and for one none does, 5 times each, both ways in
the same run: reading every answer (the scan, `index=False`) and through the index; a
phrase and a two-letter substring are timed too. CPU seconds of the index per night and
the megabytes it adds to the file are printed above the last line.
Last line: `calls=… text_mb=… scan_common_s=… index_common_s=… scan_none_s=… index_none_s=…`
(medians, wall seconds)
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

# ids in night order: ingest appends a night's answers together (numbered in any order, a
# night's answers lay across the whole table: no reader could skip another night's rows)
KEYS = """CREATE TEMP TABLE k AS
    SELECT row_number() OVER (ORDER BY n, p, tk, d, a) AS id, n, p, tk, d, a
    FROM range($nights) t(n), (VALUES ('main'), ('backup')) v(p), range(100) x(tk),
         range(1, 4) y(d), range(17) z(a)"""
PICK = ", ".join(f"(hash(id, {j}) % 4000) + 1 AS a{j}" for j in range(1, 9))
TEXTS = ("INSERT INTO texts (hash, text) SELECT id, concat_ws(' ', id::VARCHAR, "
         + ", ".join(f"f{j}.f" for j in range(1, 9)) + f") FROM (SELECT id, {PICK} FROM k) s "
         + " ".join(f"JOIN frags f{j} ON f{j}.i = a{j}" for j in range(1, 9))
         + " ORDER BY id")      # night by night, as ingest appends them


def fragments() -> list[str]:
    """The 4,000 made-up fragments answers are made of."""
    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    return [" ".join(rng.choice(words) for _ in range(110)) + (" evidence" if i % 3 == 0 else "")
            for i in range(4000)]


def build(path: Path, nights: int) -> None:
    from dualpath.warehouse.db import writer

    frags = fragments()
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


def index(path: Path, nights: int) -> tuple[list[float], float]:
    """Index the answers night by night as ingest does; (CPU seconds per night, MB added)."""
    from dualpath.warehouse.db import transaction, writer
    from dualpath.warehouse.search_index import index_new_answers

    before = path.stat().st_size
    cpu = []
    with writer(path) as con:
        for n in range(nights):
            # the night's answers staged as ingest stages them (not timed: ingest has them)
            con.execute("CREATE OR REPLACE TEMP TABLE stage_calls AS SELECT hash AS "
                        "output_hash, text AS output_text FROM texts WHERE hash IN "
                        "(SELECT output_hash FROM calls WHERE run_id IN "
                        "($n || 'main', $n || 'backup'))", {"n": f"r{n}"})
            t = time.process_time()
            with transaction(con):
                index_new_answers(con)
            cpu.append(time.process_time() - t)
            con.execute("DROP TABLE stage_calls")
        con.execute("CHECKPOINT")
    return cpu, (path.stat().st_size - before) / 2**20


def timed(path: Path, q: str, index: bool) -> tuple[float, int, str | None]:
    """Median wall seconds of 5 searches for `q`, each on its own read-only connection as
    the page's (so DuckDB's cache starts cold; the OS's is warm), the rows shown, and why
    not by the index."""
    import dualpath.warehouse.viewer as wv

    took = []
    for _ in range(5):
        t = time.perf_counter()
        with wv.viewer_connection(path) as con:
            found = wv.search_answers(con, "bench", q, index=index)
        took.append(time.perf_counter() - t)
    return statistics.median(took), len(found.rows), found.without_index


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="share of the 42 nights")
    ap.add_argument("--keep", type=Path, help="build here (reused when it exists)")
    a = ap.parse_args()
    from dualpath.warehouse.db import reader

    path = a.keep or Path(tempfile.mkdtemp()) / "search.duckdb"
    nights = max(1, round(42 * a.scale))
    if not path.exists():
        t = time.perf_counter()
        build(path, nights)
        print(f"built {path} in {time.perf_counter() - t:.0f} s")
    with reader(path) as con:
        indexed = con.execute("SELECT count(*) FROM search_docs").fetchone()[0]
    if not indexed:
        cpu, mb = index(path, nights)
        print(f"index: {statistics.median(cpu):.2f} CPU s per night (median of {nights}; "
              f"{sum(cpu):.0f} s in all), +{mb:.0f} MB on the file "
              f"({path.stat().st_size / 2**20:.0f} MB now)")
    out = {}
    with reader(path) as con:
        calls, mb = con.execute("SELECT count(*), sum(strlen(text)) / 2^20 FROM texts").fetchone()
        terms, docs, postings = (con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                                 for t in ("search_terms", "search_docs", "search_postings"))
    print(f"index: {terms} words, {docs} answers, {postings} postings")
    phrase = " ".join(fragments()[7].split()[10:12])
    # a phrase (in ~0.2% of answers), one of two common words never together, a substring
    for name, q in (("common", "evidence"), ("none", "zq-not-a-word"), ("phrase", phrase),
                    ("absent_phrase", "evidence."), ("two_letters", "ev")):
        for way in ("scan", "index"):
            s, rows, why = timed(path, q, way == "index")
            out[f"{way}_{name}_s"] = s
            print(f"{way:5s} {q!r}: median {s:.3f} s, {rows} row(s) of at most 51"
                  + (f" (without the index: {why})" if why and way == "index" else ""))
    print(f"load {os.getloadavg()[0]:.1f}")
    print(f"calls={calls} text_mb={mb:.0f} " + " ".join(
        f"{k}={out[k]:.3f}" for k in ("scan_common_s", "index_common_s", "scan_none_s",
                                      "index_none_s")))


if __name__ == "__main__":
    main()
