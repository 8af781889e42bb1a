"""The views across nights: a search of every stored answer, and one ticker's grades night by
night. Like `viewer.data`, one short read-only connection per page, SQL in `warehouse.viewer`.

A run that is not complete is no result: its grades are shown, marked, and left out of every
metric; a complete run left out of speed (resumed, disturbed, starved) keeps its grades and is
marked with why (`viewer.data.with_speed`, the overview's words).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from dualpath.config import Config
from dualpath.viewer import pages
from dualpath.viewer.data import path_order, with_speed, question
from dualpath.warehouse import viewer as wv

SEARCH_LIMIT = 50       # matches shown (the page says when there are more)
SNIPPET = 90            # characters of context each side of the match


@dataclass
class Match:
    night: date
    path: str
    ticker: str
    draw: int
    attempt: int
    agent: str
    call_seq: int
    runaway: bool
    before: str
    match: str
    after: str


@dataclass
class SearchView:
    q: str
    path: str | None
    paths: list[str]
    matches: list[Match]
    more: bool                    # more than SEARCH_LIMIT matched
    note: str = ""
    without_index: str = ""       # why every answer was read (the index could not answer)


def snippet(text: str, q: str, width: int = SNIPPET) -> tuple[str, str, str]:
    """(before, the match as written, after) around the first match of `q` (any case)."""
    i = text.lower().find(q.lower())
    if i < 0:                      # ILIKE and str.lower disagree on a rare character
        return "", "", text[:2 * width]
    lo, hi = max(0, i - width), min(len(text), i + len(q) + width)
    return (("…" if lo else "") + text[lo:i], text[i:i + len(q)],
            text[i + len(q):hi] + ("…" if hi < len(text) else ""))


def search(cfg: Config, warehouse: Path, q: str, path: str | None) -> SearchView:
    """The experiment's calls whose answer holds `q`, newest night first."""
    q = q.strip()
    paths = list(cfg.paths)
    path = path if path in paths else None
    if len(q) < 2:
        return SearchView(q, path, paths, [], False,
                          "type at least 2 characters to search every stored answer" if q
                          else "")
    with wv.viewer_connection(warehouse) as con:
        found = wv.search_answers(con, cfg.experiment.name, q, path, SEARCH_LIMIT)
    df = found.rows
    matches = [Match(r.night, r.path, r.ticker, int(r.draw), int(r.unit_attempt), r.agent,
                     int(r.call_seq), r.finish_reason == "length", *snippet(r.answer, q))
               for r in df.head(SEARCH_LIMIT).itertuples()]
    return SearchView(q, path, paths, matches, len(df) > SEARCH_LIMIT,
                      "" if matches else f"no stored answer contains {q!r}",
                      found.without_index or "")


@dataclass
class HistoryNight:
    night: date
    runs: dict[str, dict]         # path -> the run's row (status, left_out, status_detail)
    cells: dict[str, pages.PathCell]
    gap: float | None
    excluded: dict[str, str]      # path -> why its grades count for no metric


@dataclass
class HistoryView:
    ticker: str
    paths: list[str]
    baseline: str | None
    candidate: str | None
    nights: list[HistoryNight]    # newest first


def history(cfg: Config, warehouse: Path, ticker: str) -> HistoryView | None:
    """`ticker`'s grades per path, night by night, with each night's run status; None when
    it was never scored."""
    baseline, candidate, _ = question(cfg)
    with wv.viewer_connection(warehouse) as con:
        runs = with_speed(wv.nights(con, cfg.experiment.name))
        units = wv.night_units(con, list(runs["run_id"]), ticker) if len(runs) else []
    if not len(units):
        return None
    paths = path_order(cfg, runs)
    by_run = {r["run_id"]: r for r in runs.to_dict("records")}
    out = []
    for _, u in units.assign(night=[by_run[r]["night"] for r in units["run_id"]]) \
            .sort_values("night", ascending=False).groupby("night", sort=False):
        cells = {p: pages.path_cell(g) for p, g in u.groupby("path")}
        night_runs = {by_run[r]["path"]: by_run[r] for r in u["run_id"].unique()}
        b, c = cells.get(baseline), cells.get(candidate)
        gap = c.mean - b.mean if b and c and b.mean is not None and c.mean is not None else None
        excluded = {p: f"{r['status']} run: not a result, its grades are in no metric"
                    for p, r in night_runs.items() if r["status"] != "complete"}
        out.append(HistoryNight(u["night"].iloc[0], night_runs, cells, gap, excluded))
    return HistoryView(ticker, paths, baseline, candidate, out)
