"""The headline's first quality lines: interchangeability of grades, then what RankIC's plan
would let through.

`interchange_lines` renders an `evals.interchange.Interchange` under the study's label: an
interim study leads with "interim — no decision" and shows no verdict word; a limit that is
not in the frozen plan is labelled exploratory. `false_reassurance_of` is the RankIC plan's
probability of passing a backup with no signal, given main's IC at the primary horizon as
estimated so far (`evals.power.false_reassurance`).
"""

from __future__ import annotations

import math

import pandas as pd

from dualpath.evals import power as pw


def _f(v: float, fmt: str) -> str:
    return "—" if v is None or not math.isfinite(v) else format(v, fmt)


def interchange_lines(x, label: str, label_text: str, planned: bool,
                      seq: dict | None = None, nights=None) -> list[str]:
    """Interchangeability as the first quality line(s); [] without a comparison. Under the
    plan's group-sequential design (`seq`, `flows.prereg.sequential_interchange`) a crossed
    boundary decides at that look, even while the window is interim. `nights`: an
    `evals.icr_plan.NightsPlan` from these nights' grades, said last."""
    if x is None:
        return []
    return _lines(x, label, label_text, planned, seq) + _nights_line(x, nights)


def _nights_line(x, nights) -> list[str]:
    """What a study of this shape needs, from its own stored nights as the pilot."""
    if nights is None:
        return []
    return [f"  nights to decide, from these {x.nights} night(s)' grades: "
            + nights.text()]


def _lines(x, label: str, label_text: str, planned: bool, seq: dict | None) -> list[str]:
    q = f"Quality — are {x.candidate}'s grades interchangeable with {x.baseline}'s?"
    nights = f"{x.nights} night(s)"
    if seq is not None and planned:
        return (_sequential_head(q, x, label, label_text, seq) + _detail(x, seq)
                + _noise_line(x, seq["verdict"], seq))
    if label == "interim":
        head = [f"{q}  interim — no decision, {nights}", "  " + label_text.split(": ", 1)[-1]]
        return head + _detail(x)
    elif label == "confirmatory" and planned:
        head = [f"{q}  {x.verdict}, {nights}  [{label_text}]"]      # late/resumed named
    else:
        why = "" if planned else f"; limit {x.limit:.0%} by default, not preregistered"
        head = [f"{q}  {x.verdict}, {nights}", f"  [{label_text}{why}]"]
    return head + _detail(x) + _noise_line(x, x.verdict)


def _noise_line(x, verdict: str, seq: dict | None = None) -> list[str]:
    """The verdict's noise-backup rate: P(a candidate whose grades are noise gets it at this
    plan and look), given the baseline's draws (`evals.interchange.noise_rate`; under the
    group-sequential design, `evals.sequential.noise_rate`); none where no interval was
    calibrated (too few tickers) and none at an interim look outside a sequential design,
    which shows no verdict."""
    from dualpath.evals import interchange as ic
    from dualpath.evals import sequential as sq

    if seq is not None:
        rate = sq.noise_rate(x, seq["looks"], seq["reached"], verdict, seq.get("total"))
    else:
        rate = ic.noise_rate(x, verdict)
    if not math.isfinite(rate):
        return []
    return [f"  noise-backup rate {rate:.3f} = P(a {x.candidate} whose grades are noise gets "
            f"'{verdict}' here)"]


def _sequential_head(q: str, x, label: str, label_text: str, seq: dict) -> list[str]:
    looks, k = seq["looks"], seq["look"]
    where = f"look {seq['reached']} of {len(looks)}"
    if k is not None and k < len(looks) - 1:
        word = f"stopped early for {seq['verdict']} at night {seq['night']} (look {k + 1} of " \
               f"{len(looks)})"
    elif k is not None or seq["verdict"] == "inconclusive":
        word = f"{seq['verdict']}, {looks[-1]} night(s)"
    else:
        word = f"interim — no decision, {x.nights} night(s) ({where}: no boundary crossed)"
    shown = label_text if label != "interim" else "interim"
    planned = seq.get("planned")
    short = (f" (planned {'/'.join(map(str, planned))}: the window closed with "
             f"{looks[-1]} of {seq['total']} nights, its final look spending all α left at information "
             f"{looks[-1]}/{seq['total']})") if planned else ""
    return [f"{q}  {word}",
            f"  [{shown}; group-sequential: O'Brien-Fleming spending over looks at night(s) "
            + "/".join(map(str, looks)) + short + "]"]


