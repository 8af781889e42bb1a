"""The report's figures, each a PNG data URI (or None with a stated "no data yet").

One colour per path throughout; every axis labelled with its unit and basis; uncertainty
drawn where there is one; titles name the experiment, the date range and the nights.
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


def path_colors(paths: list[str]) -> dict[str, str]:
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(sorted(paths))}


def uri_of(fig) -> str:
    """A matplotlib figure as an inline PNG data URI (the figure is closed)."""
    return _uri(fig)


def _uri(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def rank_ic(nightly: pd.DataFrame, colors: dict, title: str) -> str | None:
    """Per horizon: nightly IC bars, a 5-night rolling mean with a ±1 s.e. band, cumulative IC."""
    ok = nightly[nightly["status"] == "ok"] if len(nightly) else nightly
    if not len(ok):
        return None
    horizons = sorted(ok["horizon"].unique())
    fig, axes = plt.subplots(len(horizons), 2, figsize=(12, 3.2 * len(horizons)),
                             squeeze=False, constrained_layout=True)
    for row, h in zip(axes, horizons):
        g_h = ok[ok["horizon"] == h]
        width = 0.8 / max(g_h["path"].nunique(), 1)
        for k, (path, g) in enumerate(sorted(g_h.groupby("path"))):
            g = g.sort_values("night")
            x = pd.to_datetime(g["night"])
            c = colors.get(path, "grey")
            row[0].bar(x + pd.to_timedelta(k * width, "D"), g["ic"], width=width, color=c,
                       alpha=0.35)
            roll = g["ic"].rolling(5, min_periods=2)
            mean, se = roll.mean(), roll.std() / np.sqrt(roll.count())
            row[0].plot(x, mean, color=c, label=f"{path} (5-night mean ± 1 s.e.)")
            row[0].fill_between(x, mean - se, mean + se, color=c, alpha=0.15)
            row[1].plot(x, g["ic"].cumsum(), color=c, marker=".", label=path)
        row[0].axhline(0, color="grey", lw=0.8)
        row[0].set(title=f"nightly RankIC, {h}-session horizon", ylabel="Spearman IC",
                   xlabel="night (session date)")
        row[1].set(title=f"cumulative RankIC, {h}-session horizon", ylabel="sum of nightly IC",
                   xlabel="night (session date)")
        row[0].legend(fontsize=8)
        for ax in row:
            ax.tick_params(axis="x", rotation=30)
    fig.suptitle(title)
    return _uri(fig)


def grade_distribution(grades: pd.DataFrame, colors: dict, title: str) -> str | None:
    """Share of units per grade and failed, per path."""
    if not len(grades) or "path" not in grades:
        return None
    cols = [c for c in grades.columns if c != "path"]
    fig, ax = plt.subplots(figsize=(7, 3.2), constrained_layout=True)
    width = 0.8 / len(grades)
    for k, (_, r) in enumerate(grades.iterrows()):
        ax.bar(np.arange(len(cols)) + k * width, [float(r[c]) for c in cols], width=width,
               color=colors.get(r["path"], "grey"), label=r["path"])
    ax.set_xticks(np.arange(len(cols)) + width * (len(grades) - 1) / 2, [str(c) for c in cols])
    ax.set(ylabel="share of units", xlabel="grade (failed = no grade)", title=title)
    ax.legend()
    return _uri(fig)


def speed_by_night(runs: pd.DataFrame, colors: dict, title: str) -> str | None:
    """Seconds per ticker by night on both bases (complete one-segment runs only)."""
    ok = runs[runs["throughput_s"].notna()] if len(runs) else runs
    if not len(ok):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.4), constrained_layout=True)
    for path, g in ok.sort_values("night").groupby("path"):
        x = pd.to_datetime(g["night"])
        axes[0].plot(x, g["throughput_s"], marker="o", color=colors.get(path), label=path)
        axes[1].plot(x, g["slot_latency_s"], marker="o", color=colors.get(path), label=path)
    axes[0].set(title="throughput basis: run wall clock ÷ tickers", ylabel="s per ticker")
    axes[1].set(title="slot-latency basis: one unit's first to last call", ylabel="s per unit")
    for ax in axes:
        ax.set_ylim(bottom=0)
        ax.legend()
        ax.tick_params(axis="x", rotation=30)
    fig.suptitle(title)
    return _uri(fig)


def quality_vs_speed(ic: pd.DataFrame, speed: pd.DataFrame, colors: dict,
                     horizon: int, title: str) -> str | None:
    """Mean RankIC against seconds per ticker, per path, with ±1.96 s.e. of the mean IC."""
    ok = ic[(ic["status"] == "ok") & (ic["horizon"] == horizon)] if len(ic) else ic
    if not len(ok) or not len(speed) or "throughput_s_per_ticker" not in speed:
        return None
    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    for path, g in ok.groupby("path"):
        s = speed.loc[speed["path"] == path, "throughput_s_per_ticker"]
        if s.empty or pd.isna(s.iloc[0]):
            continue
        se = g["ic"].std(ddof=1) / np.sqrt(len(g)) if len(g) > 1 else np.nan
        ax.errorbar(s.iloc[0], g["ic"].mean(), yerr=1.96 * se, fmt="o", capsize=4,
                    color=colors.get(path), label=f"{path} (n={len(g)} nights)")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xlabel="s per ticker, throughput basis (median of complete runs)",
           ylabel=f"mean RankIC, h={horizon} (±1.96 s.e., iid)", title=title)
    ax.set_xlim(left=0)
    ax.legend(fontsize=8)
    return _uri(fig)


def draw_confusion(units: pd.DataFrame, path: str, title: str) -> str | None:
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
    return _uri(fig)
