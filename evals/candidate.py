"""A candidate path's answer against the reference path on past nights: the headline's shape,
labelled retrospective.

Input: the `Metrics` of `evals.report.compute_metrics` over the reference's stored units,
calls and runs of the chosen nights and the candidate's of the same nights (its path named
apart when it shares the reference's name), and the primary `PrimaryVerdict` of that pair.
Everything is the study's own statistics (the same interchangeability test, limit and α,
the noise-backup rate beside it, the same RankIC comparison, slowdown and energy); only the
label differs: the nights were chosen after the fact and scored in one sitting, so no line
of it is a preregistered, prospective result, and none of it is a night of the study.

"As well as the reference with itself" reads the interchangeability ratio (candidate-
reference over reference-reference disagreement of the standardised ranks): its interval
holding 1 says no more disagreement than the reference's own draws show; above 1, more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

RETROSPECTIVE = "retrospective"
RETROSPECTIVE_TEXT = ("retrospective — past nights chosen after the fact and scored in one "
                      "sitting; not a preregistered prospective result, never a night of the "
                      "study")


@dataclass(frozen=True)
class CandidateAnswer:
    """What scoring a candidate on past nights says, against the reference's stored runs."""

    candidate: str
    reference: str
    nights: tuple
    headline: object               # evals.headline.Headline, label retrospective
    interchange: object            # evals.interchange.Interchange
    noise_rate: float              # P(a noise-graded candidate gets this verdict here)
    self_words: str                # "as well as the reference with itself": yes / no / unsure
    per_night: pd.DataFrame        # night, s/ticker and J/ticker of both paths, ratios
    differences: tuple = ()        # each setting it changes: 'sampling.thinking off → on'

    @property
    def verdict(self) -> str:
        return getattr(self.interchange, "verdict", "inconclusive")

    @property
    def label(self) -> str:
        return RETROSPECTIVE

    @property
    def lines(self) -> tuple[str, ...]:
        """The section's lines: a title naming the label, the headline's lines (each
        RankIC line carries the label), the self-agreement line, then the per-night pairs."""
        title = (f"Candidate {self.candidate} against {self.reference} on "
                 f"{len(self.nights)} past night(s) — {RETROSPECTIVE}")
        does = (f"  what {self.candidate} does differently from {self.reference}: "
                + "; ".join(self.differences) if self.differences else
                f"  {self.candidate} does what {self.reference} does (its own seeds)")
        q = list(self.headline.quality)
        # after the interchangeability block, before RankIC's
        at = next((i for i, ln in enumerate(q) if i and not ln.startswith(" ")), len(q))
        itself = f"  as well as {self.reference} with itself? {self.self_words}"
        return (title, does, *q[:at], itself, *q[at:], *self.headline.speed,
                *self.headline.energy)


def retrospective(verdict):
    """The pair's primary verdict relabelled: the test is the study's, the nights are not."""
    return replace(verdict, label=RETROSPECTIVE, label_text=RETROSPECTIVE_TEXT)


def as_well_as_itself(x) -> str:
    """The ratio's interval against 1, in words (`Interchange.ratio`)."""
    if x is None or not math.isfinite(getattr(x, "ratio", math.nan)):
        return "not estimated (no ticker-night graded on both paths with two reference draws)"
    r = f"disagreement ratio {x.ratio:.2f}"
    if not math.isfinite(x.ratio_low):
        return f"{r}, no interval ({x.note or 'too few tickers'})"
    ci = f"{r}, {x.level:.0%} CI [{x.ratio_low:.2f}, {x.ratio_high:.2f}]"
    if x.ratio_low > 1:
        return f"no — {ci}: it disagrees with {x.baseline} more than {x.baseline} does with itself"
    if x.ratio_high < 1:
        return f"yes, closer — {ci}: below 1 (closer to {x.baseline} than its own draws are)"
    return f"yes, within what was measured — {ci} holds 1"


def per_night(metrics, reference: str, candidate: str) -> pd.DataFrame:
    """Speed and energy paired per night: each path's throughput s/ticker and J/ticker on
    nights both ran as results, with the candidate-over-reference ratios."""
    sr = getattr(metrics, "speed_runs", pd.DataFrame())
    cols = ["night", f"s_per_ticker_{reference}", f"s_per_ticker_{candidate}", "speed_ratio",
            f"j_per_ticker_{reference}", f"j_per_ticker_{candidate}", "energy_ratio"]
    if not len(sr):
        return pd.DataFrame(columns=cols)
    ok = sr[sr["is_result"]]
    s = ok.pivot_table(index="night", columns="path", values="throughput_s_per_ticker")
    en = getattr(metrics, "energy_runs", pd.DataFrame())
    e = (en[en["is_result"]].pivot_table(index="night", columns="path", values="j_per_ticker")
         if len(en) and en["j_per_ticker"].notna().any() else pd.DataFrame(index=s.index))
    out = pd.DataFrame(index=s.index)
    for p in (reference, candidate):
        out[f"s_per_ticker_{p}"] = s[p] if p in s else math.nan
        out[f"j_per_ticker_{p}"] = e[p] if p in e else math.nan
    out["speed_ratio"] = out[f"s_per_ticker_{candidate}"] / out[f"s_per_ticker_{reference}"]
    out["energy_ratio"] = out[f"j_per_ticker_{candidate}"] / out[f"j_per_ticker_{reference}"]
    return out.reset_index()[cols]


def candidate_answer(metrics, verdict, draws: dict, tickers: int, price: float | None = None,
                     currency: str = "", differences: tuple = ()) -> CandidateAnswer:
    """The answer of `metrics` (the pair reference x candidate over the chosen nights) and
    the pair's primary `verdict`, relabelled retrospective."""
    from dualpath.evals.headline import headline
    from dualpath.evals.interchange import noise_rate

    v = retrospective(verdict)
    h = headline(metrics, v, draws, tickers=tickers, price=price, currency=currency)
    x = metrics.interchange
    nights = tuple(sorted(pd.to_datetime(metrics.speed_runs["night"]).dt.date.unique())) \
        if len(metrics.speed_runs) else ()
    return CandidateAnswer(v.candidate, v.baseline, nights, h, x,
                           noise_rate(x) if x is not None else math.nan,
                           as_well_as_itself(x), per_night(metrics, v.baseline, v.candidate),
                           tuple(differences))


def verdict_word(answer: CandidateAnswer) -> str:
    """The interchangeability verdict as one token ('not_interchangeable')."""
    return answer.verdict.replace(" ", "_")
