"""The one registry of tables: each declared once, beside the function that computes it.

As inspect_ai registers a metric with its name and metadata, a measure here registers the
table it returns with `@table(...)`: its key, title, every column (what csv and json carry),
the brief columns a terminal shows, the basis each speed column is on, a plain-words gloss
for a term a reader can misread, how a cell is formatted, and where it is shown: its kind,
its place in the order, its section of the weekly report, the line shown when it has no
rows. The CLI (`dualpath metrics`), the weekly report and its Prefect artifact iterate
`every_table()`; none of them picks columns, order or sections of its own.

A metric (kind "metric") is one function of `evals.inputs.MetricInputs` and this one
declaration: `evals.report.compute_metrics` calls every registered metric, `Metrics` holds
its frame under its key, the CLI prints it and the report places it. Nothing else is edited.

A frame whose columns differ from its declaration is an error (`TableDrift`), never a
silently dropped column: a renamed column fails a test instead of vanishing from a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import pandas as pd

from dualpath.evals.format import cell

KINDS = ("headline", "metric", "report", "listing")
# the modules whose import registers each kind's tables (their declarations live there)
MODULES = {"headline": ("dualpath.evals.result",),
           "metric": ("dualpath.evals.rankic", "dualpath.evals.compare",
                      "dualpath.evals.agreement", "dualpath.evals.signal",
                      "dualpath.evals.speed", "dualpath.evals.serving"),
           "report": ("dualpath.evals.report_tables",),
           "listing": ("dualpath.evals.listings",)}


class TableDrift(ValueError):
    """A measure returned columns its registered table does not declare (or lacks some)."""


@dataclass(frozen=True)
class Table:
    """A registered table: what it is called, what it holds, what a terminal shows."""

    key: str
    title: str
    columns: tuple[str, ...]          # every column, in order: csv and json carry these
    brief: tuple[str, ...] | None     # what a terminal and the report show (None: all)
    basis: dict[str, str] = field(default_factory=dict)   # column -> basis in words
    gloss: dict[str, str] = field(default_factory=dict)   # column -> plain words
    kinds: dict[str, str] = field(default_factory=dict)   # column -> `evals.format` kind
    open_columns: bool = False        # columns depend on the data (e.g. one per grade)
    measure: Callable | None = None
    # columns a page or terminal leaves out when no row has a value (what the engines did
    # not report); csv and json still carry them, as null, and the measure says why in a line
    optional: tuple[str, ...] = ()
    kind: str = "metric"              # one of KINDS: who computes it, who prints it
    order: float = 1000.0             # its place among its kind and in its report section
    section: str | None = None        # the weekly report's section (None: "More tables")
    empty: str | None = None          # the report's line in its place when it has no rows
    collapsed: bool = False           # folded in the report until opened

    def shown(self, wide: bool = False) -> tuple[str, ...]:
        return self.columns if wide or self.brief is None else self.brief

    def select(self, frame: pd.DataFrame, wide: bool = True,
               drop_empty: bool = False) -> pd.DataFrame:
        """The frame's declared columns (brief unless ``wide``); drift is an error. With
        ``drop_empty`` (what a person reads), an ``optional`` column no row has a value in is
        left out: a column of dashes says nothing."""
        if self.open_columns or not len(frame.columns):
            return frame
        have, want = list(frame.columns), list(self.columns)
        missing = [c for c in want if c not in have]
        extra = [c for c in have if c not in want]
        if missing or extra:
            raise TableDrift(f"table {self.key!r}: the measure returned columns {extra} it "
                             f"does not declare and lacks declared {missing}; declare them "
                             f"in its @table(...)")
        shown = [c for c in self.shown(wide)
                 if not (drop_empty and c in self.optional and frame[c].isna().all())]
        return frame[shown]

    def project(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The declared columns of a frame that carries more (a warehouse summary with ids
        and internals); a declared column it lacks is drift, never a dropped column."""
        if not len(frame.columns):
            return frame
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise TableDrift(f"table {self.key!r}: the frame lacks declared {missing}")
        return frame[list(self.columns)]

    def rows(self, frame: pd.DataFrame) -> list[list[str]]:
        """Every cell of an already selected frame, formatted."""
        kinds = [self.kinds.get(str(c)) for c in frame.columns]
        return [[cell(v, k) for v, k in zip(row, kinds)] for row in frame.itertuples(index=False)]

    def footnotes(self, frame: pd.DataFrame) -> list[str]:
        """The basis and gloss of each column the frame shows (and of no other)."""
        cols = [str(c) for c in frame.columns]
        return ([f"{c}: {self.basis[c]}" for c in cols if c in self.basis]
                + [f"{c}: {self.gloss[c]}" for c in cols if c in self.gloss])


TABLES: dict[str, Table] = {}


def table(key: str, title: str, columns, brief=None, *, basis=None, gloss=None, kinds=None,
          open_columns: bool = False, optional=(), kind: str = "metric",
          order: float | None = None, section: str | None = None, empty: str | None = None,
          collapsed: bool = False):
    """Declare a table: registered at once, and, used as a decorator, with the function
    that computes it as its measure (the function is returned unchanged). A table whose
    frame is gathered elsewhere (a warehouse listing) is declared by the call alone."""
    if kind not in KINDS:
        raise ValueError(f"table {key!r}: kind {kind!r} is not one of {KINDS}")
    TABLES[key] = Table(key, title, tuple(columns), tuple(brief) if brief else None,
                        dict(basis or {}), dict(gloss or {}), dict(kinds or {}), open_columns,
                        None, tuple(optional), kind,
                        float(order) if order is not None else 1000.0 + len(TABLES),
                        section, empty, collapsed)

    def measure(fn):
        TABLES[key] = replace(TABLES[key], measure=fn)
        return fn
    return measure


def of_kind(kind: str) -> dict[str, Table]:
    """The tables of one kind, in their declared order (importing the modules that
    declare them)."""
    import importlib

    for name in MODULES[kind]:
        importlib.import_module(name)
    tables = sorted((t for t in TABLES.values() if t.kind == kind), key=lambda t: t.order)
    return {t.key: t for t in tables}


def metrics() -> dict[str, Table]:
    """The metric tables `compute_metrics` computes, each from `MetricInputs`."""
    return of_kind("metric")


def registered() -> dict[str, Table]:
    """What `dualpath metrics` prints: the headline, then every metric table in order."""
    return {**of_kind("headline"), **metrics()}


def report_tables() -> dict[str, Table]:
    """The weekly report's own tables (`evals.report_tables`): deviations, latency
    percentiles, the projected night, sweeps, server sessions, thinking share. Computed from
    the report's frames, not metric tables."""
    return of_kind("report")


def listings() -> dict[str, Table]:
    """The run listings (`evals.listings`): runs, left_out, evidence, gpu, hosts. Not the
    metric tables: `dualpath runs` imports no statistics."""
    return of_kind("listing")


def every_table() -> dict[str, Table]:
    """Every registered table: the metric tables, the report's own, the run listings, then
    any other declared (kind metric but declared after the modules above). The weekly report
    and its Markdown (the Prefect artifact) show each one."""
    out = {**registered(), **report_tables(), **listings()}
    return {**out, **{k: t for k, t in TABLES.items() if k not in out}}
