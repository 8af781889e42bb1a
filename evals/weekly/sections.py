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

# the report's sections, in the order it shows them; each table names its own
# (`evals.registry.table(..., section=...)`), in the order its declaration gives
SECTION_ORDER = ("plan", "primary", "quality", "speed", "retuning", "hygiene", "sampling")
CARDS = ("headline",)          # the headline's lines are the report's first screen
# frames that carry more than their table (warehouse rows with ids and internals)
PROJECTED = frozenset({"left_out", "runs", "evidence", "gpu", "hosts", "sessions", "sweep",
                       "deviations"})


def placed() -> dict[str, list[str]]:
    """Section -> the keys of the tables declared in it, in order."""
    tables = every_table()
    return {name: [k for k, t in sorted(tables.items(), key=lambda kv: kv[1].order)
                   if t.section == name] for name in SECTION_ORDER}


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
            "empty": "" if missing else spec.empty or f"no rows yet for {spec.key}",
            "collapsed": spec.collapsed,
            "figs": [{"uri": figs.get(k), "caption": cap, "missing": FIG_MISSING.get(k, cap)}
                     for k, cap in FIGS.get(spec.key, ())]}


def sections(d, figs: dict) -> dict[str, list[dict]]:
    """Section -> its tables in order; "more" holds every registered table no section names
    (so a newly declared table is never missing from either output)."""
    tables, data = every_table(), frames(d)
    why = getattr(d.metrics, "serving_missing", [])     # the same runs, the same gaps
    gaps = {"serving": why + list(getattr(d.metrics, "serving_unmeasured", [])),
            "latency": why}
    where = placed()
    shown = {k for keys in where.values() for k in keys} | set(CARDS)
    out = {name: [entry(tables[k], data.get(k), figs, gaps.get(k, ())) for k in keys]
           for name, keys in where.items()}
    out["more"] = [entry(t, data.get(k), figs) for k, t in tables.items() if k not in shown]
    return out
