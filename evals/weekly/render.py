"""Render a `ReportData` to one self-contained HTML file and one Markdown file (jinja2).

The first screen decides: the headline's two cards (the primary verdict, how much slower)
come before anything else, in the words `evals.headline` gives every reader. Tables show
their registered brief columns, with every column folded beneath; each cell goes through the
one formatter (`evals.format.cell`).
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pandas as pd

from dualpath.evals.format import cell
from dualpath.evals.registry import every_table
from dualpath.evals.result import result
from dualpath.evals.weekly import ReportData, figures, nights_line, tearsheet
from dualpath.evals.weekly import sections as sections_mod
from dualpath.evals.weekly.sections import sections

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("dualpath.evals.weekly", "templates"),
                          # the templates are named *.html.j2: select_autoescape matches a
                          # name's ending, and ["html"] alone left every HTML template raw
                          # (a freeze reason, a server's error text or alias ran as script)
                          autoescape=jinja2.select_autoescape(["html", "html.j2"]),
                          trim_blocks=True, lstrip_blocks=True)

fmt = cell   # the one formatter, under the name the templates and older callers use


def table(frame: pd.DataFrame | None, cols: list[str] | None = None,
          kinds: dict[str, str] | None = None) -> dict:
    """{'cols': [...], 'rows': [[str, ...]]} for the templates; empty frames stay empty;
    `kinds` names a column's `evals.format.cell` kind."""
    if frame is None or not len(frame):
        return {"cols": [], "rows": [], "notes": []}
    if cols:
        frame = frame[[c for c in cols if c in frame]]
    kind = [(kinds or {}).get(str(c)) for c in frame.columns]
    return {"cols": [str(c) for c in frame.columns],
            "rows": [[cell(v, k) for v, k in zip(row, kind)]
                     for row in frame.itertuples(index=False)],
            "notes": []}


def sweeps(d: ReportData) -> list[dict]:
    """Each recorded sweep: title, its choice and figure (its points: the registered
    `sweep` table beneath them)."""
    from dualpath.evals.sweep_plot import sweep_figure

    out = []
    for s in d.sweeps:
        sw, t = s["sweep"], s["table"]
        title = (f"sweep {sw['name']} of path {sw['path']} over replay set "
                 f"{str(sw['replay_hash'])[:12]} ({sw['mode']}, knee within "
                 f"{float(sw['knee_share']):.0%} of the best)")
        out.append({"title": title, "chosen": sw.get("chosen_point") or "none (nothing "
                    "replayed every frozen call)", "fig": figures.uri_of(sweep_figure(t, title)) if len(t) else None})
    return out


def _primary(d: ReportData) -> pd.DataFrame:
    comparison = getattr(d.metrics, "comparison", pd.DataFrame())
    if not len(comparison) or "role" not in comparison:
        return comparison
    return comparison[comparison["role"] == "primary"]


GOOD = ("non-inferior", "equivalent", "candidate better", "interchangeable")


def _tone(verdict: str, decided: bool) -> str:
    return "good" if verdict in GOOD else "bad" if decided else "open"


def _card(lines: list[str], cls: str) -> dict:
    """A card: its title split where the headline puts two spaces between the question and
    its answer (each kept whole on screen), then its detail lines (kept whole: never wrapped)."""
    question, _, answer = lines[0].partition("  ")
    return {"cls": cls, "question": question, "answer": answer.strip(),
            "lines": [ln[2:] if ln.startswith("  ") else ln for ln in lines[1:]]}


def _blocks(lines) -> list[list[str]]:
    """Lines cut where a title (a line that does not start with spaces) begins."""
    out: list[list[str]] = []
    for line in lines:
        if not line.startswith(" ") or not out:
            out.append([])
        out[-1].append(line)
    return out


def cards(d: ReportData) -> list[dict]:
    """The headline as cards, one per question (grades interchangeable, RankIC, speed,
    energy), each a title (question, answer), its detail lines and a tone class: a pass
    that its own rate says does not reassure is never the green of a good answer."""
    h = d.headline
    if h is None:
        return []
    r = result(h)
    out = []
    for block in _blocks(h.quality):
        q = r["rankic"] if block[0].startswith("RankIC") else r["interchangeability"]
        if q is None:
            out.append(_card(block, "verdict open"))
            continue
        # an interim look is no decision (its verdict is null): never the colour of one
        verdict = q["verdict"] or ""
        decided = bool(verdict) and q.get("decided", verdict == "not interchangeable")
        tone = "open" if q["reassures"] is False else _tone(verdict, decided)
        out.append(_card(block, f"verdict {tone}"))
    out += [_card(b, "slowdown") for b in _blocks(h.speed)]
    out += [_card(b, "energy") for b in _blocks(getattr(h, "energy", ()))]
    return out


