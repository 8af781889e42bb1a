"""One headless Chromium (Debian's `chromium`) driven over the DevTools protocol: load a page
at a given width, measure what sticks out of it, and save a whole-page screenshot.

    with Browser() as b:
        look = b.open("http://127.0.0.1:8765/", width=1000)
        look.overflow      # elements reaching past the window's right edge (outermost only)
        b.screenshot("/tmp/overview-1000.png")

The pages under test refuse every script (their Content-Security-Policy); the protocol's own
evaluation is not a page script and is not refused, so the page is measured as a reader
gets it. One browser serves every page (each start costs ~1 s of CPU); `websockets` (a
dependency of Prefect's) speaks the protocol.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-proxy-server", "--hide-scrollbars", "--remote-debugging-port=0"]

# what a reader would see as wrong, measured in the laid-out page
MEASURE = r"""(() => {
  const W = document.documentElement.clientWidth;
  const name = el => el.tagName.toLowerCase() + (el.className && typeof el.className == "string"
      ? "." + el.className.trim().split(/\s+/).join(".") : "");
  const over = [], cut = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > W + 1 && !(el.parentElement &&
        el.parentElement.getBoundingClientRect().right > W + 1))
      over.push(name(el) + " to " + Math.round(r.right) + " px");
    const s = getComputedStyle(el);
    if (/hidden|clip/.test(s.overflowX) && el.scrollWidth > el.clientWidth + 1)
      cut.push(name(el));
  }
  return {width: W, scroll_width: document.documentElement.scrollWidth,
          height: document.documentElement.scrollHeight, overflow: over, cut: cut,
          text: document.body.innerText};
})()"""


@dataclass
class Look:
    url: str
    width: int
    scroll_width: int         # the document's; more than `width`: the page scrolls sideways
    height: int
    overflow: list[str]       # outermost elements past the right edge, "tag.class to N px"
    cut: list[str]            # elements whose overflow is hidden and whose content is wider
    text: str                 # the page's text as rendered (innerText)
    console: list[str]        # errors the page logged (a refused script, a missing file)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One Chromium, one tab; `open` loads a page, `screenshot` saves what it shows."""

    def __init__(self, binary: str | None = None, height: int = 900):
        self.binary = binary or chromium()
        if self.binary is None:
            raise RuntimeError("chromium not found: apt-get install chromium")
        self.height = height
        self.ids = itertools.count(1)
        self.loaded, self.console = False, []

    def __enter__(self) -> Browser:
        from websockets.sync.client import connect

        self.profile = tempfile.TemporaryDirectory(prefix="dualpath-chromium-")
        self.proc = subprocess.Popen([self.binary, *FLAGS, f"--user-data-dir={self.profile.name}",
                                      "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        port_file = Path(self.profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and len(port_file.read_text().split()) == 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port, path = port_file.read_text().split()
        self.ws = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=30)
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target,
                                 flatten=True)["sessionId"]
        for domain in ("Page.enable", "Log.enable", "Runtime.enable"):
            self.call(domain, session=True)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.profile.cleanup()

    def call(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        """Send one command and return its result (events that arrive first are kept)."""
        n = next(self.ids)
        msg = {"id": n, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = self._receive(timeout)
            if reply.get("id") == n:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})

    def _receive(self, timeout: float) -> dict:
        reply = json.loads(self.ws.recv(timeout=timeout))
        method = reply.get("method")
        if method == "Page.loadEventFired":
            self.loaded = True
        elif method == "Log.entryAdded" and reply["params"]["entry"]["level"] == "error":
            entry = reply["params"]["entry"]
            self.console.append(entry["text"] + (f" ({entry['url']})" if entry.get("url") else ""))
        elif method == "Runtime.exceptionThrown":
            self.console.append(reply["params"]["exceptionDetails"].get("text", "exception"))
        return reply

    def open(self, url: str, width: int = 1400, timeout: float = 120) -> Look:
        """Load `url` in a window `width` px wide and measure it once it has loaded."""
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width,
                  height=self.height, deviceScaleFactor=1, mobile=False)
        self.loaded, self.console = False, []
        self.call("Page.navigate", session=True, url=url, timeout=timeout)
        deadline = time.monotonic() + timeout
        while not self.loaded:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load in {timeout:.0f} s")
            self._receive(deadline - time.monotonic())
        m = self.call("Runtime.evaluate", session=True, expression=MEASURE,
                      returnByValue=True)["result"]["value"]
        return Look(url, m["width"], m["scroll_width"], m["height"], m["overflow"], m["cut"],
                    m["text"], list(self.console))

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page loaded last."""
        return self.call("Runtime.evaluate", session=True, returnByValue=True,
                         expression=expression)["result"].get("value")

    def links(self, within: str = "body") -> list[str]:
        """Every link's href inside the elements `within` selects (CSS), as written."""
        return self.evaluate(f"[...document.querySelectorAll({json.dumps(within)})].flatMap("
                             "e => [...e.querySelectorAll('a[href]')].map(a => "
                             "a.getAttribute('href')))")

    def screenshot(self, out: Path | str) -> Path:
        """The whole page as loaded last (its full height), as a PNG."""
        size = self.call("Page.getLayoutMetrics", session=True)["cssContentSize"]
        shot = self.call("Page.captureScreenshot", session=True, format="png",
                         captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"],
                               "height": min(size["height"], 16000), "scale": 1})
        out = Path(out)
        out.write_bytes(base64.b64decode(shot["data"]))
        return out
