"""The primary verdict and the label a reviewer would sign, as plain data.

`window_label` turns what the warehouse says about a frozen plan's window (`WindowFacts`,
gathered by `flows.prereg`) into 'confirmatory' | 'interim' | 'exploratory' with every failed
condition in words. Confirmatory needs all of: a frozen plan, frozen before the window's
first night and without --force; the plan's content (the file beside the config, and the
warehouse's copy) matching its hash; the analysis covering exactly the window's nights; the
primary horizon matured on every night analysed; and the window closed with enough results.

One rule for a window night that is not a result: a night not complete on every path, run
with another config, or never run though a later night was, is a *missing* night. While the
window is open (a window night is still to come) the study is interim, and a missing night
still counts if it is scored to completion later (named as late). Once the window has
closed (its last night, or a later one, has been run) the missing nights are left out and
disclosed with their count, and the verdict is confirmatory only if the complete nights
reach the plan's minimum (`dualpath.prereg.min_complete_nights`), else exploratory. A window
night scored late (`late_nights`) or resumed after an interruption counts, and the label
names it whatever the label is. `primary_verdict` joins that label with the primary's row
of `evals.compare.compare_paths`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date

import pandas as pd

from dualpath.evals.compare import DeltaTest

DECISIONS = {"non-inferior", "inferior", "equivalent", "not equivalent", "candidate better",
             "candidate worse"}


@dataclass(frozen=True)
class WindowFacts:
    """A frozen plan's window as the warehouse holds it (one report range)."""

    plan_hash: str
    file_state: str                        # 'matches' | 'edited' | 'missing' | 'unreadable'
    file_path: str
    stored_intact: bool                    # the warehouse's copy hashes to the frozen hash
    forced: bool
    force_reason: str | None
    nights_before_freeze: int
    frozen_on: date
    window: list[date]                     # the planned window nights (sessions)
    analysed: list[date]                   # window nights in range, complete and conforming
    failed: dict = field(default_factory=dict)    # window night -> why it does not count
    pending: list[date] = field(default_factory=list)   # window nights not run yet
    extra: list[date] = field(default_factory=list)     # nights outside the window, left out
    sub_window: str = ""                   # why the range analysed is not the window
    untestable: list[str] = field(default_factory=list)
    primary_horizon: int = 1
    matured: dict = field(default_factory=dict)   # horizon -> analysed nights matured
    missing: list[date] = field(default_factory=list)   # not run, though a later night was
    late: dict = field(default_factory=dict)            # analysed night -> why it is late
    resumed: list[date] = field(default_factory=list)   # analysed, a run resumed on it
    look: date | None = None               # a look as of this night: later nights left out
    minimum: int = 0                       # complete nights a closed window needs
    minimum_basis: str = ""                # why (`dualpath.prereg.min_complete_nights`)


def _integrity(f: WindowFacts) -> list[str]:
    out = []
    if not f.stored_intact:
        out.append("the warehouse's copy of the plan no longer hashes to its frozen hash")
    if f.file_state == "edited":
        out.append(f"the plan file {f.file_path} was edited after freezing (hash mismatch)")
    elif f.file_state in ("missing", "unreadable"):
        out.append(f"the plan file {f.file_path} is {f.file_state}: its content cannot be "
                   "checked against the frozen hash")
    if f.forced:
        why = f" (reason: {f.force_reason})" if f.force_reason else ""
        after = (f" after {f.nights_before_freeze} night(s) of the window"
                 if f.nights_before_freeze else "")
        out.append(f"the plan was frozen with --force{after}{why}")
    if f.window and f.frozen_on > f.window[0]:
        out.append(f"the plan was frozen on {f.frozen_on}, after the window's first night "
                   f"{f.window[0]}")
    # a plan forced past its own untestability usually gives that as its reason: say it once
    return out + [u for u in f.untestable if u not in (f.force_reason or "")]


def missing_nights(f: WindowFacts) -> dict:
    """Window night -> why it is not a result: not complete and conforming, or not run
    though a later night was (a night still to come is pending, not missing)."""
    return dict(sorted({**f.failed, **{n: "not run" for n in f.missing}}.items()))


def _what(gaps: dict) -> str:
    return ", ".join(f"{n} ({why})" for n, why in gaps.items())


def late_nights(started: dict[date, tuple], due: dict[date, pd.Timestamp]) -> dict[date, str]:
    """Nights scored late, each with why: a run of theirs began after their due time (`due`:
    the next session's close, when a later night is the one to score), or after a later
    night's scoring had begun (a night skipped, or one path's run, scored afterwards).
    `started`: night -> (its runs' earliest start, their latest); an unknown start is never
    late."""
    known = {n: (a, b) for n, (a, b) in started.items() if not (pd.isna(a) or pd.isna(b))}
    out = {}
    for n, (_, last) in sorted(known.items()):
        later = [m for m, (first, _) in sorted(known.items()) if m > n and first < last]
        if later:
            out[n] = f"after night {later[0]}'s scoring began"
        elif n in due and last >= due[n]:
            out[n] = "after the next session's close"
    return out


def _dates(nights: list[date]) -> str:
    return ", ".join(str(n) for n in nights)


def disclosure(f: WindowFacts) -> str:
    """'1 night scored late (2027-01-06), 1 resumed (2027-01-08)': what a counted night's
    history was, named in every label ('' when nothing is to say)."""
    out = []
    if f.late:
        out.append(f"{len(f.late)} night{'s' * (len(f.late) > 1)} scored late "
                   f"({_dates(list(f.late))})")
    if f.resumed:
        out.append(f"{len(f.resumed)} resumed ({_dates(f.resumed)})")
    return ", ".join(out)


