"""What each page shows, shaped from the warehouse's frames (pure: no connection here).

A night's table pairs the paths ticker by ticker: each path's mean grade over its graded
draws (a failed draw has no grade and is counted apart), the draws' grades, and the gap
`candidate − baseline` between the mean grades. Two paths *disagree* on a ticker when their
mean grades are a whole grade or more apart (`DISAGREE_AT`); a path's draws *agree* when they
all gave the same grade.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import orjson
import pandas as pd

DISAGREE_AT = 1.0
SORTS = {"disagree": "disagreements first (largest grade gap first)", "ticker": "ticker",
         "gap": "grade gap, candidate above baseline first",
         "-gap": "grade gap, candidate below baseline first", "fwd": "forward return"}


def _num(v) -> float | None:
    return None if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) \
        else float(v)


@dataclass
class PathCell:
    """One path's draws of one ticker on the night."""

    mean: float | None
    grades: list          # per draw in order: an int, or the outcome of a draw without one
    graded: int
    draws: int
    agree: bool | None    # None: fewer than two graded draws
    marks: list[str] = field(default_factory=list)
    flags: dict[str, int] = field(default_factory=dict)   # FLAGS key -> calls (draws) so marked


# the night page's call filters: what each keeps, and the count a cell has of it
FLAGS = {"runaway": ("runaway", "a call stopped at max_tokens (finish_reason = length)"),
         "parse_failed": ("parse-failed", "a draw answered without a readable grade"),
         "contaminated": ("contaminated", "a call answered by another server"),
         "retried": ("retried", "a call sent again after a failed attempt")}


def path_cell(u: pd.DataFrame) -> PathCell:
    """`u`: one path's final unit attempts of one ticker (`warehouse.viewer.night_units`)."""
    u = u.sort_values("draw")
    g = [int(x) for x in u["grade"].dropna()]
    flags = {"runaway": int(u["runaway"].sum()),
             "parse_failed": int((u["outcome"] == "parse_failed").sum()),
             "contaminated": int(u["contaminated"].sum()),
             "retried": int(u["retried"].sum()) if "retried" in u else 0}
    marks = ["re-scored"] if u["attempts"].max() > 1 else []
    if flags["contaminated"]:
        marks.append("contaminated")
    marks += [f"{flags[k]} {k}" for k in ("runaway", "retried") if flags[k]]
    return PathCell(mean=sum(g) / len(g) if g else None,
                    grades=[int(r.grade) if _num(r.grade) is not None else r.outcome
                            for r in u.itertuples()],
                    graded=len(g), draws=len(u), agree=len(set(g)) == 1 if len(g) > 1 else None,
                    marks=marks, flags={k: v for k, v in flags.items() if v})


@dataclass
class TickerRow:
    ticker: str
    cells: dict[str, PathCell]
    gap: float | None
    disagree: bool
    fwd: float | None
    fwd_status: str       # ok | pending | missing | not priced


def night_rows(units: pd.DataFrame, paths: list[str], baseline: str | None,
               candidate: str | None, fwd: dict[str, tuple[float | None, str]]) -> list[TickerRow]:
    """One row per ticker scored on the night by any path; `fwd`: ticker -> (forward return,
    status) at the page's horizon."""
    rows = []
    for ticker, t in units.groupby("ticker", sort=True):
        cells = {p: path_cell(g) for p, g in t.groupby("path")}
        b, c = cells.get(baseline), cells.get(candidate)
        gap = c.mean - b.mean if b and c and b.mean is not None and c.mean is not None else None
        value, status = fwd.get(ticker, (None, "not priced"))
        rows.append(TickerRow(ticker, {p: cells[p] for p in paths if p in cells}, gap,
                              gap is not None and abs(gap) >= DISAGREE_AT, value, status))
    return rows


