"""`dualpath prereg`: draft a plan sized by its power, freeze it, and show where it stands."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import typer

from dualpath.cli._common import (CONFIG_OPT, _parse_date, console, input_file, output_file,
                                  prereg_app)
from dualpath.cli._common import load_config
from dualpath.errors import UserError


def say(text: str, spans: tuple = (), keep: tuple[str, ...] = ()) -> None:
    """One statement at the console's width, its continuation lines indented by 2 (never
    back at column 0, as the tables' titles and notes wrap); `spans` (start, end, style)
    colour parts of `text`, wherever the wrap puts them; each of `keep` stays on one line
    where it fits (`evals.wrap.hang`)."""
    from rich.text import Text

    from dualpath.evals.wrap import hang

    at = 0
    lines = hang(text, max(40, console.width), keep=keep)
    for i, line in enumerate(lines):
        body = line[2:] if i else line
        start = text.index(body, at)
        out = Text(line)
        for a, b, style in spans:
            lo, hi = max(a, start), min(b, start + len(body))
            if lo < hi:
                out.stylize(style, lo - start + len(line) - len(body),
                            hi - start + len(line) - len(body))
        console.print(out, highlight=False, soft_wrap=True)
        at = start + len(body)


def lead(label: str, rest: str, style: str) -> None:
    """`label` in `style`, then `rest`, wrapped as `say` wraps."""
    say(label + rest, ((0, len(label), style),))


def parse_sd(text: str, horizons: list[int]) -> dict[int, float]:
    """'0.08' (every horizon) or '1=0.08,5=0.1' (per horizon) -> {horizon: sd}."""
    try:
        if "=" not in text:
            return {h: float(text) for h in horizons}
        out = {}
        for part in text.split(","):
            h, v = part.split("=")
            out[int(h)] = float(v)
    except ValueError:
        raise UserError(f"--sd-delta {text!r}: give one number (0.08) or horizon=sd pairs "
                        "(1=0.08,5=0.1)") from None
    if any(not v > 0 for v in out.values()) or set(out) - set(horizons):
        raise UserError(f"--sd-delta {text!r}: sds must be > 0, horizons among {horizons}")
    return {h: out[h] for h in horizons if h in out}


def _fmt(v) -> str:
    return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else (
        f"{v:.3f}" if isinstance(v, float) else str(v))


SIZING = ["horizon", "nights", "independent_nights", "sd_delta", "mde", "power_at_margin",
          "nights_needed"]


def print_sizing(sizing, alpha: float, chosen: float) -> None:
    import pandas as pd

    from dualpath.cli.metrics_table import print_plain
    from dualpath.evals.format import cell
    from dualpath.evals.wrap import parentheticals

    rows = pd.DataFrame(sizing.rows)[SIZING]
    est = sorted(int(h) for h in sizing.design.sd_df)
    kind = ("power exact for Gaussian ΔIC at the sd below" if not est else
            "predictive power: averaged over the sampling distribution of the pilot's sd at "
            f"h={', '.join(map(str, est))}" + (", exact at the assumed sd elsewhere"
                                               if len(est) < len(sizing.rows) else ""))
    power = sizing.design.power
    kinds = {"horizon": "int", "nights": "int", "independent_nights": "int",
             "nights_needed": "int"}
    cells = [[cell(v, kinds.get(c)) for c, v in zip(SIZING, r)]
             for r in rows.itertuples(index=False)]
    print_plain(rows, cells, f"{sizing.test} at one-sided α = {alpha:g}: t on "
                f"non-overlapping nights ({kind})",
                ["independent_nights: non-overlapping nights the t uses",
                 f"mde: min detectable ΔIC (power {power:g})",
                 f"power_at_margin: power at δ={chosen:g}",
                 f"nights_needed: nights for power {power:g}"])
    noise = f"noise: {sizing.design.sd_source}"
    say(noise, keep=parentheticals(noise))      # '(h=1: 9, … matured nights)' whole


def print_decision_design(p) -> None:
    """The primary question and what the RankIC follow-up would let through."""
    from dualpath.prereg_design import FALSE_REASSURANCE_LIMIT

    x = p.interchange
    if x is not None:
        need = (f"not decidable at 1 draw on {p.baseline} (its own draw-to-draw "
                "disagreement needs >= 2)" if p.draws_for(p.baseline) < 2
                else x.nights_basis or f"{x.nights_for_power} nights for power "
                f"{p.design.power:g} in both decisions")
        say(f"primary: interchangeability of grades ({p.candidate} keeps ≥ {x.limit:.0%} of "
            f"{p.baseline}'s draw-to-draw agreement), {need}; the "
            f"window has {p.window.nights}; RankIC non-inferiority is the confirmatory "
            "follow-up")
    rate = p.design.false_reassurance if p.design else None
    if rate is not None:
        warn = (f" — above {FALSE_REASSURANCE_LIMIT:.2f}: freezing it needs --force --reason"
                if rate > FALSE_REASSURANCE_LIMIT else "")
        say(f"false reassurance {rate:.2f}: P(a {p.candidate} with no signal passes the "
            f"RankIC primary) ({p.design.main_ic_source}){warn}")


def _noise(cfg, sd_delta: str | None, need_pilot: bool) -> tuple:
    """(sd per horizon, its source, the pilot, the pilot sds' degrees of freedom): given by
    --sd-delta, else from pilot nights horizon by horizon (None: assumed)."""
    from dualpath.evals.power import null_sd_delta
    from dualpath.evals.power import sd_df as df_of
    from dualpath.flows.prereg import pilot as read_pilot

    sd, source, got, sd_df = None, None, None, None
    if sd_delta:
        sd, source = parse_sd(sd_delta, cfg.experiment.horizons), f"given: --sd-delta {sd_delta}"
    if need_pilot or not sd_delta:
        got = read_pilot(cfg)
    if not sd_delta and got is not None and got.sd:
        # horizon by horizon: a pilot of 10 nights has matured h=1 long before h=20
        assumed = [h for h in cfg.experiment.horizons if h not in got.sd]
        sd = {h: got.sd.get(h, null_sd_delta(len(cfg.tickers())))
              for h in cfg.experiment.horizons}
        source = got.source + (f"; assumed for h={', '.join(map(str, assumed))} (not "
                               "matured on 5 pilot nights)" if assumed else "")
        sd_df = {h: df_of(got.main_ic[h][2], h) for h in got.sd if h in got.main_ic}
    return sd, source, got, sd_df


@prereg_app.command("draft")
def prereg_draft(plan: Path = typer.Argument(Path("prereg.toml"), help="Plan file to write."),
                 config: Path = CONFIG_OPT,
                 first_night: str = typer.Option(..., help="First night of the window (YYYY-MM-DD)."),
                 nights: int = typer.Option(30, min=2, max=500, help="Trading nights in the window."),
                 sd_delta: Optional[str] = typer.Option(
                     None, help="Assumed sd of one night's ΔIC: 0.08, or 1=0.08,5=0.1 per "
                     "horizon (default: from pilot nights in the warehouse, else assumed)."),
                 power: float = typer.Option(0.8, min=0.05, max=0.99, help="Power to size for."),
                 margin: Optional[float] = typer.Option(None, help="δ (default: proposed)."),
                 preserve: Optional[float] = typer.Option(
                     None, min=0.01, max=0.99, help="State the margin as the share of the "
                     "baseline's IC the candidate keeps (0.5: ≥ 50%), from the pilot's 95% "
                     "lower bound of that IC (the fixed-margin 95–95 method)."),
                 primary: Optional[int] = typer.Option(None, help="Primary horizon (default: "
                                                       "proposed)."),
                 force: bool = typer.Option(False, help="Overwrite an existing file.")) -> None:
    """Write a plan sized by its power: per horizon the independent nights in the window, the
    minimum detectable ΔIC, the power at δ and the nights needed; it proposes the primary and
    the margin (edit, then freeze)."""
    from dualpath.prereg import draft_plan, plan_toml, size_window

    if plan.exists() and not force:
        raise UserError(f"{plan} exists; pass --force to overwrite it")
    output_file(plan, "plan file")
    cfg = load_config(config)
    from dualpath.config_checks import refuse_unanalysable
    refuse_unanalysable(cfg)
    if preserve is not None and margin is not None:
        raise UserError("give --margin or --preserve, not both")
    if primary is not None and primary not in cfg.experiment.horizons:
        raise UserError(f"--primary {primary}: the experiment's horizons are "
                        f"{cfg.experiment.horizons}")
    sd, source, got, sd_df = _noise(cfg, sd_delta, preserve is not None)
    sizing = size_window(cfg, nights, sd, source, power, margin, sd_df=sd_df)
    kept = None
    if preserve is not None:
        from dualpath.prereg_design import preserved_margin
        h = primary or sizing.primary
        kept = preserved_margin(preserve, h, got.main_ic.get(h) if got else None)
        margin = kept.margin
        sizing = size_window(cfg, nights, sd, source, power, margin, sd_df=sd_df)
    p = draft_plan(cfg, _parse_date(first_night, "--first-night"), nights, sizing, primary,
                   pilot=got, preserved=kept)
    print_sizing(sizing, cfg.comparison.alpha, margin or cfg.comparison.margin)
    row = next(r for r in sizing.rows if r["horizon"] == p.primary.horizon)
    from dualpath.prereg import planned_power, testability
    kind = "predictive power" if str(p.primary.horizon) in p.design.sd_df else "power"
    say(f"proposed primary: h={p.primary.horizon}, δ={p.primary.margin:g} "
        f"({row['independent_nights']} independent nights; {kind} {_fmt(planned_power(p))} "
        f"at δ={p.primary.margin:g})")
    if kept is not None:
        from dualpath.prereg_design import preserved_text
        say(preserved_text(kept, p.baseline, p.candidate, p.primary.horizon))
    for why in testability(p):
        lead("cannot test:", f" {why}; freezing it needs --force --reason", "red")
    print_decision_design(p)
    from dualpath.prereg_design import draws_proposal
    for line in draws_proposal(p, got):
        say(line)
    from dualpath.sampling import config_differences
    plan.write_text(plan_toml(p, config_differences(cfg)))
    say(f"wrote {plan} (sha256 {p.sha256()[:12]}); review the hypotheses, then freeze it:")
    console.print(f"  dualpath prereg freeze {plan} -c {config}", markup=False,
                  highlight=False, soft_wrap=True)      # whole, to copy


@prereg_app.command("freeze")
def prereg_freeze(plan: Path = typer.Argument(..., help="The plan file."),
                  config: Path = CONFIG_OPT,
                  force: bool = typer.Option(False, help="Freeze although nights of the window "
                                             "exist or the window cannot test the primary "
                                             "(every report says so)."),
                  reason: Optional[str] = typer.Option(None, help="Why it was forced (needed "
                                                       "with --force; quoted in reports).")) -> None:
    """Validate the plan and record its canonical SHA-256 and freeze time in the warehouse."""
    from dualpath.prereg import load_plan, planned_power
    from dualpath.flows.prereg import freeze_plan

    frozen = freeze_plan(load_config(config), input_file(plan, "plan file"), force, reason)
    if frozen.already_frozen:
        ignored = [o for o, given in (("--force", force), ("--reason", reason)) if given]
        say(f"already frozen with this hash: {frozen.plan_hash} at "
            f"{frozen.frozen_at:%Y-%m-%d %H:%M %Z}"
            + (f" (forced: {frozen.force_reason})" if frozen.forced else "")
            + "; nothing recorded" + (f" ({'/'.join(ignored)} ignored)" if ignored else ""))
    else:
        done = f"frozen: {frozen.plan_hash} at {frozen.frozen_at:%Y-%m-%d %H:%M %Z}"
        forced = f" (forced: {frozen.force_reason})" if frozen.forced else ""
        say(done + forced, ((len(done) + 1, len(done + forced), "yellow"),))
    p = load_plan(plan)
    if not frozen.already_frozen and p.design and p.design.false_reassurance is not None:
        say(f"false reassurance recorded: {p.design.false_reassurance:.2f} "
            f"({p.design.main_ic_source})")
    pw = planned_power(p)
    if p.design and pw < p.design.power:
        lead("underpowered:", f" power {pw:.2f} at δ={p.primary.margin:g} over the window, "
             f"below the plan's {p.design.power:g}", "yellow")


def _from_here(path: str) -> str:
    """A path as a person typed it: relative to the working folder when it is inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return path


@prereg_app.command("status")
def prereg_status(config: Path = CONFIG_OPT) -> None:
    """What a report would say today: file vs hash, deviations, nights matured per horizon,
    and the label, with every failed condition."""
    import pandas as pd

    from dualpath.flows.prereg import plan_file_state, plan_status, window_nights

    cfg = load_config(config)
    status = plan_status(cfg)
    frozen = status.frozen
    if frozen is None:
        say("no frozen plan: results are exploratory (`dualpath prereg draft`, then "
            "`dualpath prereg freeze`)")
        return
    p = frozen.plan
    state, path = plan_file_state(cfg, frozen)
    say(f"plan {frozen.plan_hash[:12]} frozen {frozen.frozen_at:%Y-%m-%d}"
        + (f" (forced: {frozen.force_reason})" if frozen.forced else ""))
    head = f"plan file {_from_here(path)}: "
    said = {"matches": "matches the frozen hash",
            "edited": "EDITED AFTER FREEZING (hash mismatch)"}.get(state, state)
    say(head + said, () if state == "matches" else ((len(head), len(head + said), "red"),))
    say(f"primary: {p.candidate} vs {p.baseline}, {p.primary.test} at h={p.primary.horizon}, "
        f"δ={p.primary.margin}, α={p.primary.alpha}")
    if len({p.draws_for(n) for n in p.paths}) > 1:
        say("draws per night (frozen): " + ", ".join(f"{n} {p.draws_for(n)}" for n in p.paths))
    st = status.study
    window = window_nights(cfg, p)
    if st is None:
        say(f"window: 0 of {len(window)} nights from {window[0]}")
        say("label today: interim — no decision: no nights yet")
    else:
        f = st.facts
        say(f"window: {len(f.analysed)} of {len(window)} nights analysed from {window[0]} "
            f"(pending {len(f.pending)}, not counted {len(f.failed)}, outside the window "
            f"{len(f.extra)})")
        say("matured per horizon: " + ", ".join(
            f"h={h}: {f.matured.get(h, 0)} of {len(window)}" for h in cfg.experiment.horizons))
        label = "label today: "
        say(label + st.verdict.label_text, ((len(label), len(label + st.verdict.label_text),
                                             "bold"),))
        # the label was just said: the verdict's line does not say it again
        summary, tail = st.verdict.summary(), f" · {st.verdict.label_text}"
        say("verdict today: " + (summary[:-len(tail)] if summary.endswith(tail) else summary))
    for d in status.deviations:
        night = d["night"] if d["night"] is not None and not pd.isna(d["night"]) else "-"
        lead("deviation", f" {night} {d['kind']}: {d['detail']}", "yellow")
