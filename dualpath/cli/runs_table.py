"""`dualpath runs` on the terminal without --wide: short columns that fit 100 columns, the
night always whole, a disturbed run's reason in a few words (`--wide` has it in full).

At 120 columns the registered table read '2027-0…' in its night column, so nights could not
be told apart, and at 100 the demo's listing ran to 1,033 lines (each starved reason wrapped
a word a line)."""

from __future__ import annotations


import pandas as pd
from rich.table import Table

from dualpath.cli._common import console
from dualpath.evals.format import cell, short_reason
from dualpath.evals.wrap import hang

# header, source column, kind; the seconds keep their basis in the footnote
COLUMNS = [("night", "night", None), ("path", "path", None), ("status", "status", None),
           ("units", "units_planned", "int"), ("graded", "graded", "int"),
           ("unparsed", "parse_failed", "int"), ("failed", "failed", "int"),
           ("runaway", "runaway", "int"), ("s/ticker", "throughput_s", None),
           ("s/unit", "slot_latency_s", None)]
WHOLE = {"night", "path", "status"}       # never wrapped nor cut
FOOTNOTES = [
    "s/ticker: throughput basis (run wall clock ÷ tickers); s/unit: slot-latency basis "
    "(one ticker-draw's first call to last call); real-scale, complete one-segment runs only",
    "unparsed: measured, but the answer held no readable grade",
    "why: what keeps a run out of the results (not complete) or out of the speed medians "
    "(disturbed), in short; `dualpath runs --wide` gives it in full"]


def print_brief_runs(runs: pd.DataFrame, title: str) -> None:
    t = Table(title=title, box=None, pad_edge=False, padding=(0, 1), header_style="bold",
              title_justify="left")
    for head, col, _ in COLUMNS:
        numeric = col in runs and runs[col].dtype.kind in "iuf"
        t.add_column(head, justify="right" if numeric else "left", no_wrap=col in WHOLE,
                     min_width=10 if col == "night" else None)
    t.add_column("why", overflow="fold", ratio=1)
    for _, r in runs.iterrows():
        t.add_row(*[cell(r[col], kind) for _, col, kind in COLUMNS],
                  short_reason(r.get("disturbed"), r.get("status_detail"), r["status"]))
    console.print(t)
    for note in FOOTNOTES:      # wrapped under their own indent, never at column 0
        for line in hang(note, max(40, console.width - 1), "  ", "    "):
            console.print(line, style="dim", highlight=False, markup=False)