def filter_rows(rows: list[TickerRow], q: str = "", only_disagree: bool = False,
                min_gap: float | None = None, flag: str | None = None) -> list[TickerRow]:
    """Tickers containing `q` (any case), only disagreements, |gap| of at least `min_gap`,
    only those with a call (a draw) `flag` marks on any path (a key of `FLAGS`)."""
    q = q.strip().upper()
    return [r for r in rows if q in r.ticker.upper() and (r.disagree or not only_disagree)
            and (min_gap is None or (r.gap is not None and abs(r.gap) >= min_gap))
            and (flag is None or any(c.flags.get(flag) for c in r.cells.values()))]


def flag_counts(rows: list[TickerRow]) -> dict[str, int]:
    """FLAGS key -> tickers of the night with at least one call (draw) so marked."""
    return {k: sum(any(c.flags.get(k) for c in r.cells.values()) for r in rows)
            for k in FLAGS}


def sort_rows(rows: list[TickerRow], key: str) -> list[TickerRow]:
    """Rows in the order `key` names (see `SORTS`); tickers without a value go last."""
    last = float("inf")
    order = {
        "ticker": lambda r: (r.ticker,),
        "gap": lambda r: (-(r.gap if r.gap is not None else -last), r.ticker),
        "-gap": lambda r: ((r.gap if r.gap is not None else last), r.ticker),
        "fwd": lambda r: (-(r.fwd if r.fwd is not None else -last), r.ticker),
    }.get(key, lambda r: (not r.disagree, -(abs(r.gap) if r.gap is not None else -1),
                          r.ticker))
    return sorted(rows, key=order)


def disagreements(means: pd.DataFrame, baseline: str | None,
                  candidate: str | None) -> dict:
    """night -> tickers whose two paths' mean grades are `DISAGREE_AT` or more apart (`means`:
    `warehouse.viewer.mean_grades`)."""
    if not len(means) or not baseline or not candidate:
        return {}
    wide = means.pivot_table(index=["night", "ticker"], columns="path", values="mean_grade")
    if baseline not in wide or candidate not in wide:
        return {}
    gap = (wide[candidate] - wide[baseline]).abs()
    return (gap >= DISAGREE_AT).groupby(level="night").sum().astype(int).to_dict()


@dataclass
class CallCell:
    """One call as the ticker page shows it; seconds are real-scale."""

    seq: int
    agent: str
    messages: list[tuple[str, str]]    # (role, content); the raw text when it is not JSON
    prompt_missing: bool
    answer: str | None
    thinking: str | None
    thinking_tokens: str | None        # "312 tokens (counted by the server)"
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    client_s: float | None             # client: request start to last byte
    service_s: float | None            # server's own timings: prefill + decode
    ttft_s: float | None
    marks: list[tuple[str, str]]       # (mark, why)


def messages(prompt: str | None) -> list[tuple[str, str]]:
    """A prompt's messages as (role, content); a prompt that is not a JSON message list is
    shown whole, as one part."""
    if prompt is None:
        return []
    try:
        msgs = orjson.loads(prompt)
        return [(str(m.get("role", "?")), str(m.get("content", ""))) for m in msgs]
    except (orjson.JSONDecodeError, AttributeError, TypeError):
        return [("prompt", prompt)]


def _int(v) -> int | None:
    return None if _num(v) is None else int(v)


_BASIS = {"server": " (counted by the server)", "chars": " (estimated from its characters)"}


def call_marks(c) -> list[tuple[str, str]]:
    """Runaway, contaminated, retried and failed, each with why."""
    marks = []
    if c.finish_reason == "length":
        marks.append(("runaway", "stopped at max_tokens (finish_reason = length)"))
    if isinstance(c.contaminated, str) and c.contaminated:
        marks.append(("contaminated", c.contaminated))
    if (_int(c.attempts) or 1) > 1:
        marks.append((f"retried ×{int(c.attempts) - 1}", str(c.attempt_errors or "")))
    if isinstance(c.error_kind, str) and c.error_kind:
        marks.append(("failed", f"{c.error_kind}: {c.error_detail or ''}"))
    return marks


