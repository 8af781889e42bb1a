"""Screenshot every view of `dualpath ui` in headless Chromium at each width, and say what
sticks out of the window.

    python bench/viewer_shots.py -c .dualpath/demo/dualpath.toml OUT_DIR [--widths 1000 1400]

Starts the viewer on a free port, then loads the overview, the newest night (and one whose
runs are not all results, if any), the night under each call filter, a ticker's page (its
word diff), that ticker's history across nights, a search that matches and one that does
not. Saves OUT_DIR/<view>-<width>.png (whole page) and prints, per page, the document's
width against the window's, the outermost elements past its right edge and those cut.
Last line: `pages=N overflowing=K console_errors=E`.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and its name would shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import re
import subprocess
from urllib.parse import quote

from bench.browser import Browser

FILTERS = ("runaway", "parse_failed", "contaminated", "retried")


def start_ui(config: Path, db: Path | None) -> tuple[subprocess.Popen, str]:
    args = [sys.executable, "-m", "dualpath", "ui", "-c", str(config), "--port", "0"]
    proc = subprocess.Popen(args + (["--db", str(db)] if db else []), stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:\d+", line)
    if not m:
        proc.terminate()
        raise SystemExit(f"the viewer did not start: {line.strip()}")
    return proc, m[0]


def views(b: Browser, base: str, word: str, extra: list[str]) -> list[tuple[str, str]]:
    """(name, path) of each view, found from the overview's and a night's links."""
    b.open(base + "/")
    nights = sorted({h for h in b.links() if re.fullmatch(r"/night/\d{4}-\d\d-\d\d", h)})
    if not nights:
        raise SystemExit("the overview lists no night")
    out = [("overview", "/"), ("night", nights[-1])]
    # a night with a run that is no result or no speed, as the overview marks it
    marked = sorted({h for h in b.links("tr:has(.st-left, .st-partial, .st-failed)")
                     if re.fullmatch(r"/night/\d{4}-\d\d-\d\d", h)} - {nights[-1]})
    if marked:
        out.append(("night-excluded", marked[-1]))
    out += [(f"night-{f}", f"{nights[-1]}?flag={f}") for f in FILTERS]
    b.open(base + nights[-1])
    tickers = [h for h in b.links() if re.fullmatch(r"/night/[\d-]+/[^/?]+", h)]
    hist = [h for h in b.links() if h.startswith("/ticker/")]
    if tickers:
        out.append(("ticker", tickers[0]))
    if hist:
        out.append(("history", hist[0]))
    out += [("search", "/search?q=" + quote(word)), ("search-none", "/search?q=zzqxjw")]
    return out + [tuple(e.split("=", 1)) for e in extra]


def main(config: Path, out: Path, widths: list[int], db: Path | None, word: str,
         extra: list[str]) -> int:
    out.mkdir(parents=True, exist_ok=True)
    proc, base = start_ui(config, db)
    pages = overflowing = errors = 0
    try:
        with Browser() as b:
            for name, path in views(b, base, word, extra):
                for w in widths:
                    look = b.open(base + path, width=w)
                    shot = b.screenshot(out / f"{name}-{w}.png")
                    pages += 1
                    overflowing += look.scroll_width > look.width
                    errors += len(look.console)
                    print(f"{shot.name:28} {path[:60]:60} width {look.scroll_width}/{w} "
                          f"height {look.height}")
                    for what, items in (("past the edge", look.overflow), ("cut", look.cut),
                                        ("console", look.console)):
                        for item in items[:8]:
                            print(f"    {what}: {item}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"pages={pages} overflowing={overflowing} console_errors={errors}")
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--config", type=Path, required=True)
    ap.add_argument("out", type=Path)
    ap.add_argument("--widths", type=int, nargs="+", default=[1000, 1400])
    ap.add_argument("--db", type=Path, help="warehouse file instead of the config's")
    ap.add_argument("--word", default="revenue", help="a word to search the answers for")
    ap.add_argument("--page", action="append", default=[], metavar="NAME=PATH",
                    help="one more page to shoot (repeatable), e.g. diff=/night/D/T")
    a = ap.parse_args()
    sys.exit(main(a.config, a.out, a.widths, a.db, a.word, a.page))
