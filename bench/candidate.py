"""`dualpath candidate` on the demo's warehouse: a candidate equal to main and one whose
grades are noise, each scored on past nights from their frozen inputs, REPS seeded times.

Each repetition draws its own past nights (seeded) and its own candidate seeds; the
reference's stored draws are the demo's, shared by every repetition (one warehouse), so the
repetitions vary the candidate's draws and the nights, not the reference's. Every candidate
goes through `flows.candidate.run_candidate` (the night's runner, identity check, journal
and ingest) and is answered by `flows.candidate_answer.answer`, as the CLI does.

    .venv/bin/python bench/candidate.py --demo /tmp/demo   # made with `dualpath demo` if absent

The last line: equal_verdict, noise_verdict (the verdict most repetitions gave), nights_equal,
nights_noise (nights scored per repetition), hours_equal (the real-scale hours an equal
candidate's nights take at its measured speed, median over repetitions) and
retrospective_label (every answer's lines carry the label).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from dualpath.config import load_config
from dualpath.evals.candidate import RETROSPECTIVE, verdict_word
from dualpath.flows import candidate as fc
from dualpath.flows import candidate_answer as fa


def make_demo(root: Path, nights: int, tickers: int) -> None:
    subprocess.run([str(Path(sys.executable).with_name("dualpath")), "demo", "--nights",
                    str(nights), "--tickers", str(tickers), "--root", str(root)], check=True,
                   stdout=subprocess.DEVNULL)


def candidates(cfg, speed: float):
    """(equal, noise): main's path with its simulated clock x `speed` (real-scale seconds
    are unchanged: they are the compressed ones over time_scale), and the noise one
    grading from draw noise alone (no signal, no ticker-night component)."""
    main = cfg.paths["main"]
    sim = main.sim.model_copy(update={"time_scale": main.sim.time_scale * speed})
    equal = main.model_copy(update={"sim": sim})
    noise = main.model_copy(update={"sim": sim.model_copy(update={"signal_weight": 0.0,
                                                                  "night_noise": 0.0})})
    return equal, noise


def one(cfg, cfg_path: Path, name: str, sp, nights, seed: int):
    cfg_c = fc.candidate_config(cfg, name, sp, cfg.draws_for("main"), seed)
    outcomes = fc.run_candidate(cfg, cfg_c, name, "main", nights, cfg_path)
    a = fa.answer(cfg, cfg_c.experiment.name, name, "main", fc.settings_of(cfg_c, name))
    s = a.headline.slowdown
    tickers = len(cfg.tickers())
    hours = (s.candidate_s * tickers * len(nights) / 3600) if s is not None else float("nan")
    ok = all(o.status == "complete" for o in outcomes)
    labelled = sum(RETROSPECTIVE in line for line in a.lines) >= 3 and \
        RETROSPECTIVE in a.headline.verdict.label
    return verdict_word(a), hours, ok, labelled, a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo", type=Path, default=Path("/tmp/dualpath-bench-candidate-demo"))
    ap.add_argument("--demo-nights", type=int, default=10)
    ap.add_argument("--tickers", type=int, default=20)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--nights", type=int, default=None,
                    help="past nights per candidate (default: what power 0.8 needs, + 3)")
    ap.add_argument("--speed", type=float, default=0.3, help="the candidates' clock x this")
    args = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    if not (args.demo / "warehouse.duckdb").exists():
        make_demo(args.demo, args.demo_nights, args.tickers)
    work = args.demo.with_name(args.demo.name + "-candidates")
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(args.demo, work)          # the demo stays as it was made
    cfg_path = work / "dualpath.toml"
    cfg = load_config(cfg_path)
    available, lacking = fc.past_nights(cfg, "main")
    equal, noise = candidates(cfg, args.speed)
    cost = fa.decide_cost(cfg, fc.candidate_config(cfg, "eq00", equal, 2, 1), "eq00", "main",
                          available)
    # power 0.8 is each decision's; both right in >= 95% of repetitions needs more nights
    k = args.nights or min(len(available), (cost.nights_needed or len(available)) + 3)
    print(f"demo {args.demo}: {len(available)} past night(s) with frozen inputs, "
          f"{len(lacking)} without; {len(cfg.tickers())} tickers x {cfg.draws_for('main')} "
          f"draws; power 0.8 needs {cost.nights_needed} night(s) (ρ_RR {cost.rho_rr:.2f}); "
          f"scoring {k} a candidate, {args.reps} repetitions")
    rng = np.random.default_rng(20261206)
    got = {"equal": [], "noise": []}
    hours, complete, labelled, t0 = [], True, True, time.monotonic()
    for i in range(args.reps):
        nights = sorted(rng.choice(available, size=k, replace=False).tolist())
        for kind, sp in (("equal", equal), ("noise", noise)):
            v, h, ok, lab, a = one(cfg, cfg_path, f"{kind[:2]}{i:02d}", sp, nights,
                                   1000 + 2 * i + (kind == "noise"))
            got[kind].append(v)
            complete &= ok
            labelled &= lab
            if kind == "equal":
                hours.append(h)
            print(f"rep {i:2d} {kind:5s} {v:20s} ratio {a.interchange.ratio:5.2f} "
                  f"noise-rate {a.noise_rate:.3f}  ({time.monotonic() - t0:.0f} s)",
                  flush=True)
    right = {"equal": "interchangeable", "noise": "not_interchangeable"}
    for kind in ("equal", "noise"):
        c = Counter(got[kind])
        print(f"{kind}: {dict(c)}; right {c[right[kind]]}/{args.reps} "
              f"({c[right[kind]] / args.reps:.0%})")
    print(f"every candidate night complete: {complete}; {time.monotonic() - t0:.0f} s")
    mode = lambda xs: Counter(xs).most_common(1)[0][0]
    print(f"equal_verdict={mode(got['equal'])} noise_verdict={mode(got['noise'])} "
          f"nights_equal={k} nights_noise={k} hours_equal={np.nanmedian(hours):.2f} "
          f"retrospective_label={'yes' if labelled else 'no'}")


if __name__ == "__main__":
    main()
