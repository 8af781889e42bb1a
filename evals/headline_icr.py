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
from dualpath.evals.wrap import Detail


def _f(v: float, fmt: str) -> str:
    return "—" if v is None or not math.isfinite(v) else format(v, fmt)


REASSURES = 0.10    # a pass a useless backup gets more often than this does not reassure


def _nights_line(x, nights) -> list[str]:
    """What a study of this shape needs, from its own stored nights as the pilot."""
    if nights is None:
        return []
    return [f"  nights to decide, from these {x.nights} night(s)' grades: "
            + nights.text()]




def label_parts(label_text: str) -> tuple[str, str]:
    """(word, why) of a label text: 'exploratory — no frozen plan' → ('exploratory', 'no
    frozen plan'); 'interim — no decision: 10 of 20 …' → ('interim', '10 of 20 …')."""
    word, _, why = label_text.partition(" — ")
    if why.startswith("no decision: "):
        why = why[len("no decision: "):]
    return word, why


def label_line(label_text: str) -> list[str]:
    """Why the study carries its label, said once in a headline (none for a bare word)."""
    word, why = label_parts(label_text)
    return [f"  {word}: {why}"] if why else []


def noise_rate_of(x, verdict: str, seq: dict | None = None) -> float:
    """The verdict's noise-backup rate: P(a candidate whose grades are noise gets it at this
    plan and look), given the baseline's draws (`evals.interchange.noise_rate`; under the
    group-sequential design, `evals.sequential.noise_rate`); NaN where no interval was
    calibrated (too few tickers)."""
    from dualpath.evals import interchange as ic
    from dualpath.evals import sequential as sq

    if seq is not None:
        return sq.noise_rate(x, seq["looks"], seq["reached"], verdict, seq.get("total"))
    return ic.noise_rate(x, verdict)


def interchange_verdict(x, label: str, planned: bool, seq: dict | None) -> str:
    """The verdict the interchangeability answer states ('' at an interim fixed-sample look,
    which states none)."""
    if seq is not None and planned:
        return seq["verdict"]
    return "" if label == "interim" else x.verdict


def interchange_lines(x, label: str, label_text: str, planned: bool,
                      seq: dict | None = None, nights=None,
                      rate: float | None = None) -> list[str]:
    """Interchangeability as the first quality lines: the answer with its label word, why
    the label (said once, here), the detail and the noise-backup rate; [] without a
    comparison. Under the plan's group-sequential design (`seq`,
    `flows.prereg.sequential_interchange`) a crossed boundary decides at that look, even
    while the window is interim. `nights`: an `evals.icr_plan.NightsPlan` from these
    nights' grades, said last. ``rate``: the noise-backup rate, where the caller has it
    (`noise_rate_of`)."""
    if x is None:
        return []
    q = f"Quality — are {x.candidate}'s grades interchangeable with {x.baseline}'s?"
    sequential = seq is not None and planned
    verdict = interchange_verdict(x, label, planned, seq)
    if rate is None:
        rate = noise_rate_of(x, verdict, seq if sequential else None) if verdict else math.nan
    if sequential:
        answer = _sequential_answer(x, seq)
    elif label == "interim":
        answer = "interim — no decision"
    else:
        answer = x.verdict
    if verdict == "interchangeable" and rate > REASSURES:
        answer = answer.replace("interchangeable", "interchangeable, not reassuring", 1)
    word = label_parts(label_text)[0] if planned else "exploratory"
    head = f"{q}  {answer}" if answer.startswith("interim") else f"{q}  {answer}  [{word}]"
    design = [Detail(f"  group-sequential: {_design(seq)}")] if sequential else []
    return [head, *label_line(label_text), *design, *_detail(x, seq if sequential else None,
                                                             planned),
            *_noise_line(x, verdict, rate), *_nights_line(x, nights)]


def _noise_line(x, verdict: str, rate: float) -> list[str]:
    """The verdict's noise-backup rate in words; none without a rate (no calibrated
    interval) or without a verdict (an interim fixed-sample look)."""
    if not verdict or not math.isfinite(rate):
        return []
    # a pass it makes not reassuring says so in the answer's words; here its threshold
    above = f" > {REASSURES:.2f}" if verdict == "interchangeable" and rate > REASSURES else ""
    return [f"  noise-backup rate {rate:.3f} = P(a {x.candidate} whose grades are noise "
            f"gets '{verdict}' here){above}"]


