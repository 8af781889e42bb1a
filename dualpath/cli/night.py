"""The night: check a config, score a night, the demo, runs, planning, doctor, deployments."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from dualpath.cli._common import (CONFIG_OPT, FORMAT_OPT, PathBars, _parse_date, app, console,
                                  err_console, output_file, prefect_env, print_frame,
                                  progress_bars)
from dualpath.cli.results import print_metrics
from dualpath.cli._common import load_config
from dualpath.errors import UserError
from dualpath.procs import start_reaper


@app.command()
def check(config: Path = CONFIG_OPT,
          deployed: bool = typer.Option(False, "--deployed", help="The config is (to be) "
                                        "deployed: also check that the schedule's next nights "
                                        "have a prices source (`deploy` and `serve` warn of it)."),
          connect: bool = typer.Option(False, "--connect", help="Also contact each attached "
                                       "path's server and refuse one whose own replies show "
                                       "another engine than the path's `engine`.")
          ) -> None:
    """Validate a config file, check that a night could start (universe, pipeline import,
    API key variables), and show what it describes."""
    from dualpath.config_checks import (baseline_draws_problem, refuse_unanalysable,
                                        refuse_unscheduled_prices)
    from dualpath.preflight import preflight

    cfg = load_config(config)
    preflight(cfg)
    refuse_unanalysable(cfg)
    if deployed:
        refuse_unscheduled_prices(cfg)
    tickers = cfg.tickers()
    if connect:
        shown = _refuse_wrong_engines(cfg)
        console.print(f"[dim]connected: {shown}; the warehouse and Prefect are not contacted "
                      "(`dualpath doctor` does that)[/dim]")
    else:
        console.print("[dim]offline check: the config alone (no server, warehouse or Prefect "
                      "is contacted; `--connect` or `dualpath doctor` does that)[/dim]")
    console.print(f"[green]ok[/green] {config}: experiment '{cfg.experiment.name}', "
                  f"{len(tickers)} tickers x {cfg.draws_text()}, "
                  f"horizons {cfg.experiment.horizons}")
    from dualpath.launch_args import identity_plan, launch_warnings
    from dualpath.telemetry.gpu_identity import gpu_pin_lines
    for name, p in cfg.paths.items():
        how = "launch" if p.launch else ("simulated" if p.engine == "sim" else "attach")
        console.print(f"  path {name}: {p.engine} {p.base_url or ''} model={p.model} "
                      f"slots={p.slots}{'' if p.draws is None else f' draws={p.draws}'} "
                      f"({how})")
        for line in identity_plan(p):
            console.print(f"    {escape(line)}", highlight=False)
        for line, warn in gpu_pin_lines(name, p, cfg.telemetry.drm_root()):      # the GPU's own counters, if here
            console.print(f"    {'[yellow]warning[/yellow]: ' if warn else ''}{escape(line)}",
                          highlight=False)
        for line in launch_warnings(p, cfg.experiment.prefix_affinity):
            console.print(f"    [yellow]warning[/yellow]: {escape(line)}", highlight=False)
    if (why := baseline_draws_problem(cfg)) is not None:
        console.print(f"  [yellow]warning[/yellow]: {escape(why)}", highlight=False)
    _print_declared(cfg)


def _refuse_wrong_engines(cfg) -> str:
    """Refuse, one line a path, an attached server whose replies show another engine; else
    say what was contacted."""
    from dualpath.flows.engine_check import engine_mismatches

    found = engine_mismatches(cfg)
    if wrong := [w for w, _ in found.values() if w is not None]:
        raise UserError("\n".join(wrong))
    return ", ".join(f"path {n}'s server answers as {cfg.paths[n].dialect}" if answered else
                     f"path {n}'s server does not answer at {cfg.paths[n].base_url}"
                     for n, (_, answered) in found.items()) or "no path attaches to a server"


def _warn_unscheduled_prices(cfg) -> None:
    """Deploying warns (a deployment given its night by hand still runs) where `check
    --deployed` fails: the schedule's first trigger would score a night with no prices."""
    from dualpath.config_checks import deployed_now, scheduled_prices_problem

    if (why := scheduled_prices_problem(cfg, deployed_now(cfg))) is not None:
        err_console.print(f"[yellow]warning:[/yellow] {escape(why)}", highlight=False)


def _print_declared(cfg) -> None:
    """What the paths' engines cannot be made to do alike with this config."""
    from dualpath.sampling import config_differences

    console.print(f"  thinking: {cfg.sampling.thinking} (the same on every path)")
    for d in config_differences(cfg):
        console.print(f"  [yellow]declared difference:[/yellow] {escape(d)}")


