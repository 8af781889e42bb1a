"""Each page's data: one short read-only connection, the page's own queries, then the shaping
in `viewer.pages`. Nothing here speaks SQL (that is `warehouse.viewer`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pandas as pd

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.evals.returns import forward_returns
from dualpath.evals.speed import seconds
from dualpath.viewer import pages
from dualpath.warehouse import viewer as wv


def question(cfg: Config) -> tuple[str | None, str | None, int]:
    """(baseline, candidate, primary horizon), as the metrics ask it from the config."""
    from dualpath.flows.metrics import question as q

    qq = q(cfg)
    return qq.baseline, qq.candidate, qq.primary_horizon


@dataclass
class NightSummary:
    night: date
    runs: dict[str, dict]         # path -> the run's row (status, counts, throughput_s)
    disagreements: int | None     # tickers the two paths grade a whole grade or more apart


def overview(cfg: Config, warehouse: Path) -> tuple[list[NightSummary], tuple]:
    """The nights, newest first, and a key that changes when any run or plan does."""
    baseline, candidate, _ = question(cfg)
    with wv.viewer_connection(warehouse) as con:
        runs = with_speed(wv.nights(con, cfg.experiment.name))
        means = wv.mean_grades(con, cfg.experiment.name)
        key = wv.state_key(con, cfg.experiment.name)
    apart = pages.disagreements(means, baseline, candidate)
    out = []
    for n, g in runs.groupby("night", sort=False):
        by_path = {r["path"]: r for r in g.to_dict("records")}
        # counted only where both paths' runs are complete: a partial run is no result
        both = all(by_path.get(p, {}).get("status") == "complete" for p in (baseline, candidate))
        out.append(NightSummary(n, by_path, apart.get(n) if both else None))
    return out, key


@dataclass
class NightView:
    night: date
    paths: list[str]
    runs: dict[str, dict]
    baseline: str | None
    candidate: str | None
    horizon: int
    rows: list[pages.TickerRow]
    total: int                    # tickers before filtering
    disagreements: int
    sort: str
    q: str
    only_disagree: bool
    min_gap: float | None
    fwd_note: str = ""
    flag: str | None = None
    flags: dict | None = None     # pages.FLAGS key -> tickers with such a call on the night
    plots: dict | None = None     # path -> NightPlot


@dataclass
class NightPlot:
    """A run's occupancy and power over the night (`viewer.plots`): the figure, and the line
    saying why there is no power beside it (or no figure at all)."""

    uri: str | None
    power_note: str | None
    occupancy_note: str | None = None
    energy_note: str | None = None      # beside a drawn power plot: joules and basis


def _plots(con, runs: pd.DataFrame) -> dict[str, NightPlot]:
    from dualpath.viewer import plots

    ids = list(runs["run_id"])
    spans = wv.call_spans(con, ids)
    segs, samples = wv.night_energy(con, ids)
    out = {}
    for r in runs.itertuples():
        sp = spans[spans["run_id"] == r.run_id]
        sg = segs[segs["run_id"] == r.run_id] if len(segs) else pd.DataFrame(
            columns=["segment", "started_wall", "unknown", "joules", "seconds", "idle_w"])
        sm = samples[samples["run_id"] == r.run_id] if len(samples) else pd.DataFrame()
        t0 = plots.origin(sp, sg)
        scale = float(r.time_scale) if r.time_scale == r.time_scale and r.time_scale else 1.0
        slots = int(r.slots) if r.slots == r.slots and r.slots else None
        occ, server = plots.occupancy(sp, slots, scale, t0) if t0 is not None else (None, None)
        watts = plots.power(sm, sg, scale, t0) if t0 is not None else None
        idle = sg["idle_w"].dropna() if len(sg) else []
        note = plots.power_note(sg, sm, r.status == "running") if watts is None else None
        out[r.path] = NightPlot(
            plots.figure(r.path, occ, watts, float(idle.iloc[0]) if len(idle) else None,
                         server),
            note, None if occ is not None else
            "slot occupancy unknown (" + ("no calls recorded" if not len(sp)
                                          else "the run records no slot count") + ")",
            plots.energy_note(sg) if watts is not None else None)
    return out


def _forward(cfg: Config, con, night: date, horizon: int) -> tuple[dict, str]:
    """ticker -> (h-session forward return, status) for the night, from the prices of the
    sessions it spans only."""
    from dualpath.calendar import MarketCalendar

    try:
        cal = MarketCalendar.from_settings(cfg.market)
        start = cal.session_on_or_before(night)
        try:
            end = cal.sessions_after(start, horizon)[-1]
        except UserError:           # the calendar ends first: nothing has matured
            return {}, f"{horizon}-session forward return pending (the calendar ends first)"
        sessions = cal.sessions(start, end)
    except UserError as e:
        return {}, f"forward returns not known ({e})"
    prices = wv.prices_between(con, start, end)
    if not len(prices):
        return {}, "no prices for this night"
    fr = forward_returns(prices, [pd.Timestamp(night)], [horizon], sessions)
    return ({r.ticker: (None if r.status != "ok" else float(r.fwd_return), r.status)
             for r in fr.itertuples()}, "")


def night(cfg: Config, warehouse: Path, night: date, sort: str, q: str, only_disagree: bool,
          min_gap: float | None, flag: str | None = None) -> NightView | None:
    """Every ticker of the night on every path (only those with a call `flag` marks, if
    given: a `pages.FLAGS` key), and each run's plots; None when the night has no runs."""
    baseline, candidate, horizon = question(cfg)
    with wv.viewer_connection(warehouse) as con:
        runs = with_speed(wv.night_runs(con, cfg.experiment.name, night))
        if not len(runs):
            return None
        units = wv.night_units(con, list(runs["run_id"]))
        fwd, note = _forward(cfg, con, night, horizon)
        plots = _plots(con, runs)
    paths = path_order(cfg, runs)
    rows = pages.night_rows(units, paths, baseline, candidate, fwd)
    shown = pages.sort_rows(pages.filter_rows(rows, q, only_disagree, min_gap, flag), sort)
    return NightView(night, paths, {r["path"]: r for r in runs.to_dict("records")}, baseline,
                     candidate, horizon, shown, len(rows), sum(r.disagree for r in rows), sort,
                     q, only_disagree, min_gap, note, flag, pages.flag_counts(rows), plots)


