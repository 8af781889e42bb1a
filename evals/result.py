"""The result as data: every number the headline prints, per question, in one versioned object.

`result(h)` reads a `evals.headline.Headline` — the same objects its lines are rendered from
(the primary verdict, the interchangeability test and its group-sequential look, the
slowdown, the energy comparison, the false-reassurance and noise-backup rates) — so the text
and the data cannot disagree; each question's `answer` is the words its first line prints.
`dualpath metrics -f json` carries it as `result`, the weekly report writes it beside its
HTML and Markdown, and the `headline` table (csv and json) is one row per question of it
(`headline_table`).

The JSON Schema is `dualpath/schemas/result.schema.json` (`SCHEMA`), shipped in the wheel;
`VERSION` changes when a field changes meaning or is removed (an added field does not).
Numbers are plain floats, never rounded (a reader rounds as the text does); a number the
study does not have yet is null, never 0.
"""

from __future__ import annotations

import json
import math
from importlib import resources

import pandas as pd

from dualpath.evals import energy as en
from dualpath.evals import power as pw
from dualpath.evals.headline import RUNAWAY_FLAG
from dualpath.evals.headline_icr import REASSURES, label_parts, reassures
from dualpath.evals.registry import table

VERSION = 1
SCHEMA = "schemas/result.schema.json"     # inside the `dualpath` package


def schema() -> dict:
    """The result object's JSON Schema (draft 2020-12), as shipped in the package."""
    return json.loads(resources.files("dualpath").joinpath(SCHEMA).read_text("utf-8"))


def num(v) -> float | None:
    """A finite number as a float, else None (JSON has no NaN)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _interval(lo, hi, level) -> dict:
    return {"low": num(lo), "high": num(hi), "level": num(level)}


def answer_of(lines) -> str | None:
    """A block's answer as its first line prints it: after the question, before the label."""
    if not lines:
        return None
    return lines[0].partition("?  ")[2].split("  [")[0] or None


def _block(lines, start: str) -> list[str]:
    """The lines of the question whose first line starts with ``start``."""
    out: list[str] = []
    for line in lines:
        if not line.startswith(" "):
            if out:
                break
            if line.startswith(start):
                out.append(line)
        elif out:
            out.append(line)
    return out


def result(h) -> dict:
    """The headline `h` as a result object (see the module docstring and `SCHEMA`)."""
    v = h.verdict
    word, why = label_parts(v.label_text)
    return {"version": VERSION, "baseline": v.baseline, "candidate": v.candidate,
            "label": {"label": v.label, "word": word, "why": why or None,
                      "text": v.label_text, "reasons": list(v.reasons)},
            "interchangeability": interchangeability(h), "rankic": rankic(h),
            "speed": speed(h), "energy": energy(h), "lines": [str(x) for x in h.lines]}


def interchangeability(h) -> dict | None:
    """Are the candidate's grades interchangeable with the baseline's (None: no pair)."""
    x, seq = h.interchange, h.sequential if h.planned else None
    if x is None:
        return None
    sequential = None
    if seq is not None:
        k = seq["look"]
        sequential = {"looks": list(seq["looks"]), "look_count": len(seq["looks"]),
                      "reached": seq["reached"], "look": None if k is None else k + 1,
                      "stopped_at_night": seq.get("night"), "total_nights": seq.get("total"),
                      "planned_looks": seq.get("planned"), "verdict": seq["verdict"]}
    stated = seq["verdict"] if seq is not None else (
        None if h.verdict.label == "interim" else x.verdict)
    rate = num(h.noise_rate)
    return {
        "answer": answer_of([h.heads.get("interchangeability")
                             or _block(h.quality, "Quality")[0]]), "verdict": stated,
        "test_verdict": x.verdict, "label": label_parts(h.verdict.label_text)[0]
        if h.planned else "exploratory", "planned": bool(h.planned),
        "nights": x.nights, "tickers": x.tickers, "ticker_nights": x.ticker_nights,
        "ratio": num(x.ratio), "interval": _interval(x.ratio_low, x.ratio_high, x.level),
        "share": num(x.share), "limit": num(x.limit), "alpha": num(x.alpha),
        "excess": {"g": num(x.g), "low": num(x.g_low), "high": num(x.g_high),
                   "level": num(1 - x.alpha)},
        "z": num(seq["z"]) if seq is not None else None,
        "boundary": num(seq["bound"]) if seq is not None else None,
        "look": _look_at(seq), "sequential": sequential,
        "noise_backup_rate": rate, "threshold": REASSURES,
        "reassures": (rate <= REASSURES) if stated == "interchangeable" and rate is not None
        else None,
        "shift": num(x.shift), "spread": num(x.spread), "interaction": num(x.interaction),
        "noise_excess": num(x.noise_excess),
        "rho": {"baseline_baseline": num(x.rho_rr), "candidate_baseline": num(x.rho_tr),
                "candidate_candidate": num(x.rho_tt)},
        "failed": dict(x.failed), "note": x.note or None,
        "nights_to_decide": _nights(h.nights_plan)}


