"""The headline: both questions answered in a few lines, the same words everywhere.

*Is the cheaper path as good?* — the preregistered primary verdict with its margin, interval
and power, or what is missing before it can decide. *How much slower is it?* — the ratio of
the candidate's seconds per ticker to the baseline's, with an interval, on a named basis, and
the night it implies: at the experiment's own ticker count (what its runs scored) and, where
that differs, projected to the 100-ticker night the study is sized for (`TICKERS`).

`headline(metrics, verdict, ...)` is pure; the CLI (`dualpath metrics`, first), the weekly
report's first screen and its Prefect artifact print `Headline.lines` as they are. Each line
fits 100 columns, so the verdict and the ratio are never cut.

The slowdown is the geometric mean of nightly ratios (candidate ÷ baseline s/ticker, both runs
results on the same night; per unit, each run at its own draws, where the paired runs' draws
differ: `evals.draws`) with an interval on their logs that holds under slow night-to-night
drift (`evals.speed.slowdown_interval`: an EWC HAC variance with a critical value robust to
AR(1) drift up to φ 0.8, `evals.drift`): the paths share each night's
tickers, so the pairing removes what a night's prompts do to both; below 2 paired nights no
interval is given, and with none the slowdown is unknown (never the ratio of two medians
taken on different nights: that mixes what the nights' prompts did into the ratio).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from dualpath.evals import draws as rd
from dualpath.evals import energy
from dualpath.evals.format import cell, draws_words
from dualpath.evals.wrap import Detail, hang, like
from dualpath.evals.headline_icr import (false_reassurance_line, false_reassurance_of,
                                         interchange_lines, interchange_verdict, label_line,
                                         label_parts, noise_rate_of, rankic_word)
from dualpath.evals.speed import LABELS, slowdown_interval

WIDTH = 100
TICKERS = 100       # the nightly study's size: every night both paths score the same 100


@dataclass(frozen=True)
class Slowdown:
    """How much slower the candidate is than the baseline, on one basis."""

    baseline: str
    candidate: str
    basis: str
    basis_text: str
    ratio: float | None             # None: no paired night, so unknown
    lo: float
    hi: float
    level: float
    nights: int
    baseline_s: float
    candidate_s: float
    draws: int | dict               # path -> its draws now (its latest run's; else the config's)
    hours_at: dict = field(default_factory=dict)
    tickers: int = TICKERS          # the night projected to
    own_tickers: int | None = None  # the tickers this experiment's runs scored (None: unrecorded)
    own_hours_at: dict = field(default_factory=dict)
    result_runs: dict = field(default_factory=dict)     # path: its runs whose speed is a result
    per: str = "ticker"             # the ratio's unit: "unit" where paired runs' draws differ
    draws_changed: dict = field(default_factory=dict)   # `evals.draws.changes` of the pair


def slowdown(speed_runs: pd.DataFrame, speed: pd.DataFrame, baseline: str | None,
             candidate: str | None, draws: int | dict, level: float = 0.95,
             tickers: int = TICKERS) -> Slowdown | None:
    """The candidate's s/ticker over the baseline's (throughput basis), or None when a path
    has no run whose speed is a result. With no night on which both paths have a result its
    `ratio` is None (unknown): each path's median is still given, but their quotient would
    compare different nights."""
    if not (baseline and candidate) or not len(speed) or not len(speed_runs):
        return None
    med = speed.set_index("path")["throughput_s_per_ticker"]
    if not all(p in med and pd.notna(med[p]) for p in (baseline, candidate)):
        return None
    ok = speed_runs[speed_runs["is_result"]]
    # a ticker is 3 units on a path that scores 3 draws and 2 on one that scores 2: the ratio
    # then compares the same work, one ticker x one draw, each run at its own draws
    logs, per = rd.paired_logs(ok, baseline, candidate, "throughput_s_per_ticker",
                               "throughput_s_per_unit", draws)
    n = len(logs)
    ratio = float(np.exp(logs.mean())) if n else None
    lo = hi = math.nan
    if n >= 2:
        lo, hi = (float(np.exp(b)) for b in slowdown_interval(logs, level)[:2])
    pair = (candidate, baseline)
    steps, now = rd.changes(speed_runs, pair), rd.now_draws(speed_runs, pair, draws)
    # a night now: a path whose draws changed mid-study is timed per unit at its draws now
    unit = ok.groupby("path")["throughput_s_per_unit"].median() \
        if "throughput_s_per_unit" in ok else pd.Series(dtype=float)
    night_s = {p: float(unit[p]) * now[p] if p in steps else float(med[p]) for p in pair}
    hours = {p: night_s[p] * tickers / 3600 for p in pair}
    own = _own_tickers(ok[ok["path"].isin([baseline, candidate])])
    own_hours = {p: night_s[p] * own / 3600 for p in pair} if own else {}
    counts = ok["path"].value_counts()
    return Slowdown(baseline, candidate, "throughput", LABELS[("throughput", "ticker")],
                    ratio, lo, hi, level, n, float(med[baseline]), float(med[candidate]),
                    now, hours, tickers, own, own_hours,
                    {p: int(counts.get(p, 0)) for p in pair}, per, steps)


def _own_tickers(runs: pd.DataFrame) -> int | None:
    """The tickers the compared paths' result runs scored, on their latest night (a config
    whose universe changed is sized as it is now); None where no run recorded it."""
    if "tickers" not in runs:
        return None
    known = runs[runs["tickers"].notna()]
    if not len(known):
        return None
    last = known[known["night"] == known["night"].max()] if "night" in known else known
    return int(last["tickers"].max())


@dataclass(frozen=True)
class Headline:
    """Both answers: the objects they come from, and the lines every reader prints (what
    the result object, `evals.result.result`, reads too: one source)."""

    verdict: object                 # evals.verdict.PrimaryVerdict (issue 21)
    slowdown: Slowdown | None
    quality: tuple[str, ...]        # the answer to question 1, first line first
    speed: tuple[str, ...]          # the answer to question 2
    energy: tuple[str, ...] = ()    # what a ticker costs (evals.energy)
    energy_cmp: object = None       # evals.energy.EnergyCompare, or None
    interchange: object = None      # evals.interchange.Interchange (the first quality line)
    frr: tuple = (math.nan, math.nan, 0, 0)  # `false_reassurance_of`: rate, IC, nights, m
    planned: bool = False           # interchangeability's limit is the frozen plan's
    sequential: dict | None = None  # its group-sequential verdict (`flows.prereg`)
    noise_rate: float = math.nan    # the interchangeability verdict's noise-backup rate
    heads: dict = field(default_factory=dict)       # question: its first line, unwrapped
    nights_plan: object = None      # evals.icr_plan.NightsPlan: nights to decide, from these
    disturbed: dict = field(default_factory=dict)   # path: disturbed runs left out of speed
    runaway: dict = field(default_factory=dict)     # path: runaway share, where flagged

    @property
    def false_reassurance(self) -> float:
        """The RankIC plan's false-reassurance rate, given main's IC so far."""
        return self.frr[0]

    @property
    def lines(self) -> tuple[str, ...]:
        """Every line, in the order every reader prints them (the report, --verbose)."""
        return self.quality + self.speed + self.energy

    @property
    def brief(self) -> tuple[str, ...]:
        """The lines `dualpath metrics` prints without --verbose: each answer, its interval,
        its caveats, and none of the details (`evals.wrap.Detail`)."""
        return tuple(line for line in self.lines if not isinstance(line, Detail))


def headline(metrics, verdict, draws: int | dict, tickers: int = TICKERS,
             price: float | None = None, currency: str = "") -> Headline:
    """The headline of a `evals.report.Metrics` and its `evals.verdict.PrimaryVerdict`
    (rendered from its fields, never recomputed); `price` per kWh adds money. `draws`: the
    config's, one count or each path's, read only where no run recorded its own (each night
    is divided by the draws it was scored with, `evals.draws`)."""
    if isinstance(draws, dict):
        pair = {p: draws[p] for p in (verdict.candidate, verdict.baseline) if p in draws}
        draws = pair or draws
    s = slowdown(metrics.speed_runs, metrics.speed, verdict.baseline, verdict.candidate,
                 draws, tickers=tickers)
    e = energy.compare(getattr(metrics, "energy_runs", pd.DataFrame()), verdict.baseline,
                       verdict.candidate, draws, tickers, price=price, currency=currency)
    x = getattr(metrics, "interchange", None)
    frr = false_reassurance_of(verdict, metrics.nightly_ic)
    planned = getattr(metrics, "interchange_planned", False)
    seq = getattr(metrics, "interchange_sequential", None)
    said = interchange_verdict(x, verdict.label, planned, seq) if x is not None else ""
    rate = noise_rate_of(x, said, seq if planned else None) if said else math.nan
    nights_plan = getattr(metrics, "interchange_nights", None)
    first = interchange_lines(x, verdict.label, verdict.label_text, planned, seq, nights_plan,
                              rate=rate)
    disturbed, runaway = disturbed_runs(metrics.speed, verdict), runaway_shares(metrics.speed,
                                                                                 verdict)
    return Headline(verdict, s, tuple([part for line in first for part in _fit(line)]
                                      + quality_lines(verdict, frr, label_said=bool(first))),
                    tuple(speed_lines(s, verdict, disturbed, runaway)),
                    energy=tuple(part for line in energy.energy_lines(e, verdict.candidate)
                                 for part in _fit(line)),
                    energy_cmp=e, interchange=x, frr=frr,
                    planned=planned, sequential=seq, noise_rate=rate, disturbed=disturbed,
                    runaway=runaway, nights_plan=nights_plan,
                    heads={"interchangeability": first[0] if first else None,
                           "rankic": rankic_head(verdict, frr[0]) if verdict.candidate
                           else None})


RUNAWAY_FLAG = 0.20     # above it a path's seconds are as much its capped answers as its server


def runaway_shares(speed: pd.DataFrame, v) -> dict[str, float]:
    """Per compared path, its share of calls that stopped at max_tokens where it is above
    `RUNAWAY_FLAG`: runaways make a ticker slow (the tuning logs saw one twice as slow), so
    a slowdown read from them says as much about the answers as about the server."""
    if not len(speed) or "runaway_share" not in speed:
        return {}
    share = speed.set_index("path")["runaway_share"]
    return {p: float(share[p]) for p in (v.candidate, v.baseline)
            if p in share and pd.notna(share[p]) and share[p] > RUNAWAY_FLAG}


def disturbed_runs(speed: pd.DataFrame, v) -> dict[str, int]:
    """Per compared path, the complete runs its speed left out as disturbed (restarted,
    stalled, shared, starved): a slowdown from the others should say they were there."""
    if not len(speed) or "disturbed_excluded" not in speed:
        return {}
    n = speed.set_index("path")["disturbed_excluded"]
    return {p: int(n[p]) for p in (v.candidate, v.baseline) if p in n and n[p] > 0}


def _num(v: float, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return f"{v:+.3f}" if signed else f"{v:.3f}"


def quality_lines(v, frr: tuple | None = None, label_said: bool = False) -> list[str]:
    """Question 1 in RankIC: the primary verdict with its label word, its margin, interval
    and power, or what is missing, and (given ``frr``, `evals.headline_icr.false_reassurance_of`)
    the plan's false-reassurance rate. Why the label is what it is is said once in a headline:
    here unless ``label_said`` (the interchangeability lines said it). An interim look leads
    with "interim — no decision" and shows no verdict word: a user who stops at the first
    interim 'non-inferior' does not have the plan's error rate."""
    if not v.candidate:
        return ["Quality: no second path to compare (one path configured)"]
    rate = frr[0] if frr is not None else math.nan
    lines = [rankic_head(v, rate), *([] if label_said else label_line(v.label_text))]
    if math.isnan(v.estimate):
        value = "not estimated yet"
    elif math.isnan(v.ci_low):
        value = f"{_num(v.estimate, True)}, no interval yet"
    else:
        value = (f"{_num(v.estimate, True)}, {v.ci_level:.0%} CI [{_num(v.ci_low, True)}, "
                 f"{_num(v.ci_high, True)}]")
    lines.append(f"  ΔIC = IC({v.candidate}) − IC({v.baseline}) at h={v.horizon}: {value}; "
                 f"margin δ = {v.margin:.3f}")
    if v.preserve is not None and v.baseline_ic_low is not None:
        lines.append(Detail(f"  δ keeps ≥ {v.preserve:.0%} of {v.baseline}'s IC: (1 − "
                            f"{v.preserve:g}) × its pilot IC's 95% lower bound "
                            f"{v.baseline_ic_low:+.3f}"))
    if not math.isnan(v.ci_low) and v.ci_text:
        lines.append(Detail(f"  ({v.ci_text})"))
    if not math.isnan(v.power):
        lines.append(f"  power {v.power:.2f} {v.power_text}".rstrip())
    # an unknown rate for want of nights says again what 'insufficient nights' says
    if frr is not None and v.test != "difference" and \
            (math.isfinite(rate) or v.verdict != "insufficient nights"):
        lines.append(false_reassurance_line(*frr, v))
    if not v.decided:
        lines.append("  before it can decide: " + (v.note or _why_undecided(v)))
    return [part for x in lines for part in _fit(x)]