@app.command()
def init(path: Path = typer.Argument(Path("dualpath.toml")),
         demo: bool = typer.Option(False, help="Write the simulated demo config instead."),
         force: bool = typer.Option(False, help="Overwrite an existing file.")) -> None:
    """Write an example config (the real two-path setup, or --demo)."""
    if path.exists() and not force:
        raise UserError(f"{path} exists; pass --force to overwrite it")
    output_file(path, "config file")
    from dualpath.demo import demo_config_path, example_config_path
    src = demo_config_path() if demo else example_config_path()
    path.write_text(src.read_text())
    console.print(f"wrote {path}; check it with `dualpath check --config {path}`")


@app.command()
def nightly(config: Path = CONFIG_OPT,
            night: Optional[str] = typer.Option(None, "--date", help="Night (YYYY-MM-DD), a "
                                                "session of \\[market] calendar; default: the "
                                                "latest session whose close has passed."),
            ) -> None:
    """Score one night on every path through the Prefect flow (a rerun resumes).

    Exits 1 when any run is not complete (with the reason), 130 when interrupted."""
    from datetime import datetime, timezone

    from dualpath.calendar import MarketCalendar

    from dualpath.preflight import preflight

    cfg = load_config(config)
    cal = MarketCalendar.from_settings(cfg.market)
    # a night is a session of the market's calendar; by default the latest whose close has
    # passed in the market's time zone (never the machine's local date)
    when = (cal.require_session(_parse_date(night)) if night
            else cal.default_night(datetime.now(timezone.utc)))
    from dualpath.flows.complete import complete_night

    if (done := complete_night(cfg, when)) is not None:    # before Prefect and any server
        console.print(f"night {when} is already complete on every path ({', '.join(done)}): "
                      "nothing to score; `dualpath runs` lists its runs", highlight=False)
        return
    preflight(cfg)       # one clean error for what every path would fail on, before Prefect
    _refuse_wrong_engines(cfg)
    prefect_env(cfg.resolve(Path(".dualpath/prefect")))
    start_reaper()
    from dualpath.flows.nightly import run_nightly
    from dualpath.flows.runner import claim_night, hold_night, plan_night

    from prefect.exceptions import TerminationSignal

    from dualpath.flows.nightly import ingest_night
    from dualpath.flows.prefect_api import temporary_api

    # refused here, in one line, before Prefect starts: another process scores this night,
    # or the experiment belongs to another runs folder (the flow checks both again)
    with hold_night(cfg, when), sigterm_as_interrupt():
        claim_night(cfg, when, config)
        with temporary_api(cfg), progress_bars() as bars:
            pb = PathBars(bars)
            works = plan_night(cfg, when)
            pb.reset(str(when), list(cfg.paths), {p.path: p.units_planned for p in works},
                     {p.path: p.units_planned - len(p.units) for p in works})
            try:
                complete, result = run_nightly(config, when, progress=pb, cfg=cfg)
            except (KeyboardInterrupt, TerminationSignal):
                # the journals are closed (each segment's end record says interrupted):
                # store them, so the runs read partial, not running, and say why
                ingest_night(cfg, when)
                raise KeyboardInterrupt from None
    _print_night(result)
    if not complete:   # a scheduler or a shell loop must see that tonight is not a result
        for r in result["runs"]:
            if r["status"] != "complete":
                err_console.print(f"[red]{r['path']}: {r['status']}[/red] — "
                                  f"{escape(str(r['status_detail']))}")
        err_console.print("not complete: these runs are not results and are kept out of every "
                          "metric; fix the cause and rerun the night to resume it")
        raise typer.Exit(1)


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (what a worker or `kill` sends) ends the night as Ctrl-C does: the journals
    closed, exit 130 and "interrupted; rerun the night to resume". It exited 1 with Prefect's
    `TerminationSignal` traceback: Prefect's flow engine turns SIGTERM into that exception
    while a flow runs, and installs its own handler for that time."""
    import signal

    from prefect.exceptions import TerminationSignal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    except TerminationSignal:
        raise KeyboardInterrupt from None
    finally:
        signal.signal(signal.SIGTERM, before)


def _print_night(result: dict) -> None:
    import pandas as pd

    from dualpath.evals.speed import SPEED_LABELS

    cols = ["path", "status", "units_planned", "graded", "parse_failed", "failed", "calls",
            "runaway", "retries", "contaminated", "throughput_s", "slot_latency_s"]
    # a path that recorded nothing (its journal could not be written) has only its status
    frame = pd.DataFrame(result["runs"]).reindex(columns=cols)
    print_frame(frame, "table", f"night {result['night']}")
    for col in ("throughput_s", "slot_latency_s"):
        console.print(f"[dim]{col}: {SPEED_LABELS[col]}[/dim]")
    if result.get("missing_inputs"):
        from dualpath.flows.inputs import describe_missing
        err_console.print(f"[yellow]warning:[/yellow] "
                          f"{describe_missing(result['missing_inputs'], result['night'])}")


TOTALS_LABELS = {"throughput_s_median": "s/ticker throughput",
                 "throughput_s_per_unit_median": "s/unit throughput",
                 "slot_latency_s_median": "s/unit slot-latency",
                 "overhead_share": "queue+HTTP share"}


@app.command()
def demo(nights: int = typer.Option(20, min=2, max=120, help="Synthetic nights to score (at "
                                    "least 2: the demo's preregistered window needs two)."),
         tickers: int = typer.Option(20, min=5, max=100,
                                     help="Synthetic tickers (of 100; the real universe is "
                                          "100; 20, the fewest the interchangeability "
                                          "interval needs, keep 20 nights near 5 minutes on a "
                                          "busy 2-core machine)."),
         draws: int = typer.Option(2, min=1, max=10, help="Draws per ticker."),
         clock: Optional[float] = typer.Option(None, min=1e-4, max=100.0,
                                     help="Multiplies the simulated clocks of the embedded "
                                          "config; by default chosen from the CPU this machine "
                                          "gives the demo when it starts (1.2 idle, up to 2.5 "
                                          "busy), so the harness keeps the simulated slots "
                                          "busy. Smaller is faster and less faithful."),
         root: Path = typer.Option(Path(".dualpath/demo"),
                                   help="Demo folder: created, or cleared if an earlier demo "
                                        "made it; any other non-empty folder is refused.")) -> None:
    """The embedded default: N synthetic nights on both simulated paths, through the nightly flow."""
    prefect_env(Path(".dualpath/prefect"), quiet=True, lean=True)
    start_reaper()
    if clock is None:
        from dualpath.demo import auto_clock, machine_share
        share = machine_share()
        clock = auto_clock(share)
        console.print(f"clock: --clock {clock:g} (this machine can give the demo {share:.0%} "
                      "of a core by its load as it starts; a busier machine gets a slower "
                      "clock)")
    from dualpath.flows.prefect_api import EarlyAPI
    api = EarlyAPI()        # Prefect's server starts while the demo imports and sets up
    from dualpath.flows.demo import run_demo
    try:
        with api as ready, sigterm_as_interrupt(), progress_bars() as bars:
            result = run_demo(root, nights, tickers, draws, clock, bars, PathBars(bars), ready)
    except KeyboardInterrupt:
        # the night in progress is ingested from its closed journals (partial, with why);
        # nightly's "rerun the night to resume" does not fit: the next demo clears the folder
        err_console.print(f"interrupted; the nights scored so far are in "
                          f"{escape(str(root.resolve()))}; `dualpath demo` starts over")
        raise SystemExit(130)   # not typer.Exit(130): `main` would add nightly's line to this one
    print_frame(result.totals.rename(columns=TOTALS_LABELS), "table",
                "Per path; seconds from complete one-segment runs only (real-scale)")
    console.print("[dim]throughput basis = run wall clock ÷ tickers, or ÷ units (ticker × draw) "
                  "(sets how long a night takes); slot-latency basis = one unit's first call to "
                  "last call (what one ticker-draw waits, ≈ throughput per unit × slots). Never "
                  "compare across bases. queue+HTTP share = the part of a call's client time "
                  "that the server's own timings do not cover: mostly waiting in the server's "
                  "queue, where requests wait by design to keep the slots full; not overhead "
                  "lost.[/dim]")
    for line in result.not_complete:
        err_console.print(f"[red]not complete:[/red] {escape(line)}")
    for line in result.notes:
        console.print(line)
    m, head = result.metrics, result.headline     # the report's own, computed once
    # the tables without the headline: the answer is printed once, last, where the eye lands
    # (it was at the top of the metrics, mid-output, and the primary verdict printed twice)
    print_metrics(m, "table", only=["rank_ic", "comparison", "self_agreement", "speed"])
    from dualpath.evals.plots import plot_comparison
    console.print(f"\nplot: {plot_comparison(m, result.config.parent / 'comparison.png')}")
    console.print(f"weekly report (preregistered demo plan): {result.report}")
    db = result.warehouse
    console.print(f"\nwarehouse: {db}  (config: {result.config})")
    console.print("try:")
    cli = console_script()
    # real-scale seconds: the simulated paths compress their clocks in `calls`/`v_calls`
    console.print(f"  {cli} sql --config {result.config} \"SELECT path, count(*) calls, "
                  "avg(latency_s) AS real_latency_s FROM v_calls_real GROUP BY path\"",
                  markup=False)
    console.print(f"  {cli} sql --config {result.config} \"SELECT path, grade, count(*) "
                  "FROM units GROUP BY ALL ORDER BY ALL\"", markup=False)
    console.print(f"  {cli} runs --config {result.config}", markup=False)
    if result.starved:      # above the answer: the seconds it gives are not every run's
        err_console.print("[yellow]warning:[/yellow] "
                          + escape(starved_warning(len(result.starved), result.runs, clock)))
    console.print()
    for line in head.brief:        # `dualpath metrics --verbose` and the report: every line
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def console_script() -> str:
    """How to type `dualpath` here: bare when it is on PATH, else the script beside this
    Python (`make demo` runs `.venv/bin/dualpath`, which is not on PATH), else `python -m`."""
    import shutil
    import sys

    script = Path(sys.executable).parent / "dualpath"
    found = shutil.which("dualpath")
    if found and (not script.exists() or Path(found).resolve() == script.resolve()):
        return "dualpath"
    if script.exists():
        try:
            return str(script.relative_to(Path.cwd()))
        except ValueError:
            return str(script)
    return f"{sys.executable} -m dualpath"


def starved_warning(starved: int, runs: int, clock: float) -> str:
    """The demo's advice when its own machine set the pace of some runs."""
    slower = f"--clock {min(100.0, max(1.0, clock * 3)):g}"
    return (f"{starved} of {runs} runs were starved: this machine was too busy for the "
            f"simulated clock (--clock {clock:g}), so their slots sat idle more than they "
            "worked and their seconds read slow; they are shown in `dualpath runs` and kept out "
            "of every speed median, and the others, on the same busy machine, may read slow "
            "too. Rerun on a quieter machine or with a slower clock "
            f"(`dualpath demo {slower}`: each night takes longer, the seconds come out truer)")