def _nights(plan) -> dict | None:
    """The nights both decisions need at this shape, from these nights' grades as the pilot
    (`evals.icr_plan.NightsPlan`; None where the study has none)."""
    if plan is None:
        return None
    return {"nights": plan.nights, "low": plan.low, "high": plan.high, "power": num(plan.power),
            "power_equal": num(plan.power_equal), "power_noise": num(plan.power_noise),
            "cap": plan.cap, "source": plan.source}


def rankic(h) -> dict | None:
    """Is the candidate's signal as good as the baseline's, by the primary RankIC test."""
    v = h.verdict
    if not v.candidate:
        return None
    rate, ic, n, m = h.frr
    return {
        "answer": answer_of([h.heads.get("rankic") or _block(h.quality, "RankIC")[0]]),
        "verdict": None if v.label == "interim" else v.verdict, "test_verdict": v.verdict,
        "decided": bool(v.decided), "label": label_parts(v.label_text)[0],
        "test": v.test, "horizon": v.horizon, "estimate": num(v.estimate),
        "interval": {**_interval(v.ci_low, v.ci_high, v.ci_level), "method": v.ci_text or None},
        "margin": num(v.margin), "alpha": num(v.alpha), "power": num(v.power),
        "power_basis": v.power_text or None, "preserve": num(v.preserve),
        "baseline_ic_low": num(v.baseline_ic_low),
        "false_reassurance": {"rate": num(rate), "baseline_ic": num(ic), "baseline_nights": n,
                              "independent_nights": m,
                              "independent_nights_needed": pw.MIN_INDEPENDENT,
                              "threshold": REASSURES},
        "reassures": reassures(v, rate), "nights_analysed": v.nights_analysed,
        "n_independent": v.n_independent, "window_nights": v.window_nights,
        "note": v.note or None}


def speed(h) -> dict | None:
    """How much slower the candidate is (None: no path has a run whose speed is a result)."""
    s = h.slowdown
    if s is None:
        return None if not h.verdict.candidate else {
            "answer": answer_of(_block(h.speed, "Speed")), "ratio": None,
            "interval": _interval(None, None, None), "paired_nights": 0,
            "basis": "throughput", "basis_text": None, "per": "ticker", "medians": {},
            "disturbed_runs": dict(h.disturbed), "runaway_shares": dict(h.runaway)}
    return {
        "answer": answer_of(_block(h.speed, "Speed")), "ratio": num(s.ratio),
        "direction": None if s.ratio is None else ("slower" if s.ratio >= 1 else "faster"),
        "interval": _interval(s.lo, s.hi, s.level), "paired_nights": s.nights,
        "basis": s.basis, "basis_text": s.basis_text, "per": s.per,
        "unit": f"s/{s.per}", "medians": {s.candidate: num(s.candidate_s),
                                           s.baseline: num(s.baseline_s)},
        "draws": s.draws, "result_runs": dict(s.result_runs),
        "night": {"tickers": s.own_tickers,
                  "hours": {p: num(x) for p, x in s.own_hours_at.items()}},
        "projected": {"tickers": s.tickers, "hours": {p: num(x) for p, x in s.hours_at.items()}},
        "disturbed_runs": dict(h.disturbed), "runaway_shares": dict(h.runaway),
        "runaway_flag": RUNAWAY_FLAG,
        # each change of a path's draws mid-study: the night and its draws before and after
        "draws_changed": {p: [{"night": _day(n), "before": a, "after": b} for n, a, b in steps]
                          for p, steps in getattr(s, "draws_changed", {}).items()}}