def call_cell(c, prompts: dict, texts: dict, time_scale: float) -> CallCell:
    """`c`: one row of `warehouse.viewer.ticker_calls`."""
    prompt = prompts.get(_int(c.prompt_hash))
    thinking = texts.get(_int(getattr(c, "reasoning_hash", None)))
    n = _int(getattr(c, "reasoning_tokens", None))
    basis = getattr(c, "reasoning_tokens_basis", None)
    service = (_num(c.prompt_ms) or 0) + (_num(c.predicted_ms) or 0)
    scale = time_scale or 1.0
    return CallCell(
        seq=int(c.call_seq), agent=str(c.agent), messages=messages(prompt),
        prompt_missing=prompt is None and _int(c.prompt_hash) is not None,
        answer=texts.get(_int(c.output_hash)),
        thinking=thinking or None,
        thinking_tokens=None if n is None else f"{n:,} tokens" + _BASIS.get(basis, ""),
        prompt_tokens=_int(c.prompt_tokens), completion_tokens=_int(c.completion_tokens),
        cached_tokens=_int(c.cached_tokens),
        client_s=None if _num(c.latency_s) is None else c.latency_s / scale,
        service_s=service / 1000 if _num(c.prompt_ms) is not None else None,
        ttft_s=None if _num(c.ttft_s) is None else c.ttft_s / scale, marks=call_marks(c))


def records(frame: pd.DataFrame) -> list[SimpleNamespace]:
    """A frame's rows as objects with attributes (pandas' per-row indexing costs ~1 ms a
    row on a busy core; a page has ~100 rows)."""
    return [SimpleNamespace(**r) for r in frame.to_dict("records")]


def call_rows(calls: list, paths: list[str], attempts: dict[str, int], prompts: dict,
              texts: dict, scales: dict[str, float]) -> list[dict[str, CallCell | None]]:
    """The draw's calls side by side, row i holding each path's i-th call of the unit's final
    attempt (`attempts`: path -> that attempt) in pipeline (call_seq) order; `calls`:
    `records` of `warehouse.viewer.ticker_calls`."""
    cols = {p: [call_cell(c, prompts, texts, scales.get(p, 1.0)) for c in
                sorted((c for c in calls if c.path == p and c.unit_attempt == attempts.get(p)),
                       key=lambda c: c.call_seq)] for p in paths}
    n = max((len(v) for v in cols.values()), default=0)
    return [{p: (cols[p][i] if i < len(cols[p]) else None) for p in paths} for i in range(n)]


def earlier_attempts(calls: list, path: str, final: int | None, texts: dict,
                     scale: float) -> list[tuple[int, list[CallCell]]]:
    """The calls of the draw's earlier attempts on `path` (a unit scored again after, e.g.,
    a failed call), each attempt's in call_seq order; prompts are not read for them."""
    by_attempt: dict[int, list] = {}
    for c in calls:
        if c.path == path and c.unit_attempt != final:
            by_attempt.setdefault(int(c.unit_attempt), []).append(c)
    return [(a, [call_cell(c, {}, texts, scale) for c in sorted(cs, key=lambda c: c.call_seq)])
            for a, cs in sorted(by_attempt.items())]


@dataclass
class DrawRow:
    draw: int
    grade: int | None
    outcome: str
    seconds: float | None        # slot-latency basis: first call start to last call end
    calls: int | None
    final_answer: str | None
    earlier: list[str]           # earlier attempts: "attempt 1: call_failed (detail)"


def draw_rows(units: list, texts: dict, scale: float) -> list[DrawRow]:
    """`units`: `records` of one path's attempts of the ticker (`warehouse.viewer.ticker_units`)."""
    out = []
    for draw in sorted({u.draw for u in units}):
        mine = [u for u in units if u.draw == draw]
        final = next(u for u in mine if u.is_final)
        earlier = [f"attempt {int(u.unit_attempt)}: {u.outcome}"
                   + (f" ({u.failure_detail})" if isinstance(u.failure_detail, str) else "")
                   for u in sorted(mine, key=lambda u: u.unit_attempt) if not u.is_final]
        out.append(DrawRow(int(draw), _int(final.grade), str(final.outcome),
                           None if _num(final.seconds) is None else final.seconds / scale,
                           _int(final.n_calls), texts.get(_int(final.final_hash)), earlier))
    return out