def rankic_head(v, rate: float = math.nan) -> str:
    """RankIC's first line, unwrapped: the question, the answer, the label's word."""
    q = f"RankIC — is {v.candidate}'s signal as good as {v.baseline}'s?"
    if v.label == "interim":
        return f"{q}  interim — no decision"
    return f"{q}  {rankic_word(v, rate)}  [{label_parts(v.label_text)[0]}]"


def _why_undecided(v) -> str:
    """Why a test with an interval did not decide, in the terms of its own rule (power is
    printed on its own line: an inconclusive study can be well powered)."""
    if math.isnan(v.ci_low):
        return "more nights (no interval yet)"
    lo, hi, d = _num(v.ci_low, True), _num(v.ci_high, True), v.margin
    if v.test == "non-inferiority":
        worse = f"its upper end {hi} < 0 (worse), " if v.ci_high < 0 else ""
        return (f"{worse}the interval's lower end {lo} < −δ = {-d:+.3f}: a loss of δ is not "
                "ruled out")
    if v.test == "equivalence":
        return f"the interval [{lo}, {hi}] is not inside ±δ = ±{d:.3f}"
    return f"the interval [{lo}, {hi}] contains 0"


def speed_lines(s: Slowdown | None, v, disturbed: dict[str, int] | None = None,
                runaway: dict[str, float] | None = None) -> list[str]:
    """Question 2: the ratio with its interval on a named basis (unknown without a paired
    night), and the night it implies; with the disturbed runs left out, where there were any,
    and beside the seconds a path whose runaway share distorts them (`runaway_shares`)."""
    flags = [f"  runaway: {share:.0%} of {p}'s calls hit max_tokens (over "
             f"{RUNAWAY_FLAG:.0%}): its s/ticker times capped answers too"
             for p, share in (runaway or {}).items()]
    left_out = [f"  left out: {sum(disturbed.values())} disturbed run(s) ("
                + ", ".join(f"{p} {k}" for p, k in disturbed.items())
                + "); `dualpath runs` says why"] if disturbed else []
    if s is None:
        if not v.candidate:
            return []
        first = (f"Speed — how much slower is {v.candidate}?  unknown: no undisturbed "
                 "one-segment run on both paths yet" if disturbed else
                 f"Speed — how much slower is {v.candidate}?  unknown: no complete "
                 "one-segment run on both paths yet")
        return [part for x in [first, *left_out] for part in _fit(x)]
    if s.ratio is None:
        # both paths have results, never on the same night: a ratio of their medians would
        # compare different nights' prompts, so the slowdown is unknown, like the case above
        run = "an undisturbed" if disturbed else "a complete"
        first = [f"Speed — how much slower is {s.candidate}?  unknown: no night with {run} "
                 "one-segment run on both paths",
                 f"  ({s.candidate}'s {s.result_runs[s.candidate]} such run(s) and "
                 f"{s.baseline}'s {s.result_runs[s.baseline]} are on different nights: "
                 "the medians below are not a ratio)"]
    else:
        word = "slower" if s.ratio >= 1 else "faster"
        r = s.ratio if s.ratio >= 1 else 1 / s.ratio
        lo, hi = (s.lo, s.hi) if s.ratio >= 1 else (1 / s.hi, 1 / s.lo)
        ci = (f"{s.level:.0%} CI {lo:.1f}×–{hi:.1f}×, {s.nights} paired nights"
              if s.nights >= 2 else f"no interval: {s.nights} paired night(s)")
        first = [f"Speed — how much slower is {s.candidate}?  {r:.1f}× {word} than "
                 f"{s.baseline} ({ci})"]
        if s.per == "unit" and s.draws_changed:
            first.append("  per unit (run wall clock ÷ ticker-draws), each night at the draws "
                         "it was scored with")
        elif s.per == "unit":
            first.append(f"  per unit (run wall clock ÷ ticker-draws): {s.candidate} scores "
                         f"{s.draws[s.candidate]} draws a ticker, {s.baseline} "
                         f"{s.draws[s.baseline]}")
    changed = rd.change_line(s.draws_changed)
    return [part for x in (
        *first,
        *([changed] if changed else []),
        f"  throughput basis (run wall clock ÷ tickers): {s.candidate} "
        f"{cell(s.candidate_s)} s/ticker, {s.baseline} {cell(s.baseline_s)} s/ticker (medians)",
        *flags,
        *night_lines(s),
        *left_out)
        for part in _fit(x)]


