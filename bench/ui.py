"""Viewer benchmark: `dualpath ui` on the six-week warehouse, its pages over real HTTP.

    python bench/warehouse.py --keep .dualpath/bench-six-weeks.duckdb   # once (minutes)
    python bench/ui.py .dualpath/bench-six-weeks.duckdb

Starts `dualpath ui` in its own process on a free port, then asks for night pages and ticker
pages of nights spread over the six weeks (a different night and ticker each request, so no
request finds the previous one's rows in DuckDB's buffers), and times each whole request
(connect, the page's queries, rendering, transfer). The overview's headline computes every
metric over the six weeks; it is timed once, apart (it is cached until a run changes). A
night page draws each run's occupancy and power plots the first time it is seen: its first
requests are timed apart from the same nights asked again. Then a ticker's history across
every night and searches of every stored answer (a word most answers hold, and one none
does: both read every answer's text).
Last line: `ticker_page_s=<median> night_page_s=<median> night_again_s=<median>
history_page_s=<median> search_page_s=<median>` (goals: <= 1 s, <= 2 s, -, <= 1 s, <= 2 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and its name would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import re
import statistics
import subprocess
import tempfile
import time

import duckdb
import httpx

from dualpath.config import dump_toml
from dualpath.demo import demo_config_data


def start_ui(cfg_path: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([str(Path(sys.executable).with_name("dualpath")), "ui", "-c",
                             str(cfg_path), "--port", "0"], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    m = re.search(r"http://[\d.]+:\d+/", line)
    if not m:
        proc.kill()
        raise SystemExit(f"dualpath ui did not start: {line!r}")
    return proc, m[0].rstrip("/")


def timed(client: httpx.Client, url: str, must: str) -> float:
    t = time.perf_counter()
    r = client.get(url)
    s = time.perf_counter() - t
    if r.status_code != 200 or must not in r.text:
        raise SystemExit(f"{url}: HTTP {r.status_code}, {len(r.text)} bytes")
    return s


def main(a: argparse.Namespace) -> None:
    with duckdb.connect(str(a.warehouse), read_only=True) as con:
        exp = con.execute("SELECT any_value(experiment) FROM runs").fetchone()[0]
        nights = [n for n, in con.execute("SELECT DISTINCT night FROM runs ORDER BY 1").fetchall()]
        tickers = [t for t, in con.execute("SELECT DISTINCT ticker FROM units ORDER BY 1")
                   .fetchall()]
        calls = con.execute("SELECT count(*) FROM calls").fetchone()[0]
    with tempfile.TemporaryDirectory() as tmp:
        data = demo_config_data(Path(tmp), 100, 3)
        data["experiment"]["name"] = exp
        data["warehouse"] = {"path": str(a.warehouse.resolve()), "runs_dir": "runs"}
        cfg = Path(tmp) / "dualpath.toml"
        cfg.write_text(dump_toml(data) + "\n")
        proc, base = start_ui(cfg)
        try:
            with httpx.Client(trust_env=False, timeout=600) as client:
                t = time.perf_counter()
                timed(client, base + "/", "verdict")
                overview_s = time.perf_counter() - t
                pick = [nights[(i * 7 + 3) % len(nights)] for i in range(a.requests)]
                night_s = [timed(client, f"{base}/night/{n}", "<td><a href=") for n in pick]
                again_s = [timed(client, f"{base}/night/{n}", "<td><a href=") for n in pick]
                history_s = [timed(client, f"{base}/ticker/{tickers[(i * 13) % len(tickers)]}",
                                   "every night") for i in range(a.requests)]
                search_s = [timed(client, f"{base}/search?q={q}", "Search the answers")
                            for q in ("evidence", "zq-not-a-word")]
                tick = [(nights[(i * 11 + 5) % len(nights)], tickers[(i * 37 + 1) % len(tickers)])
                        for i in range(a.requests)]
                ticker_s = [timed(client, f"{base}/night/{n}/{t}", "consistency_check")
                            for n, t in tick]
                size = len(client.get(f"{base}/night/{tick[0][0]}/{tick[0][1]}").content)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"warehouse {a.warehouse} ({a.warehouse.stat().st_size / 2**20:,.0f} MB, {calls:,} "
          f"calls, {len(nights)} nights x {len(tickers)} tickers)")
    print(f"overview (headline over every night, first request: computes the metrics) "
          f"{overview_s:.2f} s")
    print("night pages: " + ", ".join(f"{s:.3f}" for s in night_s) + " s; again: "
          + ", ".join(f"{s:.3f}" for s in again_s) + " s")
    print("history pages: " + ", ".join(f"{s:.3f}" for s in history_s) + " s; searches "
          "(a common word, no match): " + ", ".join(f"{s:.3f}" for s in search_s) + " s")
    print("ticker pages: " + ", ".join(f"{s:.3f}" for s in ticker_s) + f" s ({size / 2**20:.1f} "
          "MB of HTML each: both paths' 17 calls of one draw, prompts and answers)")
    print(f"ticker_page_s={statistics.median(ticker_s):.3f} "
          f"night_page_s={statistics.median(night_s):.3f} "
          f"night_again_s={statistics.median(again_s):.3f} "
          f"history_page_s={statistics.median(history_s):.3f} "
          f"search_page_s={statistics.median(search_s):.3f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("warehouse", type=Path, nargs="?",
                    default=Path(".dualpath/bench-six-weeks.duckdb"))
    ap.add_argument("--requests", type=int, default=7, help="requests per page kind")
    main(ap.parse_args())
