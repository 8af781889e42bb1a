"""The report's signal views, as alphalens' tear sheets draw them: an IC histogram per path,
a weekly IC heatmap, the nightly ΔIC with its running interval, and returns by grade.

Each function returns a matplotlib Figure, or None with nothing to draw (the report then
prints a line saying what is missing and why: `MISSING`). They draw the report's own
frames: `nightly_ic` (`evals.rankic.NIGHTLY`), `nightly_delta` (`evals.compare.PAIRED`) and
`by_grade` (the registered table), so a bar or a cell is a number the tables also hold.
The running interval of ΔIC is the comparison table's own test (`evals.inference.delta_test`,
non-overlapping nights) recomputed on the nights up to each one: a fixed-n interval at each
night, never a confidence sequence, so watching it cross a line decides nothing.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from dualpath.evals.inference import delta_test  # noqa: E402

MISSING = {
    "ic_histogram": "no IC histogram: no night's forward return has matured yet",
    "ic_heatmap": "no weekly IC heatmap: no night's forward return has matured yet",
    "delta_ic": "no nightly ΔIC: no matured night on which both paths graded the same tickers",
    "by_grade": "no returns by grade: no matured forward return yet",
}


def _matured(nightly: pd.DataFrame, horizon: int) -> pd.DataFrame:
    if not len(nightly) or "status" not in nightly:
        return nightly.iloc[0:0] if len(nightly.columns) else pd.DataFrame()
    ok = nightly[(nightly["status"] == "ok") & (nightly["horizon"] == horizon)]
    return ok.dropna(subset=["ic"])


def ic_histogram(nightly: pd.DataFrame, colors: dict, horizon: int, title: str):
    """Per path: the distribution of nightly RankIC at ``horizon``, its mean marked."""
    ok = _matured(nightly, horizon)
    if not len(ok):
        return None
    paths = sorted(ok["path"].unique())
    fig, axes = plt.subplots(1, len(paths), figsize=(5.5 * len(paths), 3.2), squeeze=False,
                             sharex=True, sharey=True, constrained_layout=True)
    lo, hi = float(ok["ic"].min()), float(ok["ic"].max())
    bins = np.linspace(min(lo, -hi, -0.05), max(hi, -lo, 0.05), 16)
    for ax, path in zip(axes[0], paths):
        ic = ok.loc[ok["path"] == path, "ic"]
        ax.hist(ic, bins=bins, color=colors.get(path, "grey"), alpha=0.85)
        ax.axvline(ic.mean(), color="black", ls="--", lw=1,
                   label=f"mean {ic.mean():+.3f} ({len(ic)} nights)")
        ax.axvline(0, color="grey", lw=0.8)
        ax.set(title=f"{path}: nightly RankIC, h={horizon}", xlabel="Spearman IC",
               ylabel="nights")
        ax.legend(fontsize=8)
    fig.suptitle(title)
    return fig


def weekly_ic(nightly: pd.DataFrame, horizon: int) -> pd.DataFrame:
    """Mean nightly IC and night count per path × ISO week (alphalens' monthly heatmap, by
    week: an experiment of 4-6 weeks has one or two months)."""
    ok = _matured(nightly, horizon)
    if not len(ok):
        return pd.DataFrame(columns=["path", "week", "mean_ic", "nights"])
    iso = pd.to_datetime(ok["night"]).dt.isocalendar()
    week = iso["year"].astype(str) + "-W" + iso["week"].astype(str).str.zfill(2)
    return (ok.assign(week=week).groupby(["path", "week"], as_index=False)
            .agg(mean_ic=("ic", "mean"), nights=("ic", "size")))


def ic_heatmap(nightly: pd.DataFrame, horizon: int, title: str):
    """Path × ISO week: mean nightly RankIC, each cell labelled with its mean and nights."""
    w = weekly_ic(nightly, horizon)
    if not len(w):
        return None
    mean = w.pivot(index="path", columns="week", values="mean_ic")
    n = w.pivot(index="path", columns="week", values="nights")
    lim = max(float(np.nanmax(np.abs(mean.to_numpy()))), 0.01)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.4 * mean.shape[1] + 2), 0.9 * len(mean) + 1.6),
                           constrained_layout=True)
    im = ax.imshow(mean.to_numpy(dtype=float), cmap="RdYlGn", vmin=-lim, vmax=lim,
                   aspect="auto")
    for i in range(mean.shape[0]):
        for j in range(mean.shape[1]):
            if pd.notna(mean.iat[i, j]):
                ax.text(j, i, f"{mean.iat[i, j]:+.3f}\n{int(n.iat[i, j])} n", ha="center",
                        va="center", fontsize=8)
    ax.set_xticks(range(mean.shape[1]), list(mean.columns))
    ax.set_yticks(range(mean.shape[0]), list(mean.index))
    ax.set(xlabel="ISO week of the night", title=title)
    fig.colorbar(im, ax=ax, label=f"mean RankIC, h={horizon}")
    return fig


def running_delta(delta: pd.DataFrame, horizon: int, test: str, margin: float,
                  alpha: float) -> pd.DataFrame:
    """Per night at ``horizon``: its ΔIC and the comparison's test on the nights up to it
    (tested_mean, ci_low, ci_high; NaN while it has too few non-overlapping nights)."""
    d = delta[delta["horizon"] == horizon].dropna(subset=["delta"]).sort_values("night") \
        if len(delta) else delta
    rows = []
    for k in range(len(d)):
        head = d.iloc[: k + 1]
        t = delta_test(head["delta"].to_numpy(float), horizon, test, margin, alpha,
                       head["start_pos"].to_numpy())
        rows.append({"night": d["night"].iloc[k], "delta": float(d["delta"].iloc[k]),
                     "tested_mean": t["tested_mean"], "ci_low": t["ci_low"],
                     "ci_high": t["ci_high"], "ci_level": t["ci_level"]})
    return pd.DataFrame(rows, columns=["night", "delta", "tested_mean", "ci_low", "ci_high",
                                       "ci_level"])


def delta_ic(delta: pd.DataFrame, horizon: int, test: str, margin: float, alpha: float,
             pair: tuple[str, str], title: str):
    """Nightly ΔIC = IC(candidate) − IC(baseline) as bars, the running estimate and interval
    of the planned test as a line and band, 0 and −δ as reference lines."""
    r = running_delta(delta, horizon, test, margin, alpha)
    if not len(r):
        return None
    fig, ax = plt.subplots(figsize=(12, 3.4), constrained_layout=True)
    x = np.arange(len(r))
    ax.bar(x, r["delta"], color="#9e9e9e", label="nightly ΔIC")
    band = r["ci_low"].notna()
    if band.any():
        level = float(r["ci_level"].iloc[-1])
        ax.plot(x[band], r.loc[band, "tested_mean"], color="#1f77b4",
                label="running estimate (non-overlapping nights)")
        ax.fill_between(x[band], r.loc[band, "ci_low"], r.loc[band, "ci_high"],
                        color="#1f77b4", alpha=0.2, label=f"running {level:.0%} interval")
    ax.axhline(0, color="grey", lw=0.8)
    ax.axhline(-margin, color="#c62828", ls="--", lw=1, label=f"−δ = {-margin:+.3f}")
    step = max(1, len(r) // 10)
    ax.set_xticks(x[::step], [pd.Timestamp(n).date().isoformat() for n in r["night"][::step]],
                  rotation=30, ha="right")
    ax.set(xlabel="night (session date)", ylabel=f"ΔIC, h={horizon}",
           title=f"{title}: IC({pair[1]}) − IC({pair[0]})"
           + ("" if band.any() else " — no interval yet (too few non-overlapping nights)"))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))   # beside, not on, bars
    return fig


def returns_by_grade(by_grade: pd.DataFrame, colors: dict, title: str):
    """Per horizon: mean forward return by grade, one bar per path (the by_grade table)."""
    if not len(by_grade) or "mean_fwd_return" not in by_grade:
        return None
    horizons = sorted(by_grade["horizon"].unique())
    fig, axes = plt.subplots(1, len(horizons), figsize=(4.8 * len(horizons), 3.2),
                             squeeze=False, constrained_layout=True)
    paths = sorted(by_grade["path"].unique())
    width = 0.8 / len(paths)
    for ax, h in zip(axes[0], horizons):
        g_h = by_grade[by_grade["horizon"] == h]
        for k, path in enumerate(paths):
            g = g_h[g_h["path"] == path].sort_values("grade")
            ax.bar(g["grade"].astype(float) + (k - (len(paths) - 1) / 2) * width,
                   g["mean_fwd_return"], width=width, color=colors.get(path, "grey"),
                   label=f"{path} ({int(g['ticker_nights'].sum())} ticker-nights)")
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(range(1, 6))
        ax.set(title=f"h={h} sessions", xlabel="grade (mean score rounded)",
               ylabel="mean forward return")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncols=len(paths))
    fig.suptitle(title)
    return fig
