"""Calibration of the project's tests and intervals on null panels shaped like the study.

Each replicate is a synthetic panel: 50 tickers, persistent grades (mean of 3 draws, 1-5, AR(1)
latent with night-to-night correlation 0.9) on two paths that share the latent (so their ICs
are correlated and ΔIC = 0 in truth), the candidate missing 2 random tickers a night, and
heavy-tailed daily returns (Student t, 4 df) independent of the grades (so the true IC is 0).
Nightly ICs of overlapping h-day forward returns come from the project's own `forward_returns`,
`nightly_rank_ic` and `paired_delta_ic`; the first n nights make the (h, n) cell.

Per cell: rejection rates at nominal 5% of the RankIC test (two-sided), the ΔIC test
(two-sided) and the non-inferiority test at its boundary (true ΔIC = -δ, one-sided), and the
coverage of nominal-95% intervals for the IC and ΔIC; "insufficient" where the project
refuses. For reference, `nw_reject`: the Newey-West t (Bartlett, lag h-1, normal critical
values) on the same RankIC series. Last line: `worst_reject=... worst_coverage=... cells=...`
over the cells the project reports (goals: <= 0.08 and >= 0.90).
Run: `python bench/calibration.py [--reps 1000]` (about a minute and a half at the default).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and would shadow the `evals` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import math

import numpy as np
import pandas as pd
from scipy import stats

from evals.compare import paired_delta_ic
from evals.inference import mean_test, noninferiority
from evals.rankic import nightly_rank_ic
from evals.returns import forward_returns

HORIZONS = [1, 5, 20]
NIGHTS = [10, 20, 40, 60, 120]
TICKERS, DRAWS, MARGIN = 50, 3, 0.03


def replicate(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(nightly RankIC of the baseline, paired ΔIC) over max(NIGHTS) nights, null true."""
    n = max(NIGHTS)
    days = pd.bdate_range("2027-01-04", periods=n + max(HORIZONS) + 1)
    names = np.array([f"T{i:02d}" for i in range(TICKERS)])
    daily = stats.t.rvs(4, size=(len(days), TICKERS), random_state=rng) * 0.01
    close = 100 * np.exp(np.cumsum(daily, axis=0))
    prices = pd.DataFrame({"ticker": np.tile(names, len(days)), "date": np.repeat(days, TICKERS),
                           "adj_close": close.ravel()})
    latent = np.empty((n, TICKERS))
    latent[0] = rng.normal(size=TICKERS)
    for t in range(1, n):                       # grades move slowly from night to night
        latent[t] = 0.9 * latent[t - 1] + math.sqrt(1 - 0.81) * rng.normal(size=TICKERS)
    frames = []
    for path in ("main", "backup"):
        draws = np.clip(np.round(3 + latent[:, :, None] + rng.normal(0, 0.8, (n, TICKERS, DRAWS))),
                        1, 5)
        f = pd.DataFrame({"night": np.repeat(days[:n], TICKERS), "path": path,
                          "ticker": np.tile(names, n), "score": draws.mean(axis=2).ravel(),
                          "n_draws": DRAWS, "n_failed": 0})
        if path == "backup":                    # the candidate loses 2 tickers a night
            lost = rng.random((n, TICKERS)).argsort(axis=1)[:, :2]
            drop = np.zeros((n, TICKERS), dtype=bool)
            np.put_along_axis(drop, lost, True, axis=1)
            f = f[~drop.ravel()]
        frames.append(f)
    scores = pd.concat(frames, ignore_index=True)
    returns = forward_returns(prices, list(days[:n]), HORIZONS)
    ic = nightly_rank_ic(scores[scores["path"] == "main"], returns)
    return ic[ic["status"] == "ok"], paired_delta_ic(scores, returns, "main", "backup")


def newey_west_reject(x: np.ndarray, lag: int) -> bool:
    n = len(x)
    d = x - x.mean()
    v = d @ d / n
    for j in range(1, min(lag, n - 1) + 1):
        v += 2 * (1 - j / (lag + 1)) * (d[j:] @ d[:-j]) / n
    return v > 0 and abs(x.mean() / math.sqrt(v / n)) > 1.959964


def run(reps: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    tally: dict[tuple[int, int], dict[str, list]] = {}
    for _ in range(reps):
        ic, delta = replicate(rng)
        for h in HORIZONS:
            ih = ic[ic["horizon"] == h].sort_values("night")
            dh = delta[delta["horizon"] == h].sort_values("night")
            for n in NIGHTS:
                i, d = ih.iloc[:n], dh.iloc[:n]
                t_ic = mean_test(i["ic"].to_numpy(), h, i["start_pos"].to_numpy())
                t_d = mean_test(d["delta"].to_numpy(), h, d["start_pos"].to_numpy())
                ni = noninferiority(d["delta"].to_numpy() - MARGIN, h, MARGIN, 0.05,
                                    d["start_pos"].to_numpy())
                c = tally.setdefault((h, n), {k: [] for k in (
                    "reported", "ic_reject", "delta_reject", "ni_reject", "ic_cover",
                    "delta_cover", "nw_reject")})
                c["reported"].append(not t_ic["note"].startswith("insufficient"))
                c["ic_reject"].append(t_ic["p"] < 0.05)
                c["delta_reject"].append(t_d["p"] < 0.05)
                c["ni_reject"].append(ni["verdict"] == "non-inferior")
                c["ic_cover"].append(t_ic["ci_low"] <= 0 <= t_ic["ci_high"])
                c["delta_cover"].append(t_d["ci_low"] <= 0 <= t_d["ci_high"])
                c["nw_reject"].append(newey_west_reject(i["ic"].to_numpy(), max(h - 1, 1)))
    rows = []
    for (h, n), c in sorted(tally.items()):
        rep = all(c["reported"])
        row = {"h": h, "n": n, "status": "reported" if rep else "insufficient"}
        for k in ("ic_reject", "delta_reject", "ni_reject", "ic_cover", "delta_cover"):
            row[k] = float(np.mean(c[k])) if rep else math.nan
        row["nw_reject"] = float(np.mean(c["nw_reject"]))
        rows.append(row)
    return pd.DataFrame(rows)


def main(reps: int, seed: int) -> None:
    table = run(reps, seed)
    with pd.option_context("display.width", 160, "display.float_format", "{:.3f}".format):
        print(f"{reps} null replicates per cell; nominal: reject 0.05, cover 0.95")
        print(table.to_string(index=False, na_rep="insufficient"))
    done = table[table["status"] == "reported"]
    worst_reject = done[["ic_reject", "delta_reject", "ni_reject"]].to_numpy().max()
    worst_cover = done[["ic_cover", "delta_cover"]].to_numpy().min()
    print(f"worst_reject={worst_reject:.3f} worst_coverage={worst_cover:.3f} cells={len(done)}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=20270104)
    a = ap.parse_args()
    main(a.reps, a.seed)
