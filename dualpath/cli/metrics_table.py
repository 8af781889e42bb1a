"""`dualpath metrics` (brief or --wide) and `dualpath prereg draft` on the terminal: each
table laid out for the console's width, nothing cut.

rich's boxed tables cut what did not fit: at 100 columns the comparison read 'horiz…',
'explo…' and 'non-i…', the speed table's headers 'throughp…' three times over (three
different columns), and footnotes wrapped back to column 0. Here a column is as wide as its
widest cell and header when that fits; otherwise every column keeps at least its longest word
(a header breaks after an underscore, a cell between words), the room left goes first to the
columns it makes whole, and a text column that still cannot fit goes beneath its row
(`  note: …`). A date, a number or a word is never cut.
"""

from __future__ import annotations

import re
import textwrap

import pandas as pd
from rich.cells import cell_len

from dualpath.cli._common import console
from dualpath.evals.wrap import hang

GAP = 2                       # spaces between columns
MAX_LINES = 3                 # a text cell taller than this reads better beneath its row


def _pieces(header: str) -> list[str]:
    """A header's unbreakable parts: it may break after an underscore or a space."""
    return [p for p in re.split(r"(?<=_)|(?<= )", header) if p]


def _wrap_header(header: str, width: int) -> list[str]:
    lines = [""]
    for p in _pieces(header):
        if lines[-1] and cell_len(lines[-1] + p) > width:
            lines.append("")
        lines[-1] += p
    return [ln.rstrip() for ln in lines]


def _wrap_cell(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]


def _natural_least(headers: list[str], cells: list[list[str]]) -> tuple[list[int], list[int]]:
    cols = list(zip(*cells)) if cells else [()] * len(headers)
    natural = [max([cell_len(h), *map(cell_len, c)]) for h, c in zip(headers, cols)]
    least = [max([max(map(cell_len, _pieces(h))),
                  *[cell_len(w) for v in c for w in (v.split() or [""])]])
             for h, c in zip(headers, cols)]
    return natural, least


def widths(natural: list[int], least: list[int], total: int) -> list[int]:
    """Each column's width: natural (widest cell or header) when all fit in ``total``; else
    at least its longest unbreakable part, the room left given whole to the columns that
    lack least (fewest wrapped), the rest to the last that lacks more."""
    room = total - GAP * (len(natural) - 1)
    if sum(natural) <= room:
        return list(natural)
    out, spare = list(least), room - sum(least)
    for i in sorted(range(len(out)), key=lambda i: natural[i] - least[i]):
        give = min(max(spare, 0), natural[i] - least[i])
        out[i] += give
        spare -= give
    return out


def split(frame: pd.DataFrame, cells: list[list[str]], total: int) -> list[int]:
    """The text columns that go on lines of their own beneath each row (widest first) so
    that the others fit ``total`` with no word cut: none when all fit."""
    headers = [str(c) for c in frame.columns]
    natural, least = _natural_least(headers, cells)
    text = [i for i, c in enumerate(frame.columns) if frame[c].dtype.kind not in "iuf"][1:]
    out: list[int] = []
    keep = lambda: [i for i in range(len(headers)) if i not in out]
    while sum(least[i] for i in keep()) + GAP * (len(keep()) - 1) > total and \
            len(out) < len(text):
        out.append(max((i for i in text if i not in out), key=lambda i: natural[i]))
    while tall := _too_tall(cells, keep(), natural, least, text, total):
        out.append(tall)
    return out


def _too_tall(cells, keep, natural, least, text, total) -> int | None:
    """The widest text column that, at the widths the kept columns get, wraps a cell over
    MAX_LINES lines (at 120 columns the draws table's interval text stood 8 lines a row)."""
    w = dict(zip(keep, widths([natural[i] for i in keep], [least[i] for i in keep], total)))
    tall = [i for i in keep if i in text and cells and
            max(len(_wrap_cell(row[i], w[i])) for row in cells) > MAX_LINES]
    return max(tall, key=lambda i: natural[i]) if tall else None