def window_label(f: WindowFacts | None) -> tuple[str, str, tuple[str, ...]]:
    """(label, label_text, reasons) for a report range under a frozen plan (None: none);
    missing nights of a closed window, and late and resumed nights, are named in the text,
    never counted as reasons."""
    if f is None:
        return "exploratory", "exploratory — no frozen plan", ("no frozen plan",)
    label, text, reasons = _label(f)
    told = disclosure(f)
    if told:
        text = f"{text} — {told}" if text == "confirmatory" else f"{text}; {told}"
    return label, text, reasons


def _label(f: WindowFacts) -> tuple[str, str, tuple[str, ...]]:
    gaps, n = missing_nights(f), len(f.window)
    hard = _integrity(f) + ([f.sub_window] if f.sub_window else [])
    if hard:
        if gaps:
            hard.append(f"{len(gaps)} of {n} window night(s) are not complete and "
                        f"conforming: {_what(gaps)}")
        return "exploratory", "exploratory — " + "; ".join(hard), tuple(hard)
    complete = n - len(f.pending) - len(gaps)
    if gaps and not f.pending and complete < f.minimum:
        why = (f"the window has closed with {len(gaps)} of {n} window night(s) missing: "
               f"{_what(gaps)}; {complete} complete, below the plan's minimum of {f.minimum} "
               f"({f.minimum_basis})")
        return "exploratory", "exploratory — " + why, (why,)
    soft, told = [], []
    if f.look is not None and f.pending:
        soft.append(f"a look as of {f.look}: {complete} of {n} window nights collected by "
                    f"then (next: {f.pending[0]})")
    elif f.pending:
        soft.append(f"{complete} of {n} window nights collected (next: {f.pending[0]})")
    if gaps and f.pending:
        soft.append(f"{len(gaps)} window night(s) missing so far: {_what(gaps)}; each still "
                    "counts if scored to completion, named as late")
    elif gaps:
        told.append(f"{len(gaps)} of {n} window night(s) missing, left out: {_what(gaps)}; "
                    f"{complete} complete (the plan's minimum {f.minimum})")
    h = f.primary_horizon
    got = f.matured.get(h, 0)
    if got < len(f.analysed) or not f.analysed:
        soft.append(f"the primary horizon h={h} has matured on {got} of {n} "
                    "window nights")
    if soft:
        return "interim", "interim — no decision: " + "; ".join(soft + told), tuple(soft)
    return "confirmatory", " — ".join(["confirmatory", *told]), ()


@dataclass(frozen=True)
class PrimaryVerdict:
    """The primary test's outcome and label, for any renderer (see /prereg-api notes)."""

    label: str
    label_text: str
    reasons: tuple[str, ...]
    baseline: str | None
    candidate: str | None
    horizon: int | None
    test: str
    margin: float
    alpha: float
    verdict: str
    decided: bool
    estimate: float
    ci_low: float
    ci_high: float
    ci_level: float
    ci_text: str
    power: float
    power_text: str
    n_independent: int
    nights_analysed: int
    window_nights: int | None
    note: str
    preserve: float | None = None          # the margin as a share of the baseline's IC kept
    baseline_ic_low: float | None = None

    def summary(self) -> str:
        """One line: verdict, estimate and interval, power, label. An interim look names no
        verdict word: read as a decision, it would not keep the plan's error rate."""
        word = "interim — no decision" if self.label == "interim" else self.verdict
        if not math.isfinite(self.estimate):
            return f"{word}: {self.note or 'no estimate'} · {self.label_text}"
        return (f"{word} ({self.test}, δ = {self.margin:g}, α = {self.alpha:g}): ΔIC "
                f"{self.estimate:+.4f} [{self.ci_low:+.4f}, {self.ci_high:+.4f}] "
                f"{self.ci_text} · power {self.power:.2f} {self.power_text} · "
                f"{self.label_text}")


def _num(row, key) -> float:
    v = row.get(key, math.nan) if row is not None else math.nan
    return float(v) if v is not None and not pd.isna(v) else math.nan


def primary_verdict(comparison: pd.DataFrame, primary: DeltaTest | None,
                    facts: WindowFacts | None, baseline: str | None = None,
                    candidate: str | None = None) -> PrimaryVerdict:
    """The primary row of `compare_paths` (horizon `primary.horizon`) with its label."""
    label, text, reasons = window_label(facts)
    h = primary.horizon if primary else None
    rows = comparison[comparison["horizon"] == h] if h is not None and len(comparison) else []
    row = rows.iloc[0].to_dict() if len(rows) else None
    t = primary or DeltaTest(horizon=0)
    verdict = row["verdict"] if row is not None else "no comparison"
    n = int(row["n_independent"]) if row is not None else 0
    return PrimaryVerdict(
        label=label, label_text=text, reasons=reasons,
        baseline=baseline or (row or {}).get("baseline"),
        candidate=candidate or (row or {}).get("candidate"), horizon=h, test=t.test,
        margin=t.margin, alpha=t.alpha, verdict=verdict, decided=verdict in DECISIONS,
        estimate=_num(row, "estimate"), ci_low=_num(row, "ci_low"), ci_high=_num(row, "ci_high"),
        ci_level=_num(row, "ci_level"), ci_text=(row or {}).get("ci_text", ""),
        power=_num(row, "power"), power_text=(row or {}).get("power_basis", ""),
        n_independent=n, nights_analysed=len(facts.analysed) if facts else
        (int(row["nights"]) if row is not None else 0),
        window_nights=len(facts.window) if facts else None,
        note=(row or {}).get("note", "") if row is not None else "no paired nights",
        preserve=t.preserve, baseline_ic_low=t.baseline_ic_low)
