"""`dualpath candidate`: a candidate path scored on past nights, answered against the
reference path's stored runs (retrospective; never a night of the study)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

import typer

from dualpath.cli._common import CONFIG_OPT, app, console, load_config
from dualpath.errors import UserError


def parse_budget(text: str) -> float:
    """'2h', '90m', '1.5h', '3600s' -> hours."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([hms])\s*", text or "")
    if not m:
        raise UserError(f"--budget {text!r}: give a duration such as 2h, 90m or 3600s")
    return float(m.group(1)) / {"h": 1, "m": 60, "s": 3600}[m.group(2)]


def _say(line: str) -> None:
    console.print(line, markup=False, highlight=False, soft_wrap=True)


@app.command()
def candidate(spec: str = typer.Argument(..., help="The candidate: a path of the config, "
                                         "or a TOML file with one \\[paths.NAME] table."),
              config: Path = CONFIG_OPT,
              reference: Optional[str] = typer.Option(None, help="The study's path it is held "
                                                      "against (default: the baseline)."),
              nights: Optional[int] = typer.Option(None, min=1, help="Past nights to score "
                                                   "(default: as many as power 0.8 needs)."),
              budget: Optional[str] = typer.Option(None, help="Score the most past nights "
                                                   "that fit this long, e.g. 2h or 90m."),
              draws: Optional[int] = typer.Option(None, min=1, max=50, help="Draws per "
                                                  "ticker (default: the candidate path's)."),
              seed: Optional[int] = typer.Option(None, help="The candidate's base seed "
                                                 "(default: derived from its name)."),
              cost_only: bool = typer.Option(False, "--cost-only", help="State what deciding "
                                             "costs, score nothing."),
              every: float = typer.Option(10.0, min=0.0, help="Seconds between progress "
                                          "lines.")) -> None:
    """Score a candidate path on past nights from their frozen inputs and answer against
    the reference's stored grades, returns and timings (retrospective).

    States first what deciding costs (nights and draws for power 0.8, hours, energy).
    A rerun resumes. Exits 1 when a night is not complete."""
    from dualpath.flows import candidate as fc
    from dualpath.flows import candidate_answer as fa
    from dualpath.flows.metrics import question

    if nights is not None and budget is not None:
        raise UserError("give --nights or --budget, not both")
    cfg = load_config(config)
    name, sp, sampling = fc.read_candidate(cfg, spec)
    ref = reference or question(cfg).baseline
    if ref not in cfg.paths:
        raise UserError(f"--reference {ref!r} is no path of the config ({', '.join(cfg.paths)})")
    cfg_c = fc.candidate_config(cfg, name, sp, draws or sp.draws or cfg.draws_for(ref), seed,
                                sampling)
    said = fc.differences(fc.settings_of(cfg, ref), fc.settings_of(cfg_c, name))
    _say(f"{name} against {ref}: " + ("; ".join(said) if said else "the same settings "
                                       "(fresh draws: its own seeds)"))
    available, lacking = fc.past_nights(cfg, ref)
    if lacking:
        _say(f"{len(lacking)} night(s) of '{cfg.experiment.name}' kept no frozen inputs "
             f"(scored before they were stored; {lacking[0]} … {lacking[-1]}): a candidate "
             "cannot be handed what they were given, so they are left out")
    if not available:
        raise UserError(f"no past night of '{cfg.experiment.name}' has a complete {ref} run "
                        "and frozen inputs; score nights first with `dualpath nightly`")
    cost = fa.decide_cost(cfg, cfg_c, name, ref, available)
    for line in cost.lines(len(available)):
        _say(line)
    chosen = fa.choose_nights(available, cost, nights, parse_budget(budget) if budget else None)
    if not chosen:
        raise UserError(f"--budget {budget}: not one night fits (one takes "
                        f"~{cost.hours_per_night:.2f} h on the candidate)")
    _say(f"scoring {name} on {len(chosen)} past night(s) {chosen[0]} … {chosen[-1]}: "
         f"~{cost.hours(len(chosen)):.2f} h; stored as experiment '{cfg_c.experiment.name}'")
    if cost_only:
        return
    outcomes = fc.run_candidate(cfg, cfg_c, name, ref, chosen, config, _say, every)
    a = fa.answer(cfg, cfg_c.experiment.name, name, ref, fc.settings_of(cfg_c, name))
    for line in (a.lines if a is not None else ()):
        _say(line)
    _say(f"the preregistered verdict of '{cfg.experiment.name}' is unchanged: these runs "
         f"are experiment '{cfg_c.experiment.name}', never a night of the study")
    bad = [o for o in outcomes if o.status not in ("complete", "nothing_to_do")]
    for o in bad:
        _say(f"night {o.run_id.split('/')[1]}: {o.status}: {o.reason}")
    if bad:
        raise typer.Exit(1)
