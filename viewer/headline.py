"""The overview's headline: the verdict and the slowdown, in the words every other output uses.

One function, `headline(cfg)`: the glance headline (`flows.glance.metrics_and_headline`, the
same lines the CLI and the weekly report print) with the serving-benchmark block from the same
metrics.
"""

from __future__ import annotations

from dataclasses import dataclass

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.evals.result import result


@dataclass(frozen=True)
class Headline:
    """What the overview shows first; `lines` are shown as they are, as text."""

    lines: tuple[str, ...]
    verdict: str | None           # the primary RankIC answer's words
    slowdown: float | None        # candidate s/ticker ÷ baseline s/ticker, throughput basis
    serving: tuple | None = None  # (columns, rows, notes, missing) of the serving block
    interchange: str | None = None  # the first quality answer: are the grades interchangeable?


def headline(cfg: Config) -> Headline:
    """The headline of the experiment (reads the warehouse; seconds at six weeks); before
    the first night, what is missing, in words."""
    from dualpath.flows.glance import metrics_and_headline

    try:
        m, h = metrics_and_headline(cfg)
    except UserError as e:       # e.g. no runs of the experiment yet
        return Headline((str(e),), None, None)
    interchange, rankic = big_words(result(h))
    return Headline(tuple(h.lines), rankic, getattr(h.slowdown, "ratio", None),
                    serving_block(m), interchange)


def big_words(r: dict) -> tuple[str | None, str | None]:
    """(interchangeability, RankIC): each answer in the words its headline line gives it
    (`evals.result`), qualification included ("non-inferior, not reassuring"); an interim
    look's is "interim — no decision", never a verdict; None where there is no answer."""
    x, q = r.get("interchangeability"), r.get("rankic")
    return (x["answer"] if x else None), (q["answer"] if q else None)


def serving_block(m) -> tuple | None:
    """The serving table's brief columns, formatted rows and footnotes, as `dualpath
    metrics` prints them, and the line of each path without a run to give it figures, in
    place of its row (None when there is neither)."""
    from dualpath.evals.registry import registered

    frame = getattr(m, "serving", None)
    missing = tuple(getattr(m, "serving_missing", None) or ()) + \
        tuple(getattr(m, "serving_unmeasured", None) or ())
    if frame is None or not len(frame):
        return ((), [], [], missing) if missing else None
    spec = registered()["serving"]
    brief = spec.select(frame, wide=False, drop_empty=True)
    return (tuple(str(c) for c in brief.columns), spec.rows(brief), spec.footnotes(brief),
            missing)