def energy(h) -> dict | None:
    """Board energy per ticker on each path and their ratio (None: no runs on both)."""
    e = h.energy_cmp
    if e is None:
        return None
    cost = ({p: num(k * e.price) for p, k in e.kwh.items()} if e.price is not None else None)
    return {
        "answer": answer_of(_block(h.energy, "Energy")), "ratio": num(e.ratio),
        "interval": _interval(e.lo, e.hi, e.level), "paired_nights": e.nights,
        "basis": en.BASIS, "unit": "J/ticker",
        "read_by": dict(getattr(e, "basis", {}) or {}),     # path: how its joules were read
        "medians": {p: num(x) for p, x in e.per_ticker.items()},
        "above_idle": {p: num(x) for p, x in e.above_idle.items()},
        "idle_w": {p: num(x) for p, x in e.idle_w.items()},
        "night": {"tickers": e.tickers, "draws": e.draws,
                  "kwh": {p: num(x) for p, x in e.kwh.items()}},
        "price_per_kwh": num(e.price), "currency": e.currency or None, "cost": cost,
        "unknown": dict(e.unknown)}


def _look_at(seq: dict | None) -> int | None:
    """The look (1-based) whose z and boundary are given: the deciding one, else the last
    reached."""
    if seq is None or not seq["reached"]:
        return None
    return (seq["look"] if seq["look"] is not None else seq["reached"] - 1) + 1


@table("headline", "The answer at a glance: one row per question, from the result object",
       ["question", "answer", "estimate", "ci_low", "ci_high", "ci_level", "basis", "detail"],
       kinds={"ci_level": "share"}, kind="headline", order=0,
       gloss={"estimate": "interchangeability: disagreement ratio (candidate–baseline ÷ "
                          "baseline–baseline draws); rankic: ΔIC; speed and energy: candidate "
                          "÷ baseline"})
def headline_table(h) -> pd.DataFrame:
    """The headline (`evals.headline.Headline`) as one row per question (what csv and json
    carry), read from its result object so that its words and numbers are the headline's."""
    r, rows = result(h), []
    x, q, s, e = r["interchangeability"], r["rankic"], r["speed"], r["energy"]
    if x is not None:
        rows.append({"question": "interchangeability", "answer": x["answer"],
                     "estimate": x["ratio"], **_ci(x["interval"]),
                     "basis": f"disagreement {r['candidate']}–{r['baseline']} ÷ "
                              f"{r['baseline']}–{r['baseline']} draws, limit {x['limit']:.0%} "
                              "of agreement kept",
                     "detail": "; ".join(filter(None, [
                         f"[{x['label']}] {x['nights']} nights, {x['tickers']} tickers",
                         f"noise-backup rate {x['noise_backup_rate']:.3f}"
                         if x["noise_backup_rate"] is not None else None, x["note"]]))})
    if q is not None:
        interim = r["label"]["label"] == "interim"     # an interim look names no verdict
        rows.append({"question": "rankic", "answer": q["answer"], "estimate": q["estimate"],
                     **_ci(q["interval"]),
                     "basis": f"ΔIC at h={q['horizon']}, margin {q['margin']}",
                     "detail": r["label"]["text"] if interim
                     else q["note"] or r["label"]["text"]})
    if s is not None and s["basis_text"] is not None:
        rows.append({"question": "speed", "answer": s["answer"], "estimate": s["ratio"],
                     **_ci(s["interval"]), "basis": s["basis_text"],
                     "detail": f"{s['paired_nights']} paired nights"})
    if e is not None:
        rows.append({"question": "energy", "answer": e["answer"], "estimate": e["ratio"],
                     **_ci(e["interval"]),
                     "basis": "; ".join([e["basis"]] + [
                         f"{p} by {w}" for p, w in e["read_by"].items()]),
                     "detail": "; ".join(f"{p} {e['medians'][p]:.0f} J/ticker, "
                                         f"{e['night']['kwh'][p]:.3f} kWh per "
                                         f"{e['night']['tickers']}-ticker night"
                                         for p in e["medians"]
                                         if e["medians"][p] is not None)})
    frame = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    return frame.astype({c: float for c in ("estimate", "ci_low", "ci_high", "ci_level")})


TABLE_COLUMNS = ["question", "answer", "estimate", "ci_low", "ci_high", "ci_level", "basis",
                 "detail"]


def _ci(interval: dict) -> dict:
    return {"ci_low": interval["low"], "ci_high": interval["high"],
            "ci_level": interval["level"]}


def _day(night) -> str | None:
    return None if night is None or pd.isna(night) else pd.Timestamp(night).date().isoformat()
