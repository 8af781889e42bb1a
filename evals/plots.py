"""One figure of the comparison: RankIC over nights, ΔIC, and per-ticker seconds.

Takes a `evals.report.Metrics`. matplotlib's non-interactive backend: files only.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import pandas as pd  # noqa: E402


def _missing(ax, why: str) -> None:
    """An empty panel says what is missing and why (never a blank axis, nor a legend of
    nothing, which matplotlib warns about)."""
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="grey")


def plot_comparison(m, out: Path, horizon: int = 1) -> Path:
    """Write a PNG: cumulative mean RankIC per path, nightly ΔIC, seconds per ticker by night."""
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), constrained_layout=True)
    ic = m.nightly_ic[(m.nightly_ic["horizon"] == horizon) & (m.nightly_ic["status"] == "ok")]
    ax = axes[0]
    for path, g in ic.sort_values("night").groupby("path"):
        cum = g["ic"].expanding().mean()
        ax.plot(pd.to_datetime(g["night"]), cum, marker=".", label=path)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_title(f"RankIC, {horizon}-day horizon: running mean over nights")
    if len(ic):
        ax.legend()
    else:
        _missing(ax, "no RankIC yet: no night's forward returns are in")
    ax = axes[1]
    paired = getattr(m, "nightly_delta", pd.DataFrame())
    if len(paired) and len(m.comparison) and "candidate" in m.comparison:
        base, cand = m.comparison.iloc[0]["baseline"], m.comparison.iloc[0]["candidate"]
        d = paired[paired["horizon"] == horizon].set_index("night")["delta"].sort_index()
        ax.bar(pd.to_datetime(d.index), d.values,
               color=["tab:blue" if v >= 0 else "tab:red" for v in d.values])
        ax.set_title(f"nightly ΔIC = IC({cand}) − IC({base}) on common tickers, "
                     f"mean {d.mean():+.3f}")
    else:
        _missing(ax, "no ΔIC yet: no night with both paths' RankIC")
    ax.axhline(0, color="grey", lw=0.8)
    ax = axes[2]
    runs = m.speed_runs[m.speed_runs["is_result"]] if len(m.speed_runs) else m.speed_runs
    for path, g in runs.sort_values("night").groupby("path") if len(runs) else []:
        ax.plot(pd.to_datetime(g["night"]), g["throughput_s_per_ticker"], marker="o", label=path)
    ax.set_title("s/ticker, throughput basis (run wall clock ÷ tickers)")
    ax.set_ylim(bottom=0)
    if len(runs):
        ax.legend()
    else:
        _missing(ax, "no speed: no complete, undisturbed run\n(`dualpath runs` says why)")
    for ax in axes:
        ax.tick_params(axis="x", rotation=30)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