def figs(d: ReportData, span: str, nights: int) -> dict:
    m, colors = d.metrics, figures.path_colors(d.paths)
    primary_h = (d.plan.primary or {}).get("horizon") or 1
    uri = figures.uri_of
    return {
        "rank_ic": uri(figures.rank_ic(getattr(m, "nightly_ic", pd.DataFrame()), colors,
                                       f"RankIC — {span}, {nights} nights")),
        "grades": uri(figures.grade_distribution(getattr(m, "grades", pd.DataFrame()), colors,
                                                 f"grade distribution — {span}")),
        "speed": uri(figures.speed_by_night(d.runs, colors, f"speed by night — {span}")),
        "quality_speed": uri(figures.quality_vs_speed(
            getattr(m, "rank_ic", pd.DataFrame()), getattr(m, "speed", pd.DataFrame()), colors,
            primary_h, f"quality vs speed — {span}")),
        "confusion": {p: uri(figures.draw_confusion(d.units, p, f"{p}: draw 1 vs draw 2"))
                      for p in d.paths},
        **tearsheet_figs(d, span),
    }


def _primary_test(d: ReportData) -> dict:
    """The primary comparison's horizon, test, margin, α and pair (the plan's, else the
    comparison table's primary row), or {} without a comparison."""
    p = _primary(d)
    if not len(p):
        return {}
    r = p.iloc[0]
    return {"horizon": int(r["horizon"]), "test": str(r["test"]), "margin": float(r["margin"]),
            "alpha": float(r["alpha"]), "pair": (str(r["baseline"]), str(r["candidate"]))}


def tearsheet_figs(d: ReportData, span: str) -> dict:
    """The alphalens views: IC histogram, weekly IC heatmap, nightly ΔIC with its running
    interval, returns by grade (each a data URI, or None: `tearsheet.MISSING` says why)."""
    m, colors, uri = d.metrics, figures.path_colors(d.paths), figures.uri_of
    t = _primary_test(d)
    h = t.get("horizon") or (d.plan.primary or {}).get("horizon") or 1
    nightly = getattr(m, "nightly_ic", pd.DataFrame())
    delta = getattr(m, "nightly_delta", pd.DataFrame())
    return {
        "ic_histogram": uri(tearsheet.ic_histogram(nightly, colors, h,
                                                   f"RankIC distribution — {span}")),
        "ic_heatmap": uri(tearsheet.ic_heatmap(nightly, h, f"weekly mean RankIC — {span}")),
        "delta_ic": uri(tearsheet.delta_ic(delta, h, t["test"], t["margin"], t["alpha"],
                                           t["pair"], f"nightly ΔIC at h={h}"))
        if t else None,
        "by_grade": uri(tearsheet.returns_by_grade(getattr(m, "by_grade", pd.DataFrame()),
                                                   colors, f"returns by grade — {span}")),
    }


def context(d: ReportData) -> dict:
    """What the templates show: the cards, then every registered table in its section
    (`evals.weekly.sections`), and the report's own derived views."""
    m = d.metrics
    span = f"{d.experiment}, {d.since} – {d.until}"
    nights = (len(d.analysed) if d.analysed is not None else
              int(d.runs["night"].nunique()) if len(d.runs) else 0)
    f = figs(d, span, nights)
    primary = _primary(d)
    spec = every_table()["comparison"]
    return {
        "d": d, "span": span, "nights": nights, "nights_line": nights_line(d),
        "label": d.plan.label, "cards": cards(d),
        "sections": sections(d, f), "figs": f,
        "primary": {**(sections_mod.rendered(spec, primary) if len(primary) else
                       {"cols": [], "rows": [], "notes": []})},
        "declared": list(d.declared),
        "sweeps": sweeps(d), "notes": list(getattr(m, "notes", [])),
        "candidates": [{"title": a.lines[0], "lines": a.lines[1:], "table": table(a.per_night)}
                       for a in d.candidates],
    }


def render(d: ReportData, out_dir: Path, stem: str) -> tuple[Path, Path]:
    """Write `<stem>.html`, `<stem>.md` and, with a headline, `<stem>.json` (the result
    object, `evals.result`, that a program reads) into `out_dir`; returns the first two."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = context(d)
    html = out_dir / f"{stem}.html"
    md = out_dir / f"{stem}.md"
    html.write_text(_ENV.get_template("report.html.j2").render(**ctx), encoding="utf-8")
    md.write_text(_ENV.get_template("report.md.j2").render(**ctx), encoding="utf-8")
    if d.headline is not None:
        doc = {"experiment": d.experiment, "since": str(d.since), "until": str(d.until),
               "generated_at": d.generated_at.isoformat(), "result": result(d.headline)}
        (out_dir / f"{stem}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1),
                                              encoding="utf-8")
    return html, md
