"""The overview's headline: the verdict and the slowdown, in the words every other output uses.

One function, `headline(cfg)`: the glance headline (`flows.glance.headline_for`, the same
lines the CLI and the weekly report print) where this checkout has it, else the same two
answers read from the metric tables `dualpath metrics` and the weekly report compute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dualpath.config import Config
from dualpath.errors import UserError


@dataclass(frozen=True)
class Headline:
    """What the overview shows first; `lines` are shown as they are, as text."""

    lines: tuple[str, ...]
    verdict: str | None           # the primary comparison's verdict word
    slowdown: float | None        # candidate s/ticker ÷ baseline s/ticker, throughput basis


def headline(cfg: Config) -> Headline:
    """The headline of the experiment (reads the warehouse; seconds at six weeks); before
    the first night, what is missing, in words."""
    try:
        from flows.glance import headline_for
    except ImportError:
        headline_for = None
    try:
        if headline_for is None:
            return _from_metrics(cfg)
        h = headline_for(cfg)
    except UserError as e:       # e.g. no runs of the experiment yet
        return Headline((str(e),), None, None)
    return Headline(tuple(h.lines), getattr(h.verdict, "verdict", None),
                    getattr(h.slowdown, "ratio", None))


def _fmt(v, spec: str = ".3f") -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _from_metrics(cfg: Config) -> Headline:
    from flows.metrics import load_metrics

    m = load_metrics(cfg)
    lines, verdict, slowdown = [], None, None
    comp = getattr(m, "comparison", None)
    if comp is not None and len(comp):
        rows = comp[comp["role"] == "primary"] if "role" in comp else comp
        r = (rows if len(rows) else comp).iloc[0]
        verdict = str(r["verdict"])
        lines.append(f"{r['candidate']} vs {r['baseline']} at h={int(r['horizon'])} sessions: "
                     f"{verdict} (margin δ = {r['margin']:g}; ΔIC {_fmt(r.get('mean_delta'))}, "
                     f"CI [{_fmt(r.get('ci_low'))}, {_fmt(r.get('ci_high'))}] at "
                     f"{_fmt(r.get('ci_level'), '.0%')}"
                     + (f"; {r['note']}" if isinstance(r.get("note"), str) and r["note"] else "")
                     + ")")
    speed = getattr(m, "speed", None)
    if comp is not None and len(comp) and speed is not None and len(speed):
        s = speed.set_index("path")["throughput_s_per_ticker"]
        b, c = comp.iloc[0]["baseline"], comp.iloc[0]["candidate"]
        if b in s and c in s and s[b] and not math.isnan(s[b]) and not math.isnan(s[c]):
            slowdown = float(s[c] / s[b])
            lines.append(f"{c} takes {slowdown:.2f}× {b}'s time per ticker ({s[c]:,.1f} vs "
                         f"{s[b]:,.1f} s/ticker, throughput basis: run wall clock ÷ tickers; "
                         "median over complete runs)")
    if not lines:
        lines.append("no comparison yet: no complete run on both paths")
    return Headline(tuple(lines), verdict, slowdown)