def _detail(x, seq: dict | None = None) -> list[str]:
    if not math.isfinite(x.ratio):
        return [f"  before it can decide: {x.note}"]
    ci = (f", {x.level:.0%} CI [{x.ratio_low:.2f}, {x.ratio_high:.2f}]"
          if math.isfinite(x.ratio_low) else " (no interval)")
    test = (f"; z {seq['z']:+.2f} against ±{seq['bound']:.2f} at the look"
            if seq is not None and math.isfinite(seq.get("z", math.nan)) else _bounds(x))
    return [f"  disagreement {x.candidate}–{x.baseline} ÷ {x.baseline}–{x.baseline} draws "
            f"{x.ratio:.2f}{ci}; {x.tickers} tickers",
            f"  {x.candidate} keeps {_f(x.share, '.0%')} of {x.baseline}'s draw-to-draw rank "
            f"agreement (limit {x.limit:.0%}{test})",
            f"  apart: shift {_f(x.shift, '+.2f')} grade, spread ×{_f(x.spread, '.2f')} (not "
            f"disagreement); ticker × path {_f(x.interaction, '+.3f')}",
            "  draws without a grade (counted, never imputed): "
            + ", ".join(f"{p} {n}" for p, n in x.failed.items()),
            *([f"  before it can decide: {x.note}"] if x.note else [])]


def _bounds(x) -> str:
    """What the test saw, in terms of its rule (g = ρ_TR − limit·ρ_RR)."""
    side = f"one-sided {1 - x.alpha:.0%}"
    if not math.isfinite(x.g_low):
        return ""
    if x.verdict == "interchangeable":
        return f"; the excess over it ≥ {x.g_low:+.3f}, {side}"
    if x.verdict == "not interchangeable":
        return f"; the excess over it ≤ {x.g_high:+.3f}, {side}"
    return f"; the excess over it between {x.g_low:+.3f} and {x.g_high:+.3f}, {side} bounds"


def false_reassurance_of(v, nightly_ic: pd.DataFrame) -> tuple[float, float, int, int]:
    """(rate, main's mean IC, its nights, the plan's independent nights) for the primary
    test of verdict ``v``: at the plan's window when frozen, else at the nights so far."""
    if v.horizon is None or not len(nightly_ic) or v.test == "difference":
        return math.nan, math.nan, 0, 0
    ic = nightly_ic[(nightly_ic["path"] == v.baseline) & (nightly_ic["horizon"] == v.horizon)
                    & (nightly_ic["status"] == "ok")]
    ok = ic["ic"].dropna()
    nights = v.window_nights or v.nights_analysed or len(ok)
    m = pw.independent_count(nights, v.horizon)
    if len(ok) < 2:
        return math.nan, float(ok.mean()) if len(ok) else math.nan, len(ok), m
    tickers = int(ic["n_tickers"].median())
    rate = pw.false_reassurance(v.test, float(ok.mean()), float(ok.std(ddof=1)), tickers, m,
                                v.margin, v.alpha)
    return rate, float(ok.mean()), len(ok), m


def false_reassurance_line(rate: float, main_ic: float, n: int, m: int, v) -> str:
    """The RankIC plan's false-reassurance rate in words."""
    if not math.isfinite(rate):
        why = (f"{v.baseline}'s IC at h={v.horizon} has {n} matured night(s)" if n < 2 else
               f"the test has {m} non-overlapping night(s) at h={v.horizon}, needs 4")
        return f"  false reassurance: unknown ({why})"
    caution = "; above 0.10: a pass would not reassure" if rate > 0.10 else ""
    return (f"  false reassurance {rate:.2f} = P(a backup with no signal passes), given "
            f"{v.baseline}'s IC {main_ic:+.3f} ({n} nights){caution}")


def rankic_word(v) -> str:
    """The RankIC verdict as the headline words it: an interval that excludes 0 on the
    losing side without reaching the margin is said so, not just 'inconclusive'."""
    if v.verdict == "inconclusive" and v.test == "non-inferiority" \
            and math.isfinite(v.ci_high) and v.ci_high < 0:
        return (f"inconclusive — {v.candidate} measurably worse (ΔIC < 0 excluded by its "
                "interval) but not shown beyond the margin")
    return v.verdict
