"""The report's figures: each function returns a matplotlib Figure (or None: "no data yet"),
drawn from exactly the table the report prints beside it; `uri_of` embeds it as a PNG.

One colour per path throughout; every axis labelled with its unit and basis; uncertainty
drawn from the same inference as the tables (never an iid ± 1.96 s.e. on overlapping
returns); seconds real-scale; nights on an axis of their own sessions (one night is one tick,
not a span of hours).
"""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
GRADE_COLUMNS = ["1", "2", "3", "4", "5", "failed"]


def path_colors(paths: list[str]) -> dict[str, str]:
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(sorted(paths))}


def uri_of(fig) -> str | None:
    """A matplotlib figure as an inline PNG data URI (the figure is closed); None stays None."""
    if fig is None:
        return None
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _night_axis(ax, nights: list) -> dict:
    """Nights as evenly spaced ticks labelled by date: position of each night."""
    pos = {n: i for i, n in enumerate(nights)}
    step = max(1, len(nights) // 10)
    ax.set_xticks(range(0, len(nights), step),
                  [pd.Timestamp(n).date().isoformat() for n in nights[::step]],
                  rotation=30, ha="right")
    ax.set_xlim(-0.6, len(nights) - 0.4)
    ax.set_xlabel("night (session date)")
    return pos


def rank_ic(nightly: pd.DataFrame, colors: dict, title: str):
    """Per horizon: nightly IC bars and cumulative IC, per path."""
    ok = nightly[nightly["status"] == "ok"] if len(nightly) else nightly
    if not len(ok):
        return None
    horizons = sorted(ok["horizon"].unique())
    fig, axes = plt.subplots(len(horizons), 2, figsize=(12, 3.0 * len(horizons)),
                             squeeze=False, constrained_layout=True)
    nights = sorted(pd.to_datetime(ok["night"]).unique())
    for row, h in zip(axes, horizons):
        g_h = ok[ok["horizon"] == h]
        width = 0.8 / max(g_h["path"].nunique(), 1)
        pos = _night_axis(row[0], nights)
        _night_axis(row[1], nights)
        for k, (path, g) in enumerate(sorted(g_h.groupby("path"))):
            g = g.sort_values("night")
            x = np.array([pos[n] for n in pd.to_datetime(g["night"])])
            c = colors.get(path, "grey")
            row[0].bar(x + (k - 0.5) * width, g["ic"], width=width, color=c, label=path)
            row[1].plot(x, g["ic"].cumsum(), color=c, marker=".", label=path)
        row[0].axhline(0, color="grey", lw=0.8)
        row[0].set(title=f"nightly RankIC, {h}-session horizon", ylabel="Spearman IC")
        row[1].set(title=f"cumulative RankIC, {h}-session horizon", ylabel="sum of nightly IC")
        row[0].legend(fontsize=8)
    fig.suptitle(title)
    return fig


def grade_distribution(grades: pd.DataFrame, colors: dict, title: str):
    """Share of units per grade and failed, per path (each path's bars sum to 1)."""
    if not len(grades) or "path" not in grades:
        return None
    cols = [c for c in GRADE_COLUMNS if c in grades]
    fig, ax = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
    width = 0.8 / len(grades)
    for k, (_, r) in enumerate(grades.iterrows()):
        ax.bar(np.arange(len(cols)) + k * width, [float(r[c]) for c in cols], width=width,
               color=colors.get(r["path"], "grey"), label=f"{r['path']} ({int(r['units'])} units)")
    ax.set_xticks(np.arange(len(cols)) + width * (len(grades) - 1) / 2, cols)
    ax.set_ylim(0, 1)
    ax.set(ylabel="share of units", xlabel="grade (failed = no grade)", title=title)
    ax.legend()
    return fig


def speed_by_night(runs: pd.DataFrame, colors: dict, title: str):
    """Seconds per ticker by night on both bases (complete one-segment undisturbed runs
    only: a disturbed run's seconds are shown in the runs table, never plotted as a speed)."""
    timed = runs[runs["throughput_s"].notna()] if len(runs) else runs
    disturbed = timed["disturbed"].notna() if "disturbed" in timed else timed["path"].isna()
    ok = timed[~disturbed]
    if not len(ok):
        return None
    if disturbed.any():
        title += f" ({int(disturbed.sum())} disturbed run(s) left out, listed under run hygiene)"
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.4), constrained_layout=True)
    nights = sorted(pd.to_datetime(ok["night"]).unique())
    for ax in axes:
        pos = _night_axis(ax, nights)
    for path, g in ok.sort_values("night").groupby("path"):
        x = [pos[n] for n in pd.to_datetime(g["night"])]
        axes[0].plot(x, g["throughput_s"], marker="o", color=colors.get(path), label=path)
        axes[1].plot(x, g["slot_latency_s"], marker="o", color=colors.get(path), label=path)
    axes[0].set(title="throughput basis: run wall clock ÷ tickers", ylabel="s per ticker")
    axes[1].set(title="slot-latency basis: one unit's first to last call", ylabel="s per unit")
    for ax in axes:
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.suptitle(title)
    return fig