def layout(frame: pd.DataFrame, cells: list[list[str]], total: int) -> list[str]:
    """The table's lines: headers (wrapped at underscores), a rule, then each row, numbers
    right-aligned, any column that cannot fit as `  name: text` beneath its row."""
    below = split(frame, cells, total)
    cols = [i for i in range(len(frame.columns)) if i not in below]
    headers = [str(frame.columns[i]) for i in cols]
    kept = [[row[i] for i in cols] for row in cells]
    w = widths(*_natural_least(headers, kept), total)
    right = [frame[frame.columns[i]].dtype.kind in "iuf" for i in cols]
    lines = _block([_wrap_header(h, x) for h, x in zip(headers, w)], w, right)
    lines.append((" " * GAP).join("─" * x for x in w))
    for row, short in zip(cells, kept):
        lines += _block([_wrap_cell(v, x) for v, x in zip(short, w)], w, right)
        for i in below:
            if row[i]:
                lines += hang(f"{frame.columns[i]}: {row[i]}", total, "  ", "    ")
    return lines


def _block(parts: list[list[str]], w: list[int], right: list[bool]) -> list[str]:
    height = max(map(len, parts))
    out = []
    for k in range(height):
        texts = [p[k] if k < len(p) else "" for p in parts]
        out.append((" " * GAP).join(
            " " * (x - cell_len(t)) + t if r else t + " " * (x - cell_len(t))
            for t, x, r in zip(texts, w, right)).rstrip())
    return out


def records(frame: pd.DataFrame, cells: list[list[str]], total: int) -> list[str]:
    """Each row as a record, one `column  value` line per column (values wrapped under
    their own indent): for a table whose numbers alone are wider than the console (every
    column of the comparison is 37 of them)."""
    headers = [str(c) for c in frame.columns]
    name = min(max(map(cell_len, headers)), total // 3)
    lines: list[str] = []
    for k, row in enumerate(cells, 1):
        lines.append(f"── row {k} of {len(cells)} " + "─" * max(0, min(total, 60) - 14))
        for h, v in zip(headers, row):
            lines += hang(v or "—", total, h.ljust(name) + "  ", " " * (name + 2))
    return lines


def print_fitted(spec, frame: pd.DataFrame, title: str | None = None,
                 wide: bool = False, missing: list[str] | tuple = ()) -> None:
    """A registered table's brief columns (every column with ``wide``) at the console's
    width, its title and footnotes wrapped under their own indent; with ``wide``, a table
    whose numbers cannot fit side by side prints as records. ``missing``: a line for each
    row the table has not (a path without a run to give it figures), beneath its rows."""
    shown = spec.select(frame, wide=wide, drop_empty=True) if len(frame) else frame
    print_plain(shown, spec.rows(shown), title or spec.title,
                spec.footnotes(shown) if len(frame) else [], as_records=wide,
                missing=missing)


def print_plain(frame: pd.DataFrame, cells: list[list[str]], title: str | None = None,
                notes: list[str] | tuple = (), as_records: bool = False,
                missing: list[str] | tuple = ()) -> None:
    """A table in the plain style at the console's width (`layout`): its title, the table,
    each line of ``missing`` (no table when it has no rows), then each note under its own
    indent. ``as_records``: rows as records (`records`) where the table would be wider than
    the console."""
    width = max(40, console.width)
    lines = layout(frame, cells, width) if len(frame) or not missing else []
    if as_records and max(map(cell_len, lines), default=0) > width:
        lines = records(frame, cells, width)
    lines += [ln for m in missing for ln in hang(m, width)]
    say = lambda s, **kw: console.print(s, markup=False, highlight=False, soft_wrap=True, **kw)
    for line in hang(title or "", width):
        say(line, style="bold")
    for line in lines:
        say(line)
    for note in notes:
        for line in hang(note, width, "  ", "    "):
            say(line, style="dim")
