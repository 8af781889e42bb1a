"""The sweep figure: aggregate decode vs slots with the knee marked, per-ticker seconds on
both bases, failed and tentative points shown as what they are.

Takes a `evals.sweep.verdicts` table. matplotlib's non-interactive backend: files only.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import pandas as pd  # noqa: E402

from dualpath.evals.sweep import BASIS, READY  # noqa: E402


def _group(label: str) -> str:
    """The point's settings other than its slot count: one line per group."""
    parts = [p for p in str(label).split(", ") if not p.startswith(("-np=", "--parallel=",
                                                                     "--slots="))]
    return ", ".join(parts) or "base"


def plot_sweep(table: pd.DataFrame, out: Path, title: str) -> Path:
    """Write a PNG of the sweep (see the module docstring)."""
    fig = sweep_figure(table, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def sweep_figure(table: pd.DataFrame, title: str):
    """The sweep's figure (the caller saves and closes it)."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    ax = axes[0]
    ready = table[table["status"] == READY]
    for name, g in ready.assign(group=ready["label"].map(_group)).groupby("group"):
        g = g.sort_values("slots")
        ax.plot(g["slots"], g["decode_tps"], marker="o", label=name)
    knee = table[table["is_knee"]]
    if not knee.empty:
        k = knee.iloc[0]
        ax.scatter([k["slots"]], [k["decode_tps"]], s=220, facecolors="none",
                   edgecolors="red", linewidths=2, zorder=5,
                   label=f"knee: {int(k['slots'])} slots ({k['label']})")
    for _, r in table[table["status"] != READY].iterrows():
        mark, text = ("x", "failed to start") if r["verdict"] == "failed" else ("s", "tentative")
        ax.scatter([r["slots"]], [0], marker=mark, color="grey", zorder=4)
        ax.annotate(f"{text}: {r['label']}", (r["slots"], 0), textcoords="offset points",
                    xytext=(4, 6), fontsize=7, rotation=20, color="grey")
    ax.set_xlabel("parallel slots")
    ax.set_ylabel("tok/s")
    ax.set_title(BASIS, fontsize=9)
    # slots are whole numbers: one tick per slot count swept, never 2.5
    slots = sorted({int(v) for v in table["slots"].dropna()})
    if slots:
        ax.set_xticks(slots)
        ax.set_xlim(min(slots) - 0.5, max(slots) + 0.5)
    # room above the best point so the knee's ring is never cut by the frame
    top = pd.to_numeric(ready["decode_tps"], errors="coerce").max()
    ax.set_ylim(0, top * 1.15 if pd.notna(top) and top > 0 else None)
    ax.legend(fontsize=7)
    ax = axes[1]
    shown = ready.sort_values(["slots", "label"])
    xs = range(len(shown))
    ax.bar([x - 0.2 for x in xs], shown["ticker_s_throughput"], width=0.4,
           label="throughput basis (replay wall clock ÷ tickers)")
    ax.bar([x + 0.2 for x in xs], shown["ticker_s_latency"], width=0.4,
           label="slot-latency basis (median unit: first call to last call)")
    ax.set_xticks(list(xs), [str(lbl) for lbl in shown["label"]], rotation=30, fontsize=7,
                  ha="right")
    ax.set_ylabel("s/ticker (real-scale)")
    ax.set_title("per-ticker seconds, both bases (ready points only)", fontsize=9)
    ax.legend(fontsize=7)
    fig.suptitle(title)
    return fig