def quality_vs_speed(rank_ic_table: pd.DataFrame, speed: pd.DataFrame, colors: dict,
                     horizon: int, title: str):
    """Per path: the RankIC table's tested mean and interval (non-overlapping nights, as in
    the table) at the primary horizon against the speed table's median s/ticker. A path
    without an interval (insufficient nights) is drawn as a hollow point without bars."""
    t = rank_ic_table[rank_ic_table["horizon"] == horizon] if len(rank_ic_table) else rank_ic_table
    if not len(t) or not len(speed) or "throughput_s_per_ticker" not in speed:
        return None
    sec = speed.set_index("path")["throughput_s_per_ticker"]
    if not sec.reindex(t["path"]).notna().any():
        return None             # no path has a speed: an empty chart (and legend) says nothing
    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    for _, r in t.iterrows():
        x = sec.get(r["path"], np.nan)
        if pd.isna(x):
            continue
        c = colors.get(r["path"])
        if pd.notna(r["ci_low"]):
            y = r["tested_mean"]
            ax.errorbar([x], [y], yerr=[[y - r["ci_low"]], [r["ci_high"] - y]], fmt="o",
                        capsize=4, color=c, label=f"{r['path']} ({int(r['n_independent'])} "
                        f"non-overlapping nights, {r['ci_level']:.0%} CI)")
        else:
            ax.plot([x], [r["mean_ic"]], "o", mfc="none", color=c,
                    label=f"{r['path']}: no interval ({r['note']})")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xlabel="s per ticker, throughput basis (median of complete runs, real-scale)",
           ylabel=f"mean RankIC, h={horizon}", title=title)
    ax.set_xlim(left=0)
    ax.legend(fontsize=7)
    return fig


def draw_confusion(units: pd.DataFrame, path: str, title: str):
    """Draw 1 vs draw 2 grade counts on one path: how often two draws agree."""
    u = units[(units["path"] == path) & units["grade"].notna() & units["draw"].isin([1, 2])]
    wide = u.pivot_table(index=["night", "ticker"], columns="draw", values="grade",
                         aggfunc="first").dropna()
    if wide.shape[1] < 2 or not len(wide):
        return None
    m = np.zeros((5, 5))
    np.add.at(m, (wide[1].astype(int) - 1, wide[2].astype(int) - 1), 1)
    fig, ax = plt.subplots(figsize=(4, 3.6), constrained_layout=True)
    ax.imshow(m, cmap="Blues")
    for i in range(5):
        for j in range(5):
            ax.text(j, i, int(m[i, j]), ha="center", va="center", fontsize=8)
    ax.set_xticks(range(5), range(1, 6))
    ax.set_yticks(range(5), range(1, 6))
    ax.set(xlabel="grade, draw 2", ylabel="grade, draw 1", title=title)
    return fig