def path_order(cfg: Config, runs: pd.DataFrame) -> list[str]:
    """The runs' paths, in the config's order (paths it no longer has last)."""
    have = set(runs["path"])
    return [p for p in cfg.paths if p in have] + sorted(have - set(cfg.paths))


@dataclass
class PathSide:
    path: str
    run: dict
    draws: list[pages.DrawRow]
    attempt: int | None           # the shown draw's final attempt
    earlier: list = ()            # (attempt, [pages.CallCell]) of the shown draw's earlier ones

    @property
    def grades(self) -> list[int]:
        return [d.grade for d in self.draws if d.grade is not None]

    @property
    def mean(self) -> float | None:
        return sum(self.grades) / len(self.grades) if self.grades else None


@dataclass
class TickerView:
    night: date
    ticker: str
    draw: int
    draws: list[int]
    sides: list[PathSide]
    calls: list[dict]             # row i: path -> pages.CallCell | None
    thinking: bool                # the warehouse keeps thinking apart
    prev_ticker: str | None = None
    next_ticker: str | None = None
    baseline: str | None = None
    candidate: str | None = None
    diff: object = None           # viewer.diff.WordDiff of the shown draw's final answers
    diff_note: str = ""           # why there is none

    @property
    def gap(self) -> float | None:
        """candidate − baseline mean grade, as the night's table shows it."""
        means = {s.path: s.mean for s in self.sides}
        b, c = means.get(self.baseline), means.get(self.candidate)
        return c - b if b is not None and c is not None else None


