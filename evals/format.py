"""The one cell formatter: every table dualpath prints (terminal, report, artifact) goes
through `cell`, so a number reads the same everywhere.

Numbers are for people: a whole number prints whole (`160`, `185,400`), a small p-value in
scientific notation (not `0.000`), other values to three decimals below 10, one decimal
(dropped when it is 0) up to 1,000 and none above, with thousands separators.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd


def cell(v, kind: str | None = None) -> str:
    """One value as text. ``kind``: 'int' (a count), 'share' (0-1, as is), 'x' (a ratio,
    '5.8×'), 'h' (hours to three significant figures: '26.7 h', '3.66 h'), or None (judged
    from the value)."""
    if v is None or v is pd.NA or v is pd.NaT or (isinstance(v, (float, np.floating))
                                                   and math.isnan(v)):
        return "—"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, pd.Timestamp):
        return v.date().isoformat() if v == v.normalize() else v.isoformat()
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    if isinstance(v, (float, np.floating)):
        return _number(float(v), kind)
    return str(v)


def _number(v: float, kind: str | None) -> str:
    if kind == "h":                # three significant figures, so paths side by side agree
        r = abs(float(f"{v:.3g}"))                      # 9.996 rounds to 10.0, not 10.00
        digits = 0 if r == 0 or r >= 100 else 2 - math.floor(math.log10(r))
        return f"{v:,.{digits}f} h"
    if kind == "int" or abs(v) >= 1000:
        return f"{v:,.0f}"
    if kind == "x":
        return f"{v:,.1f}×"
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.2e}"          # a small p-value is not 0.000
    if abs(v) < 10:
        return f"{v:,.3f}"
    text = f"{v:,.1f}"
    return text[:-2] if text.endswith(".0") else text      # 160, not 160.0


def short_reason(disturbed: object, detail: object, status: str) -> str:
    """A few words: 'starved, busy 32%', 'stalled 40 s', 'restarted', 'shared'; for a run that
    is not complete, its own detail."""
    if status != "complete":
        return "" if not isinstance(detail, str) else detail
    if not isinstance(disturbed, str) or not disturbed:
        return ""
    words = []
    for part in disturbed.split("; "):
        kind = part.split(":", 1)[0]
        if kind == "starved" and (m := re.search(r"slots busy (\d+)%", part)):
            words.append(f"starved, busy {m.group(1)}%")
        elif kind == "stalled" and (m := re.search(r"for (\d+) s", part)):
            words.append(f"stalled {m.group(1)} s")
        elif kind not in words:
            words.append(kind)
    return "; ".join(dict.fromkeys(words))


def draws_words(draws: int | dict, order: tuple = ()) -> str:
    """'2 draws', or each path's where they differ ('2 draws on backup, 3 on main'), the
    paths in `order` first; `draws`: one count for every path, or path -> its count."""
    if not isinstance(draws, dict):
        return f"{draws} draws"
    names = [p for p in order if p in draws] + [p for p in draws if p not in order]
    counts = [(p, draws[p]) for p in names]
    if len({d for _, d in counts}) <= 1:
        return f"{counts[0][1] if counts else '?'} draws"
    (p0, d0), *rest = counts
    return ", ".join([f"{d0} draws on {p0}", *(f"{d} on {p}" for p, d in rest)])
