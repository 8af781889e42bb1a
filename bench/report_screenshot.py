"""Render a report in headless Chromium (Debian's `chromium`), save a screenshot, and fail on
any console error: the HTML must stand on its own (no network, no script errors).

    python bench/report_screenshot.py reports/demo-....html shot.png [--width 1000 --height 900]
Last line: `screenshot=... console_errors=N`
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


def main(html: Path, out: Path, height: int, width: int = 1280) -> int:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium not found: apt-get install chromium", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as profile:
        r = subprocess.run([browser, *FLAGS, f"--user-data-dir={profile}",
                            f"--window-size={width},{height}", f"--screenshot={out.resolve()}",
                            html.resolve().as_uri()], capture_output=True, text=True,
                           timeout=120)
    errors = [ln for ln in r.stderr.splitlines()
              if "CONSOLE" in ln and re.search(r"error|Uncaught|Failed to load", ln, re.I)]
    for ln in errors:
        print(ln)
    ok = out.exists() and out.stat().st_size > 10_000
    print(f"screenshot={out if ok else 'missing'} console_errors={len(errors)}")
    return 0 if ok and not errors else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("html", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--height", type=int, default=6000)
    ap.add_argument("--width", type=int, default=1280, help="window width in px (1400, 1000)")
    a = ap.parse_args()
    sys.exit(main(a.html, a.out, a.height, a.width))