def _sequential_answer(x, seq: dict) -> str:
    looks, k = seq["looks"], seq["look"]
    if k is not None and k < len(looks) - 1:
        return f"stopped early for {seq['verdict']} at night {seq['night']} (look {k + 1} " \
               f"of {len(looks)})"
    if k is not None or seq["verdict"] == "inconclusive":
        return seq["verdict"]
    return (f"interim — no decision (look {seq['reached']} of {len(looks)}: no boundary "
            "crossed)")


def _design(seq: dict) -> str:
    looks, planned = seq["looks"], seq.get("planned")
    short = (f" (planned {'/'.join(map(str, planned))}: the window closed with "
             f"{looks[-1]} of {seq['total']} nights, its final look spending all α left at "
             f"information {looks[-1]}/{seq['total']})") if planned else ""
    return ("O'Brien-Fleming spending over looks at night(s) " + "/".join(map(str, looks))
            + short)


def _detail(x, seq: dict | None = None, planned: bool = True) -> list[str]:
    nights = f"{x.nights} night{'s' * (x.nights != 1)}"
    if not math.isfinite(x.ratio):
        return [f"  {nights}; before it can decide: {x.note}"]
    ci = (f", {x.level:.0%} CI [{x.ratio_low:.2f}, {x.ratio_high:.2f}]"
          if math.isfinite(x.ratio_low) else " (no interval)")
    test = (f"; z {seq['z']:+.2f} against ±{seq['bound']:.2f} at the look"
            if seq is not None and math.isfinite(seq.get("z", math.nan)) else _bounds(x))
    limit = f"limit {x.limit:.0%}" + ("" if planned else " by default, not preregistered")
    return [f"  disagreement {x.candidate}–{x.baseline} ÷ {x.baseline}–{x.baseline} draws "
            f"{x.ratio:.2f}{ci}; {x.tickers} tickers, {nights}",
            f"  {x.candidate} keeps {_f(x.share, '.0%')} of {x.baseline}'s draw-to-draw rank "
            f"agreement ({limit}{test})",
            Detail(f"  apart: shift {_f(x.shift, '+.2f')} grade, spread ×{_f(x.spread, '.2f')} "
                   f"(not disagreement); ticker × path {_f(x.interaction, '+.3f')}"),
            Detail("  draws without a grade (counted, never imputed): "
                   + ", ".join(f"{p} {n}" for p, n in x.failed.items())),
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


PASSES = ("non-inferior", "equivalent")      # the verdicts a useless backup may reach


def reassures(v, rate: float) -> bool | None:
    """Whether a pass of ``v`` reassures: False where the plan passes a backup with no
    signal more often than `REASSURES`; None without a pass or a rate."""
    if v.verdict not in PASSES or v.label == "interim" or not math.isfinite(rate):
        return None
    return rate <= REASSURES


def false_reassurance_line(rate: float, main_ic: float, n: int, m: int, v) -> str:
    """The RankIC plan's false-reassurance rate in words (for a pass that it makes not
    reassuring, the head says so: here the rate and its threshold)."""
    if not math.isfinite(rate):
        why = (f"{v.baseline}'s IC at h={v.horizon} has {n} matured night(s)" if n < 2 else
               f"the test has {m} non-overlapping night(s) at h={v.horizon}, needs "
               f"{pw.MIN_INDEPENDENT}")
        return f"  false reassurance: unknown ({why})"
    above = rate > REASSURES
    said = reassures(v, rate) is False
    caution = f"; above {REASSURES:.2f}: a pass would not reassure" if above and not said else ""
    return (f"  false reassurance {rate:.2f} = P(a backup with no signal passes)"
            f"{f' > {REASSURES:.2f}' if said else ''}, given {v.baseline}'s IC {main_ic:+.3f} "
            f"({n} nights){caution}")


def rankic_word(v, rate: float = math.nan) -> str:
    """The RankIC verdict as the headline words it: a pass the plan's false-reassurance
    rate makes worthless says so in the same words; an interval that excludes 0 on the
    losing side without reaching the margin is said so, not just 'inconclusive'."""
    if reassures(v, rate) is False:
        return f"{v.verdict}, not reassuring"
    if v.verdict == "inconclusive" and v.test == "non-inferiority" \
            and math.isfinite(v.ci_high) and v.ci_high < 0:
        return "inconclusive: measurably worse"
    return v.verdict
