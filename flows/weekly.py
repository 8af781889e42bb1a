"""The weekly comparison report: gather everything from the warehouse and the plan, render it,
and (as a Prefect flow) publish its Markdown as an artifact.

A report covers the nights from `since` to `until`. A weekly look (`--week 2027-W19`) is
cumulative: it runs from the plan's first night (or the experiment's first) to the end of
that ISO week, because an interim look reads everything collected so far. Under a frozen
plan it analyses exactly the window's complete, conforming nights (`flows.prereg.study`).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pandas as pd
from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from dualpath.config import Config, load_config
from dualpath.errors import UserError
from dualpath.sampling import config_differences
from dualpath.evals.weekly import PlanInfo, ReportData
from dualpath.evals.weekly.render import render
from dualpath.flows import metrics
from dualpath.flows.candidate_answer import stored_answers
from dualpath.warehouse.db import reader
from dualpath.evals.headline import headline
from dualpath.evals.listings import gpu_frame
from dualpath.evals.speed import with_speed
from dualpath.warehouse.energy import gpu_evidence
from dualpath.warehouse.experiment import config_hashes, server_sessions
from dualpath.warehouse.queries import run_hosts, run_summaries, server_evidence


def week_range(week: str) -> tuple[date, date]:
    """'2027-W19' -> (Monday, Sunday) of that ISO week."""
    try:
        year, num = week.upper().split("-W")
        monday = date.fromisocalendar(int(year), int(num), 1)
    except ValueError:
        raise UserError(f"--week {week!r}: use an ISO week such as 2027-W19") from None
    return monday, monday + timedelta(days=6)


def _plan_info(st) -> PlanInfo:
    """What the report's plan-integrity section shows, from the study (`flows.prereg`)."""
    v, f = st.verdict, st.facts
    if st.frozen is None:
        return PlanInfo(label_text=v.label_text, reasons=v.reasons)
    p = st.frozen.plan
    return PlanInfo(plan_hash=st.frozen.plan_hash,
                    file_matches={"matches": True, "edited": False}.get(f.file_state),
                    file_state=f.file_state, file_path=f.file_path, forced=st.frozen.forced,
                    force_reason=st.frozen.force_reason,
                    nights_before_freeze=st.frozen.nights_before_freeze,
                    window_nights=len(f.window), nights_collected=len(f.analysed),
                    primary=p.primary.model_dump(), baseline=p.baseline, candidate=p.candidate,
                    label_text=v.label_text, reasons=v.reasons, matured=dict(f.matured))


def coverage(st, summary: pd.DataFrame, paths: list[str], lo: date,
             hi: date) -> tuple[list[date], dict]:
    """(the nights the analysis used as results, {night in [lo, hi] left out: why}). Under a
    plan, its analysed window nights; the window's missing nights and the nights outside it
    are left out. Without one, the nights every path ran complete (a night with a path's run
    not complete is shown in the tables of runs, never a result)."""
    from dualpath.evals.verdict import missing_nights

    night = pd.to_datetime(summary["night"]).dt.date if len(summary) else pd.Series([])
    status = {n: dict(zip(g["path"], g["status"])) for n, g in summary.groupby(night)}
    if st.facts is not None:
        analysed = list(st.facts.analysed)
        why = {**{n: "outside the plan's window" for n in st.facts.extra},
               **missing_nights(st.facts)}
    else:
        why = {n: ", ".join(f"{p} {s.get(p, 'not run')}" for p in paths
                            if s.get(p) != "complete") for n, s in status.items()}
        analysed = sorted(n for n in st.nights if n in status and not why.get(n))
    left = {n: why.get(n) or "not analysed" for n in {*status, *why}
            if lo <= n <= hi and n not in analysed}
    return analysed, dict(sorted(left.items()))


def _freshness(con, cfg: Config, until: date) -> list[str]:
    """Price freshness for the report's last night (as the night's gate saw it)."""
    from dualpath.calendar import MarketCalendar
    from dualpath.warehouse.freshness import as_line, freshness

    try:
        cal = MarketCalendar.from_settings(cfg.market)
        night = cal.session_on_or_before(until)
        return [as_line(m) for m in freshness(con, cfg.tickers(), night, cal).messages]
    except UserError as e:
        return [f"prices: freshness not known ({e})"]


def _failed_nights(summary: pd.DataFrame) -> pd.DataFrame:
    """Nights with a run that is not complete: a deviation from the plan's window."""
    bad = summary[summary["status"] != "complete"]
    return pd.DataFrame({"night": bad["night"], "kind": "night not complete",
                         "detail": bad["path"] + " " + bad["status"] + ": "
                         + bad["status_detail"].fillna(""), "recorded_at": pd.NaT})