@app.command()
def runs(config: Path = CONFIG_OPT, fmt: str = FORMAT_OPT,
         evidence: bool = typer.Option(False, help="Also compare with the servers' /metrics."),
         wide: bool = typer.Option(False, "--wide", help="Every column (csv and json always "
                                   "carry every column).")) -> None:
    """Every run with its completeness (only 'complete' runs are results)."""
    from dualpath.cli.results import print_runs

    print_runs(load_config(config), fmt, evidence, wide)


@app.command("plan")
def plan_cmd(config: Path = CONFIG_OPT,
             tickers: Optional[int] = typer.Option(None, min=1, help="Tickers (default: the universe)."),
             draws: Optional[int] = typer.Option(None, min=1, help="Draws (default: the config's)."),
             path: Optional[list[str]] = typer.Option(None, "--path", help="Only these paths."),
             window_hours: Optional[float] = typer.Option(None, min=0.1, max=8784.0,
                                                          help="Hours available: "
                                                          "how many draws fit.")) -> None:
    """Expected night duration per path, with an interval, from the speeds measured so far,
    against the configured window (\\[schedule] deadline) or --window-hours."""
    from dualpath.cli.results import print_plan

    print_plan(load_config(config), tickers, draws, path, window_hours)


@app.command()
def doctor(config: Path = CONFIG_OPT,
           launch: bool = typer.Option(False, "--launch", help="Rehearse night one instead: "
                                       "launch (or attach to) each path's server, check its "
                                       "identity and applied sampling, make a short call and "
                                       "a grade call, stop what was launched; exit 0 only if "
                                       "every path would score.")) -> None:
    """Check everything a night depends on (servers, warehouse, Prefect); exit 1 if any fails."""
    from dualpath.flows.doctor import doctor as run_checks

    if launch:
        from dualpath.flows.dryrun import rehearse
        start_reaper()        # a launched server must not outlive an interrupted doctor
        checks = rehearse(load_config(config))
    else:
        checks = run_checks(load_config(config), config_path=config)
    for c in checks:
        mark = "[dim]–[/dim]" if c.note else "[green]✓[/green]" if c.ok else "[red]✗[/red]"
        text = f"{c.name}: {c.detail}" + ("" if c.ok else f" — fix: {c.fix}")
        console.print(f"{mark} {escape(text)}", soft_wrap=True, highlight=False)
    failed = [c for c in checks if not c.ok]
    notes = sum(c.note for c in checks)
    judged = len(checks) - notes
    console.print(f"{judged - len(failed)} of {judged} checks passed"
                  + (f"; {notes} note{'s' if notes > 1 else ''}" if notes else ""))
    if failed:
        raise typer.Exit(1)


