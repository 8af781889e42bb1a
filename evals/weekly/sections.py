"""Which section of the report each registered table sits in, the figures drawn beside it,
and the line shown in its place when it has no rows (what is missing and why).

The report loops over `evals.registry.every_table()`: a table declared anywhere reaches the
HTML and the Markdown (under "More tables" when no section names it), with its registered
brief columns, every column folded beneath, and its footnotes. Nothing here picks a column.
"""

from __future__ import annotations

import pandas as pd

from dualpath.evals.listings import left_out, marked
from dualpath.evals.registry import Table, every_table
from dualpath.evals.report_tables import frames as report_frames
from dualpath.evals.weekly.tearsheet import MISSING

SECTIONS = {
    "plan": ("deviations",),
    "primary": ("comparison",),
    "quality": ("rank_ic", "self_agreement", "grades", "cross_path", "draws", "signal_shape",
                "by_grade"),
    "speed": ("speed", "serving", "latency", "projection"),
    "retuning": ("sweep",),
    "hygiene": ("left_out", "runs", "evidence", "gpu", "hosts", "sessions"),
    "sampling": ("thinking",),
}
CARDS = ("headline",)          # the headline's lines are the report's first screen
COLLAPSED = frozenset({"draws", "signal_shape", "by_grade", "runs", "evidence", "gpu",
                       "hosts", "latency", "sessions"})
# frames that carry more than their table (warehouse rows with ids and internals)
PROJECTED = frozenset(SECTIONS["hygiene"]) | {"sweep", "deviations"}

EMPTY = {
    "comparison": "no comparison yet: no matured night on which both paths graded the same "
                  "tickers",
    "rank_ic": "no RankIC yet: no night's forward return has matured",
    "self_agreement": "no self-reproducibility yet: no complete run's units",
    "grades": "no grade distribution yet: no complete run's units",
    "cross_path": "no cross-path agreement: the two paths share no graded ticker-night",
    "draws": "no draw analysis yet: no night's forward return has matured",
    "signal_shape": "no signal shape yet: no night's forward return has matured",
    "by_grade": "no returns by grade yet: no night's forward return has matured",
    "speed": "no speed yet: no path has a complete, undisturbed run",
    "serving": "no serving figures: no path has a complete, undisturbed run",
    "left_out": "nothing left out: every run is complete, in one segment and undisturbed",
    "runs": "no runs in this range",
    "evidence": "no server evidence: no session in this range recorded the server's counters",
    "gpu": "no GPU readings: no run in this range recorded its GPU",
    "hosts": "no hosts recorded for the runs in this range",
    "deviations": "none logged",
    "latency": "no calls of a complete, one-segment, undisturbed run",
    "projection": "no projection: no path has a complete, undisturbed run yet (the runs "
                  "left out are listed under run hygiene)",
    "sweep": "no sweep recorded: `dualpath sweep` retunes a path's slots",
    "sessions": "no server session recorded for the runs in this range",
    "thinking": "no calls",
}

FIGS = {   # table key -> (figure key, caption) drawn beside it
    "comparison": (("delta_ic", "Nightly ΔIC (bars) with the running estimate and interval of "
                    "the planned test on the nights so far (a fixed-n interval at each night, "
                    "not a sequential test); 0 and −δ marked"),),
    "rank_ic": (("rank_ic", "Nightly RankIC and cumulative IC, per path and horizon "
                 "(intervals: the RankIC table)"),
                ("ic_histogram", "Distribution of nightly RankIC per path at the primary "
                 "horizon, its mean dashed"),
                ("ic_heatmap", "Mean nightly RankIC per path and ISO week at the primary "
                 "horizon (cell: mean and nights)")),
    "grades": (("grades", "Share of units per grade, per path, failed draws included"),),
    "by_grade": (("by_grade", "Mean forward return by grade, per path and horizon (the "
                  "table beneath)"),),
    "speed": (("speed", "Seconds per ticker by night on both bases; complete one-segment "
               "undisturbed runs only"),),
}
FIG_MISSING = {**MISSING, "rank_ic": "no RankIC chart: no night's forward return has matured",
               "grades": "no grade chart: no complete run's units",
               "speed": "no speed chart: no path has a complete, undisturbed run"}


def frames(d) -> dict[str, pd.DataFrame]:
    """The frame behind each registered table (the headline's lines are the cards)."""
    m = d.metrics
    out = {k: getattr(m, k, None) for k in every_table()}
    out.update(report_frames(d))
    out.update(runs=marked(d.runs), left_out=left_out(d.runs),
               evidence=getattr(d, "evidence", None), hosts=getattr(d, "hosts", None),
               gpu=getattr(d, "gpu", None))
    return out


def rendered(spec: Table, frame: pd.DataFrame | None, wide: bool = False) -> dict:
    """A table for the templates: its brief columns (all with ``wide``), rows, footnotes."""
    if frame is None or not len(frame):
        return {"cols": [], "rows": [], "notes": []}
    if spec.key in PROJECTED:
        frame = spec.project(frame)
    shown = spec.select(frame, wide, drop_empty=True)
    return {"cols": [str(c) for c in shown.columns], "rows": spec.rows(shown),
            "notes": spec.footnotes(shown)}


def entry(spec: Table, frame: pd.DataFrame | None, figs: dict,
          missing: list[str] | tuple = ()) -> dict:
    """One table as the report shows it: title, brief and every-column views, the line in
    its place when empty, a line for each row it has not (``missing``: a path without a
    run to give it figures, in place of a row of dashes), its figures (each a data URI, or
    the line saying why not)."""
    brief, full = rendered(spec, frame), rendered(spec, frame, wide=True)
    return {"key": spec.key, "title": spec.title, **brief,
            "full": full if full["cols"] != brief["cols"] else None,
            "missing": list(missing),
            "empty": "" if missing else EMPTY.get(spec.key, f"no rows yet for {spec.key}"),
            "collapsed": spec.key in COLLAPSED,
            "figs": [{"uri": figs.get(k), "caption": cap, "missing": FIG_MISSING.get(k, cap)}
                     for k, cap in FIGS.get(spec.key, ())]}


def sections(d, figs: dict) -> dict[str, list[dict]]:
    """Section -> its tables in order; "more" holds every registered table no section names
    (so a newly declared table is never missing from either output)."""
    tables, data = every_table(), frames(d)
    why = getattr(d.metrics, "serving_missing", [])     # the same runs, the same gaps
    gaps = {"serving": why + list(getattr(d.metrics, "serving_unmeasured", [])),
            "latency": why}
    placed = {k for keys in SECTIONS.values() for k in keys} | set(CARDS)
    out = {name: [entry(tables[k], data.get(k), figs, gaps.get(k, ())) for k in keys
                  if k in tables]
           for name, keys in SECTIONS.items()}
    out["more"] = [entry(t, data.get(k), figs) for k, t in tables.items() if k not in placed]
    return out
