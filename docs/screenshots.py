"""The documentation's screenshots of `dualpath ui`, taken by the headless Chromium the tests use.

    python docs/screenshots.py                 # a fresh short demo, then the pages
    python docs/screenshots.py -c DEMO/dualpath.toml

Writes docs/ui-overview.png, docs/ui-night.png, docs/ui-ticker.png, docs/ui-history.png (that
ticker on every night) and docs/ui-search.png (a search of every answer).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import re
import shutil
import subprocess
import tempfile

import duckdb

from dualpath.config import load_config

DOCS = Path(__file__).resolve().parent
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--no-proxy-server",
         "--hide-scrollbars", "--force-device-scale-factor=1"]
BIN = Path(sys.executable).parent


def shoot(url: str, out: Path, height: int) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium not found: apt-get install chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}",
                        f"--window-size=1360,{height}", f"--screenshot={out}", url],
                       capture_output=True, check=True, timeout=120)
    print(f"wrote {out}")


def pages(cfg_path: Path) -> tuple[str, ...]:
    """The overview, the latest night, that night's ticker with the largest grade gap, the
    ticker on every night, and a search for a word the simulated answers use."""
    cfg = load_config(cfg_path)
    with duckdb.connect(str(cfg.resolve(cfg.warehouse.path)), read_only=True) as con:
        night, ticker = con.execute("""
            WITH m AS (SELECT night, ticker, avg(grade) FILTER (WHERE path = 'backup')
                              - avg(grade) FILTER (WHERE path = 'main') AS gap
                       FROM units WHERE night = (SELECT max(night) FROM runs) GROUP BY ALL)
            SELECT night, ticker FROM m ORDER BY abs(gap) DESC NULLS LAST, ticker
            LIMIT 1""").fetchone()
    return ("/", f"/night/{night}", f"/night/{night}/{ticker}", f"/ticker/{ticker}",
            f"/search?q={ticker}:+the+evidence+looks+bearish")


def main(a: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = a.config
        if cfg_path is None:
            root = Path(tmp) / "demo"
            subprocess.run([str(BIN / "dualpath"), "demo", "--nights", "8", "--tickers", "24",
                            "--root", str(root)], check=True, stdout=subprocess.DEVNULL)
            cfg_path = root / "dualpath.toml"
        proc = subprocess.Popen([str(BIN / "dualpath"), "ui", "-c", str(cfg_path), "--port",
                                 "0"], stdout=subprocess.PIPE, text=True)
        try:
            base = re.search(r"http://[\d.]+:\d+", proc.stdout.readline())[0]
            for (name, height), path in zip((("overview", 760), ("night", 1100),
                                             ("ticker", 1250), ("history", 700),
                                             ("search", 800)), pages(cfg_path)):
                shoot(base + path, DOCS / f"ui-{name}.png", height)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--config", type=Path, help="an existing demo's config")
    main(ap.parse_args())