def night_lines(s: Slowdown) -> list[str]:
    """How long a night takes: at the experiment's own ticker count, and projected to the
    study's `s.tickers` where that differs (never the 100 alone for a smaller experiment)."""
    at = lambda hours: f"{s.candidate} {_hours(hours[s.candidate])}, " \
                       f"{s.baseline} {_hours(hours[s.baseline])}"
    d = draws_words(s.draws, (s.candidate, s.baseline))
    if s.own_tickers == s.tickers:
        return [f"  a night of {s.tickers} tickers × {d}: {at(s.hours_at)}"]
    if s.own_tickers is None:
        return [f"  a night of {s.tickers} tickers × {d} (projected; the runs do "
                f"not record their ticker count): {at(s.hours_at)}"]
    return [f"  a night of {s.own_tickers} tickers × {d} (this experiment's): "
            f"{at(s.own_hours_at)}",
            f"  projected to {s.tickers} tickers × {d}: {at(s.hours_at)}"]


def _hours(h: float) -> str:
    """A night's length: hours to one decimal from an hour up, else minutes (a 10-ticker
    night of 0.1 h read as nothing)."""
    if h >= 1:
        return f"{h:.1f} h"
    return f"{h * 60:.0f} min" if h * 60 >= 1 else f"{h * 3600:.0f} s"


def _fit(line: str) -> list[str]:
    """A line as lines of at most WIDTH columns: wrapped at spaces under its own indent plus
    two, never cut (a cut lost the nights a note named and the basis of the sd)."""
    if len(line) <= WIDTH:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return like(line, hang(line, WIDTH, rest=indent))