def _schedule_options(nightly_cron: str, weekly_cron: str, pool: str | None = None) -> None:
    """Cron strings and a pool name Prefect accepts, refused here in one line each."""
    from prefect.client.schemas.schedules import CronSchedule

    for option, cron in (("--nightly-cron", nightly_cron), ("--weekly-cron", weekly_cron)):
        try:
            CronSchedule(cron=cron)
        except ValueError:
            raise UserError(f"{option} {cron!r} is not a cron schedule; use five fields, "
                            "minute hour day month weekday, e.g. '30 18 * * 1-5'") from None
    if pool is not None and (not pool.strip() or any(c in pool for c in "/%&><")):
        raise UserError(f"--pool {pool!r}: give a work pool name without / % & > <, e.g. "
                        "'dualpath'")


def _prefect_api_or_explain() -> None:
    if not os.environ.get("PREFECT_API_URL"):
        raise UserError("deployments live on a Prefect server: start one (`prefect server "
                        "start`) and `export PREFECT_API_URL=http://127.0.0.1:4200/api` in "
                        "every shell that deploys, serves or runs a worker")


@app.command("deploy")
def deploy_cmd(config: Path = CONFIG_OPT,
               pool: str = typer.Option("dualpath", help="Work pool (a process pool is created "
                                        "if missing)."),
               nightly_cron: str = typer.Option("30 18 * * 1-5", help="When the night runs, in "
                                                "\\[market] timezone."),
               weekly_cron: str = typer.Option("0 9 * * 6", help="When the weekly report runs."),
               replace: bool = typer.Option(False, help="Point the experiment's deployments "
                                            "at this config although another config "
                                            "registered them.")
               ) -> None:
    """Register the nightly and weekly deployments of this config's experiment
    (nightly-<experiment>, weekly-report-<experiment>); then run `prefect worker start
    --pool P`."""
    _schedule_options(nightly_cron, weekly_cron, pool)
    _prefect_api_or_explain()
    cfg = load_config(config)
    _warn_unscheduled_prices(cfg)
    from dualpath.flows.deploy import run_deploy

    shares = []
    for name in run_deploy(cfg, config, pool, nightly_cron, weekly_cron, replace=replace):
        if name.startswith("dualpath-path-share/"):     # named by the pool it runs on
            shares.append(name.split("/", 1)[1])
            console.print(f"deployed {name} (pool {shares[-1]}: the paths scored on its host)")
        else:
            console.print(f"deployed {name} (pool {pool}, times in {cfg.market.timezone})")
    console.print(f"start a worker: prefect worker start --pool {pool}")
    for share_pool in shares:
        console.print(f"on each host of pool {share_pool}: prefect worker start --pool "
                      f"{share_pool}")


@app.command("serve")
def serve_cmd(config: Path = CONFIG_OPT,
              nightly_cron: str = typer.Option("30 18 * * 1-5", help="When the night runs."),
              weekly_cron: str = typer.Option("0 9 * * 6", help="When the weekly report runs."),
              replace: bool = typer.Option(False, help="Serve this config although another "
                                           "config of the same experiment served before.")
              ) -> None:
    """Serve the nightly and weekly deployments from this process (no work pool needed),
    named nightly-<experiment>-served beside any deployed by `dualpath deploy`."""
    _schedule_options(nightly_cron, weekly_cron)
    _prefect_api_or_explain()
    cfg = load_config(config)
    _warn_unscheduled_prices(cfg)
    from dualpath.flows.deploy import prepare_serve, serve

    for name in prepare_serve(cfg, config, replace):
        err_console.print(f"[yellow]warning:[/yellow] {escape(name)} (dualpath deploy) also "
                          "schedules this experiment's nights, so each night would start "
                          f"twice; pause it (prefect deployment pause {escape(name)}) or "
                          "stop serving")
    start_reaper()
    serve(cfg, config, nightly_cron, weekly_cron)
