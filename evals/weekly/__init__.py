"""The weekly comparison report: frames in, a self-contained HTML file and a Markdown file out.

Pure functions (no warehouse, no Prefect): `flows.weekly` gathers a `ReportData` and calls
`render`. Figures are PNGs embedded as data URIs, so the HTML has no network reference.

Sections: plan integrity, primary result, quality, speed, data and run hygiene.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime

import pandas as pd


@dataclass
class PlanInfo:
    """What the report says about the preregistered plan (`flows.prereg.study` fills it)."""

    plan_hash: str | None = None          # None: no frozen plan
    file_matches: bool | None = None      # the plan file still hashes to the frozen hash
    file_state: str = ""                  # 'matches' | 'edited' | 'missing' | 'unreadable'
    file_path: str = ""
    forced: bool = False
    force_reason: str | None = None
    nights_before_freeze: int = 0
    window_nights: int | None = None
    nights_collected: int = 0             # window nights complete and conforming, analysed
    primary: dict | None = None           # horizon, test, margin, alpha
    baseline: str | None = None
    candidate: str | None = None
    label_text: str = "exploratory — no frozen plan"
    reasons: tuple = ()
    matured: dict = field(default_factory=dict)   # horizon -> window nights matured

    @property
    def label(self) -> str:
        """'confirmatory', or 'interim — …' / 'exploratory — …' naming what failed."""
        return self.label_text


@dataclass
class ReportData:
    """Everything one report shows; each frame as `evals` documents it."""

    experiment: str
    since: date
    until: date
    generated_at: datetime
    metrics: object                       # evals.report.Metrics
    runs: pd.DataFrame                    # warehouse run summaries (status, detail, seconds)
    calls: pd.DataFrame                   # the `calls` frame (complete and partial runs)
    units: pd.DataFrame                   # the `units` frame
    sessions: pd.DataFrame                # server identity per path and night
    deviations: pd.DataFrame              # night, kind, detail
    plan: PlanInfo = field(default_factory=PlanInfo)
    config_hashes: list[str] = field(default_factory=list)
    freshness: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    sweeps: list[dict] = field(default_factory=list)  # {sweep: row, table: evals.sweep.verdicts}
    tickers: int = 100
    ui_url: str | None = None             # `dualpath ui`'s base URL: nights link to their pages
    verdict: object = None                # evals.verdict.PrimaryVerdict
    headline: object = None               # evals.headline.Headline: the first screen
    # what the paths' engines cannot do alike with the config (dualpath.sampling)
    declared: list[str] = field(default_factory=list)
    evidence: pd.DataFrame = field(default_factory=pd.DataFrame)  # warehouse server_evidence
    hosts: pd.DataFrame = field(default_factory=pd.DataFrame)     # warehouse run_hosts
    gpu: pd.DataFrame = field(default_factory=pd.DataFrame)       # evals.listings.gpu_frame
    # the nights analysed as results, and each night of the range left out with why
    # (`flows.weekly.coverage`); None: not given, the header counts the runs' nights
    analysed: list[date] | None = None
    left_out: dict = field(default_factory=dict)
    # candidates scored on past nights (`evals.candidate.CandidateAnswer`): retrospective,
    # their own section, never part of the study's verdict
    candidates: list = field(default_factory=list)


def nights_line(d: ReportData, shown: int = 3) -> str:
    """The header's count: '9 night(s) analysed; 1 left out (2027-05-13: outside the plan's
    window)': what the analysis used, and what it did not (the first `shown`, the rest
    counted; every one is listed under "Left out, and why")."""
    if d.analysed is None:
        return f"{int(d.runs['night'].nunique()) if len(d.runs) else 0} night(s)"
    out = f"{len(d.analysed)} night(s) analysed"
    if d.left_out:
        items = sorted(d.left_out.items())
        named = "; ".join(f"{n}: {why}" for n, why in items[:shown])
        more = f"; {len(items) - shown} more" if len(items) > shown else ""
        out += f"; {len(items)} left out ({named}{more})"
    return out
