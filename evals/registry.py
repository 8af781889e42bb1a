"""The one registry of tables: each declared once, by the measure that computes it.

As inspect_ai registers a metric with its name and metadata, a measure here registers the
table it returns with `@table(...)`: its key, title, every column (what csv and json carry),
the brief columns a terminal shows, the basis each speed column is on, a plain-words gloss
for a term a reader can misread, and how a cell is formatted. The CLI (`dualpath metrics`),
the weekly report and its Prefect artifact iterate `every_table()`; none of them picks
columns of its own.

A frame whose columns differ from its declaration is an error (`TableDrift`), never a
silently dropped column: a renamed column fails a test instead of vanishing from a table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from dualpath.evals.format import cell


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
          open_columns: bool = False, optional=()):
    """Register the table a measure returns (a decorator; the measure is unchanged)."""
    def register(fn):
        TABLES[key] = Table(key, title, tuple(columns), tuple(brief) if brief else None,
                            dict(basis or {}), dict(gloss or {}), dict(kinds or {}),
                            open_columns, fn, tuple(optional))
        return fn
    return register


def declare(key: str, title: str, columns, brief=None, **kw) -> None:
    """Register a table whose measure is declared elsewhere (see `evals.tables`)."""
    fn = kw.pop("measure", None)
    table(key, title, columns, brief, **kw)(fn)


def registered() -> dict[str, Table]:
    """Every metric table, in the order they are shown (importing `evals.tables` registers
    them); a table declared but missing from that order comes last, never not at all."""
    from dualpath.evals import tables     # importing it registers the declarations
    from dualpath.evals.listings import LISTINGS

    others = set(LISTINGS) | set(REPORT_TABLES)
    order = [k for k in tables.ORDER if k in TABLES]
    return {k: TABLES[k] for k in order + [k for k in TABLES if k not in order
                                           and k not in others]}


REPORT_TABLES = ("deviations", "latency", "projection", "sweep", "sessions", "thinking")


def report_tables() -> dict[str, Table]:
    """The weekly report's own tables (`evals.report_tables`, which registers them on
    import): deviations, latency percentiles, the projected night, sweeps, server sessions,
    thinking share. Computed from the report's frames, not metric tables."""
    import importlib

    importlib.import_module("dualpath.evals.report_tables")      # the declarations
    return {k: TABLES[k] for k in REPORT_TABLES}


def listings() -> dict[str, Table]:
    """The run listings (`evals.listings`, which registers them on import): runs, left_out,
    evidence, hosts. Not the metric tables: `dualpath runs` imports no statistics."""
    from dualpath.evals.listings import LISTINGS

    return {k: TABLES[k] for k in LISTINGS}


def every_table() -> dict[str, Table]:
    """Every registered table: the metric tables, the report's own, then the run listings.
    The weekly report and its Markdown (the Prefect artifact) show each one."""
    return {**registered(), **report_tables(), **listings()}
