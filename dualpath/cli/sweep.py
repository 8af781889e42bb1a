"""Retuning a path: freeze a night's requests, sweep engine settings over them, show the
sweep, verify a path's speed against its measured block."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from dualpath.cli._common import (CONFIG_OPT, FORMAT_OPT, _parse_date, app, console,
                                  err_console, input_file, output_file, prefect_env,
                                  print_frame)
from dualpath.cli._common import load_config
from dualpath.errors import UserError

SHOW_COLUMNS = ["label", "slots", "status", "verdict", "decode_tps", "share_of_best",
                "prefill_tps", "decode_tps_per_slot", "ticker_s_throughput", "ticker_s_latency",
                "runaway_share", "cached_share", "calls_ok", "calls_planned", "repeats",
                "failure_kind", "detail"]


@app.command("freeze")
def freeze_cmd(night: str = typer.Option(..., "--night", help="Night recorded (YYYY-MM-DD)."),
               tickers: int = typer.Option(..., "--tickers", min=1, help="Tickers to freeze."),
               path: str = typer.Option(..., "--path", help="Path whose requests are frozen."),
               out: Optional[Path] = typer.Option(None, "--out", help="Parquet file (default: "
                                                  "runs_dir/replays/<exp>-<night>-<path>-<hash>)."),
               config: Path = CONFIG_OPT) -> None:
    """Write N tickers' recorded requests (bodies, order, DAG stage, sampling, seeds,
    max_tokens) as one content-hashed replay set."""
    from dualpath.flows.retune import freeze

    cfg = load_config(config)
    f = freeze(cfg, _parse_date(night, "--night"), tickers, path,
               output_file(out, "--out") if out is not None else None)
    console.print(f"replay set {f.replay_hash}: {f.tickers} tickers, {f.calls} calls, "
                  f"{f.prompt_tokens:,} prompt tokens (as recorded)\n{f.file}")


@app.command("sweep")
def sweep_cmd(spec: str = typer.Argument(..., help="SPEC.toml, or 'show' to show a sweep."),
              which: Optional[str] = typer.Argument(None, help="With 'show': a sweep id or "
                                                    "name (default: the latest)."),
              config: Path = CONFIG_OPT,
              plot: Optional[Path] = typer.Option(None, "--plot", help="With 'show': write the "
                                                  "figure (PNG) here."),
              fmt: str = FORMAT_OPT) -> None:
    """Launch, check, replay and stop every point of a sweep (a rerun resumes), then name
    the knee; `dualpath sweep show` prints a recorded sweep."""
    cfg = load_config(config)
    if plot is not None:
        output_file(plot, "--plot")
    if spec == "show":
        _show(cfg, which, plot, fmt)
        return
    if which is not None:
        raise UserError(f"unexpected argument {which!r}: `dualpath sweep SPEC.toml` takes one "
                        "spec; `dualpath sweep show [SWEEP]` shows one")
    prefect_env(cfg.resolve(Path(".dualpath/prefect")), quiet=True)
    from dualpath.procs import start_reaper
    from dualpath.flows.sweep import run_sweep_flow

    start_reaper()
    outcome = run_sweep_flow(config, str(input_file(Path(spec), "sweep spec")))
    console.print(f"sweep {outcome.sweep_id}: {outcome.measured_now} point run(s) measured "
                  f"now, {outcome.kept} kept from before")
    _show(cfg, outcome.sweep_id, plot, fmt)
    if outcome.chosen is None:
        err_console.print("no point replayed every frozen call: nothing is chosen (tentative "
                          "points are never the best); fix the cause and rerun to resume")
        raise typer.Exit(1)


def _show(cfg, which: str | None, plot: Path | None, fmt: str) -> None:
    from dualpath.evals.sweep import BASIS, chosen
    from dualpath.flows.sweep import sweep_report

    sweep, table, abl = sweep_report(cfg, which)
    print_frame(table[[c for c in SHOW_COLUMNS if c in table]], fmt,
                f"sweep {sweep['name']} ({sweep['sweep_id']}) of path {sweep['path']} over "
                f"replay set {sweep['replay_hash']}, mode {sweep['mode']}")
    if fmt != "table":
        return
    console.print(f"[dim]decode_tps: {BASIS}; s/ticker real-scale: ticker_s_throughput = "
                  "replay wall ÷ tickers, ticker_s_latency = median unit first call to last "
                  "call[/dim]")
    if abl is not None:
        print_frame(abl, "table", "ablation: Δ decode tok/s without each flag, noise band")
    knee = chosen(table)
    if knee is None:
        console.print("knee: none — no point is ready (tentative and failed points are "
                      "never chosen)")
    else:
        console.print(f"knee: {knee['label']} — {int(knee['slots'])} slots, "
                      f"{knee['decode_tps']:,.1f} tok/s, within {sweep['knee_share']:.0%} of "
                      f"the best ready point; proposal: {sweep['proposal_path']}")
    if plot is not None:
        from dualpath.evals.sweep_plot import plot_sweep

        title = f"sweep {sweep['name']} ({sweep['sweep_id']})"
        console.print(f"figure: {plot_sweep(table, plot, title)}")


@app.command("verify")
def verify_cmd(path: str = typer.Argument(..., help="The path to verify."),
               config: Path = CONFIG_OPT,
               tolerance: float = typer.Option(0.15, min=0.0, max=0.99, help="Allowed "
                                               "shortfall against the measured block."),
               long_tokens: Optional[int] = typer.Option(None, min=16, help="Long prompt "
                                                         "length (default: as measured)."),
               repeats: int = typer.Option(3, min=1, max=50, help="Probes per figure; the "
                                           "median is compared, and a regression needs every "
                                           "repeat short.")) -> None:
    """The probe's short and long prompt through the path's server (launched when the path
    has a launch), repeated; exit 1 when the median decode or prefill tok/s fell more than
    the tolerance below its \\[paths.X.measured] block and every repeat did."""
    import asyncio

    from dualpath.flows.retune import verify

    cfg = load_config(config)
    verdicts, _ = asyncio.run(verify(cfg, path, tolerance, long_tokens, repeats))
    bad = False
    for v in verdicts:
        if v.now is None:
            now = "not measured"
        else:
            spread = (f" ({v.lo:,.1f}–{v.hi:,.1f} over {len(v.samples)} repeats)"
                      if len(v.samples) > 1 else "")
            now = f"median {v.now:,.1f}{spread}" if len(v.samples) > 1 else f"{v.now:,.1f}"
        mark = "✗ regressed" if v.regressed else "✓"
        console.print(f"{mark} {v.what}: now {now}, measured {v.measured:,.1f} "
                      f"(tolerance {tolerance:.0%})", markup=False, highlight=False)
        bad = bad or v.regressed
    if bad:
        raise typer.Exit(1)
