"""The weekly comparison report: gather everything from the warehouse and the plan, render it,
and (as a Prefect flow) publish its Markdown as an artifact.

A report covers the nights from `since` to `until`. A weekly look (`--week 2027-W19`) is
cumulative: it runs from the plan's first night (or the experiment's first) to the end of
that ISO week, because an interim look reads everything collected so far.
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
from dualpath.prereg import load_plan
from evals.weekly import PlanInfo, ReportData
from evals.weekly.render import render
from flows import metrics
from warehouse import plans
from warehouse.db import reader
from warehouse.frames import calls_frame, prices_frame, runs_frame, units_frame
from warehouse.queries import run_summaries


def week_range(week: str) -> tuple[date, date]:
    """'2027-W19' -> (Monday, Sunday) of that ISO week."""
    try:
        year, num = week.upper().split("-W")
        monday = date.fromisocalendar(int(year), int(num), 1)
    except ValueError:
        raise UserError(f"--week {week!r}: use an ISO week such as 2027-W19") from None
    return monday, monday + timedelta(days=6)


def _plan_info(con, cfg: Config, until: date) -> PlanInfo:
    frozen = plans.current(con, cfg.experiment.name)
    if frozen is None:
        return PlanInfo()
    p = frozen.plan
    file_matches = None
    plan_path = con.execute("SELECT plan_path FROM plans WHERE plan_hash = ?",
                            [frozen.plan_hash]).fetchone()[0]
    if plan_path and Path(plan_path).exists():
        try:
            file_matches = load_plan(Path(plan_path)).sha256() == frozen.plan_hash
        except UserError:
            file_matches = False
    # a night counts toward the window only when every path's run is complete
    collected = [r[0] for r in con.execute(
        "SELECT night FROM runs WHERE experiment = ? AND night BETWEEN ? AND ? GROUP BY night "
        "HAVING bool_and(status = 'complete') AND count(*) = ?",
        [p.experiment, p.window.first_night, until, len(p.paths)]).fetchall()]
    return PlanInfo(plan_hash=frozen.plan_hash, file_matches=file_matches, forced=frozen.forced,
                    nights_before_freeze=frozen.nights_before_freeze,
                    window_nights=p.window.nights,
                    nights_collected=min(len(collected), p.window.nights),
                    primary=p.primary.model_dump(), baseline=p.baseline, candidate=p.candidate)


def _freshness(con, cfg: Config, until: date) -> list[str]:
    """Price freshness for the report's last night (as the night's gate saw it)."""
    from dualpath.calendar import MarketCalendar
    from warehouse.freshness import freshness

    try:
        cal = MarketCalendar.from_settings(cfg.market)
        night = cal.session_on_or_before(until)
        return [f"prices: {m}" for m in freshness(con, cfg.tickers(), night, cal).messages]
    except UserError as e:
        return [f"prices: freshness not known ({e})"]


def _failed_nights(summary: pd.DataFrame) -> pd.DataFrame:
    """Nights with a run that is not complete: a deviation from the plan's window."""
    bad = summary[summary["status"] != "complete"]
    return pd.DataFrame({"night": bad["night"], "kind": "night not complete",
                         "detail": bad["path"] + " " + bad["status"] + ": "
                         + bad["status_detail"].fillna(""), "recorded_at": pd.NaT})


def _sweeps(cfg: Config) -> list[dict]:
    """The latest sweep of each name on this experiment's paths (retuning evidence)."""
    from flows.sweep import sweep_report

    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        ids = [r[0] for r in con.execute(
            "SELECT arg_max(sweep_id, started_at) FROM sweeps WHERE experiment = ? "
            "GROUP BY name ORDER BY name", [cfg.experiment.name]).fetchall()]
    out = []
    for sweep_id in ids:
        sweep, table, _ = sweep_report(cfg, sweep_id)
        out.append({"sweep": sweep, "table": table})
    return out


def gather(cfg: Config, since: date | None, until: date | None) -> ReportData:
    """Everything the report shows, from the warehouse; the frozen plan's question when
    there is one."""
    path = cfg.resolve(cfg.warehouse.path)
    with reader(path) as con:
        frozen = plans.current(con, cfg.experiment.name)
        exp = cfg.experiment.name
        first = con.execute("SELECT min(night), max(night) FROM runs WHERE experiment = ?",
                            [exp]).fetchone()
        if first[0] is None:
            raise UserError(f"no nights of experiment {exp!r} in the warehouse yet; run "
                            "`dualpath nightly` first")
        since = since or (frozen.plan.window.first_night if frozen else first[0])
        until = until or first[1]
        if since > until:       # e.g. a --week before the window starts: nothing to report
            raise UserError(f"the report would cover {since} to {until}: no night (the "
                            f"start is after the end); {exp!r} has nights from {first[0]} "
                            f"to {first[1]}")
        units, calls, runs = (f(con, exp, since) for f in (units_frame, calls_frame, runs_frame))
        keep = lambda df: df[pd.to_datetime(df["night"]) <= pd.Timestamp(until)]
        units, calls, runs = keep(units), keep(calls), keep(runs)
        prices = prices_frame(con)
        summary = run_summaries(con)
        summary = summary[summary["run_id"].str.startswith(f"{exp}/")
                          & (pd.to_datetime(summary["night"]) >= pd.Timestamp(since))
                          & (pd.to_datetime(summary["night"]) <= pd.Timestamp(until))]
        sessions = con.execute(
            "SELECT r.night, s.path, s.dialect, s.how, s.model, s.build, s.slots, "
            "s.identity_problem FROM server_sessions s JOIN runs r USING (run_id) "
            "WHERE r.experiment = ? AND r.night BETWEEN ? AND ? ORDER BY r.night, s.path",
            [exp, since, until]).df()
        hashes = [r[0] for r in con.execute(
            "SELECT DISTINCT config_hash FROM runs WHERE experiment = ? AND night BETWEEN ? "
            "AND ? ORDER BY 1", [exp, since, until]).fetchall()]
        devs = pd.concat([plans.deviation_log(con, exp), _failed_nights(summary)],
                         ignore_index=True)
        fresh = _freshness(con, cfg, until)
        info = _plan_info(con, cfg, until)
    # nights run with a config the frozen plan does not describe are never pooled
    off = set(pd.to_datetime(devs.loc[devs["kind"] == "config differs from plan", "night"]))
    if off:
        drop = lambda df: df[~pd.to_datetime(df["night"]).isin(off)]
        units, calls, runs = drop(units), drop(calls), drop(runs)
    m = metrics.compute(cfg, metrics.question(cfg, frozen.plan if frozen else None),
                        units, calls, runs, prices, metrics.sessions_for(cfg, prices))
    if off:
        m.notes.append(f"{len(off)} night(s) run with a config that differs from the frozen "
                       "plan were left out of every metric (see Deviations)")
    return ReportData(experiment=exp, since=since, until=until, sweeps=_sweeps(cfg),
                      generated_at=datetime.now(timezone.utc), metrics=m, runs=summary,
                      calls=calls, units=units, sessions=sessions, deviations=devs, plan=info,
                      config_hashes=hashes, paths=list(cfg.paths), tickers=len(cfg.tickers()),
                      freshness=fresh, ui_url=cfg.ui.base_url)


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