def ticker(cfg: Config, warehouse: Path, night: date, ticker: str,
           draw: int | None) -> TickerView | None:
    """Both paths' draws of one ticker, then one draw's calls side by side; None when the
    ticker was not scored that night."""
    with wv.viewer_connection(warehouse) as con:
        runs = with_speed(wv.night_runs(con, cfg.experiment.name, night))
        ids = list(runs["run_id"])
        units = wv.ticker_units(con, ids, ticker) if ids else pd.DataFrame()
        if not len(units):
            return None
        draws = sorted(int(d) for d in units["draw"].unique())
        draw = draw if draw in draws else draws[0]
        calls = wv.ticker_calls(con, ids, ticker, draw)
        thinking = "reasoning_hash" in calls
        hashes = list(calls["output_hash"]) + list(units["final_hash"])
        if thinking:
            hashes += list(calls["reasoning_hash"])
        texts = wv.texts(con, hashes)
        final = units[units["is_final"] & (units["draw"] == draw)]
        attempts = dict(zip(final["path"], final["unit_attempt"].astype(int)))
        # a mask, also for a unit with no calls (an unpriced ticker: `calls[[]]` would select
        # no columns, and the page answered 500)
        shown = calls[pd.Series([attempts.get(p) == a for p, a in
                                 zip(calls["path"], calls["unit_attempt"])], index=calls.index,
                                dtype=bool)]
        prompts = wv.prompts(con, shown["prompt_hash"], texts)
        neighbours = wv.night_tickers(con, ids)
    by_path = {r["path"]: r for r in runs.to_dict("records")}
    paths = [p for p in cfg.paths if p in by_path] + sorted(set(by_path) - set(cfg.paths))
    scales = {p: float(by_path[p]["time_scale"] or 1.0) for p in paths}
    unit_rows, call_recs = pages.records(units), pages.records(calls)
    sides = [PathSide(p, by_path[p], pages.draw_rows([u for u in unit_rows if u.path == p],
                                                     texts, scales[p]),
                      attempts.get(p), pages.earlier_attempts(call_recs, p, attempts.get(p),
                                                              texts, scales[p]))
             for p in paths]
    rows = pages.call_rows(call_recs, paths, attempts, prompts, texts, scales)
    i = neighbours.index(ticker) if ticker in neighbours else -1
    baseline, candidate, _ = question(cfg)
    diff, why = final_diff(sides, draw, baseline, candidate)
    return TickerView(night, ticker, draw, draws, sides, rows, thinking,
                      neighbours[i - 1] if i > 0 else None,
                      neighbours[i + 1] if 0 <= i < len(neighbours) - 1 else None,
                      baseline, candidate, diff, why)


def final_diff(sides: list[PathSide], draw: int, baseline: str | None,
               candidate: str | None):
    """(word diff of the draw's final answers, baseline → candidate, or None; why none)."""
    from dualpath.viewer.diff import word_diff

    answers = {s.path: next((d.final_answer for d in s.draws if d.draw == draw), None)
               for s in sides}
    if baseline not in answers or candidate not in answers:
        return None, (f"draw {draw} was not scored on both {baseline} and {candidate}")
    missing = [p for p in (baseline, candidate) if answers[p] is None]
    if missing:
        return None, f"no final answer stored for draw {draw} on {' and '.join(missing)}"
    return word_diff(answers[baseline], answers[candidate]), ""


def with_speed(runs: pd.DataFrame) -> pd.DataFrame:
    """Throughput-basis real-scale seconds per ticker (evals.speed.seconds, the one
    definition), only for complete one-segment undisturbed runs: a resumed run's clock spans
    its gap, a disturbed one's measures something else (`left_out` says what, in short)."""
    from dualpath.evals.format import short_reason

    disturbed = runs["disturbed"] if "disturbed" in runs else pd.Series(None, index=runs.index)
    ok = (runs["status"] == "complete") & (runs["segments"] == 1) & disturbed.isna()
    left = [("resumed" if seg > 1 else short_reason(d, None, st)) if st == "complete" else ""
            for st, seg, d in zip(runs["status"], runs["segments"], disturbed)]
    return runs.assign(throughput_s=seconds(runs).where(ok), left_out=left)