def _listed(con, summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The server evidence, hosts and GPU readings of the report's runs (as `dualpath runs
    --evidence`)."""
    ids = set(summary["run_id"])
    evidence = server_evidence(con)
    evidence = evidence[evidence["run_id"].isin(ids)]
    hosts = run_hosts(con)
    keys = set(zip(pd.to_datetime(summary["night"]), summary["path"]))
    hosts = hosts[[k in keys for k in zip(pd.to_datetime(hosts["night"]), hosts["path"])]]
    gpu = gpu_evidence(con)
    gpu = gpu_frame(gpu[gpu["run_id"].isin(ids)])
    return (evidence.reset_index(drop=True), hosts.reset_index(drop=True),
            gpu.reset_index(drop=True))


def _sweeps(cfg: Config) -> list[dict]:
    """The latest sweep of each name on this experiment's paths (retuning evidence)."""
    from dualpath.flows.sweep import sweep_report
    from dualpath.warehouse.sweeps import latest_sweep_ids

    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        ids = latest_sweep_ids(con, cfg.experiment.name)
    out = []
    for sweep_id in ids:
        sweep, table, _ = sweep_report(cfg, sweep_id)
        out.append({"sweep": sweep, "table": table})
    return out


def gather(cfg: Config, since: date | None, until: date | None,
           sweeps: bool = True) -> ReportData:
    """Everything the report shows, from the warehouse; under a frozen plan, its question
    over exactly the nights `flows.prereg.study` analyses."""
    from dualpath.flows.prereg import study

    exp = cfg.experiment.name
    try:
        frames = metrics.load_frames(cfg)
    except UserError:
        raise UserError(f"no nights of experiment {exp!r} in the warehouse yet; run "
                        "`dualpath nightly` first") from None
    nights = pd.to_datetime(frames["runs"]["night"]).dt.date
    frozen = frames["frozen"]
    start = since or (frozen.plan.window.first_night if frozen else nights.min())
    if start > (until or nights.max()):   # e.g. a --week before the window starts
        raise UserError(f"the report would cover {start} to {until or nights.max()}: no night "
                        f"(the start is after the end); {exp!r} has nights from "
                        f"{nights.min()} to {nights.max()}")
    st = study(cfg, since, until, frames=frames)
    lo = since or (st.facts.window[0] if st.facts else nights.min())
    hi = until or max(nights.max(), st.facts.window[-1] if st.facts and not st.facts.pending
                      else nights.max())
    path = cfg.resolve(cfg.warehouse.path)
    with reader(path) as con:
        summary = with_speed(run_summaries(con))
        summary = summary[summary["run_id"].str.startswith(f"{exp}/")
                          & (pd.to_datetime(summary["night"]) >= pd.Timestamp(lo))
                          & (pd.to_datetime(summary["night"]) <= pd.Timestamp(hi))]
        sessions = server_sessions(con, exp, lo, hi)
        evidence, hosts, gpu = _listed(con, summary)
        hashes = config_hashes(con, exp, lo, hi)
        fresh = _freshness(con, cfg, hi)
    devs = pd.concat([frames["deviations"], _failed_nights(summary)], ignore_index=True)
    keep = lambda df: df[pd.to_datetime(df["night"]).dt.date.isin(set(st.nights))]
    analysed, left_out = coverage(st, summary, list(cfg.paths), lo, hi)
    return ReportData(experiment=exp, since=lo, until=hi,
                      sweeps=_sweeps(cfg) if sweeps else [],
                      headline=headline(st.metrics, st.verdict, cfg.path_draws(),
                                        price=cfg.cost.price_per_kwh,
                                        currency=cfg.cost.currency),
                      generated_at=datetime.now(timezone.utc), metrics=st.metrics,
                      runs=summary, calls=keep(frames["calls"]), units=keep(frames["units"]),
                      sessions=sessions, deviations=devs, plan=_plan_info(st),
                      config_hashes=hashes, paths=list(cfg.paths), tickers=len(cfg.tickers()),
                      freshness=fresh, ui_url=cfg.ui.base_url, verdict=st.verdict,
                      declared=config_differences(cfg), evidence=evidence, hosts=hosts,
                      gpu=gpu, analysed=analysed, left_out=left_out,
                      candidates=stored_answers(cfg))


def write_report(cfg: Config, out_dir: Path, since: date | None = None,
                 until: date | None = None) -> tuple[Path, Path, ReportData]:
    """Gather and render; returns (html, markdown, data)."""
    data = gather(cfg, since, until)
    stem = f"{cfg.experiment.name}-{data.since}-{data.until}"
    html, md = render(data, out_dir, stem)
    return html, md, data


def _report_run_name() -> str:
    p = flow_run.parameters
    return f"report/{p.get('week') or 'latest'}"


@flow(name="dualpath-weekly-report", flow_run_name=_report_run_name, log_prints=False)
async def weekly_report(config_path: str = "dualpath.toml", week: str | None = None,
                        out: str = "reports") -> str:
    """Write the report (cumulative to the end of `week`; default: every night so far) and
    publish its Markdown as an artifact."""
    cfg = load_config(config_path)
    until = week_range(week)[1] if week else None
    html, md, data = write_report(cfg, cfg.resolve(Path(out)), None, until)
    await create_markdown_artifact(
        key=f"report-{cfg.experiment.name}".lower().replace("_", "-").replace(".", "-"),
        markdown=md.read_text(), description=f"dualpath report: {data.plan.label}")
    return str(html)
