"""RankIC benchmark: the project's nightly RankIC vs alphalens-reloaded's
`factor_information_coefficient` on a gap-free panel (100 tickers x 250 nights, horizons
1/5/20), both timed on the same scores and forward returns, interleaved 3 times (medians).

Needs the bench extra: `pip install -e '.[bench]'`. Run: `python bench/rankic.py`.
Last line: `ratio_vs_alphalens=... max_abs_diff=...` (goals: <= 0.05 and <= 1e-12).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and would shadow the `evals` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import time
import warnings

import numpy as np
import pandas as pd

from dualpath.evals.rankic import nightly_rank_ic
from dualpath.evals.returns import forward_returns

HORIZONS = [1, 5, 20]


def panel(tickers: int, nights: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, list]:
    """(prices, scores) with grades that carry a little signal and many ties."""
    rng = np.random.default_rng(seed)
    days = pd.bdate_range("2026-01-05", periods=nights + max(HORIZONS) + 1)
    names = [f"T{i:03d}" for i in range(tickers)]
    steps = rng.normal(0, 0.015, (len(days), tickers))
    close = 100 * np.exp(np.cumsum(steps, axis=0))
    prices = pd.DataFrame({"ticker": np.tile(names, len(days)), "date": np.repeat(days, tickers),
                           "adj_close": close.ravel()})
    # the score of night t leans on the next 5 days' return, then is rounded: ties as in grades
    ahead = np.vstack([close[5:] / close[:-5] - 1, np.zeros((5, tickers))])[:nights]
    raw = ahead * 40 + rng.normal(0, 1, (nights, tickers)) + 3
    mean_of_draws = np.clip(np.round(raw * 3) / 3, 1, 5)
    scores = pd.DataFrame({"night": np.repeat(days[:nights], tickers),
                           "path": "main", "ticker": np.tile(names, nights),
                           "score": mean_of_draws.ravel(), "n_draws": 3, "n_failed": 0})
    return prices, scores, list(days[:nights])


def alphalens_input(scores: pd.DataFrame, returns: pd.DataFrame) -> pd.DataFrame:
    wide = returns.pivot_table(index=["night", "ticker"], columns="horizon", values="fwd_return")
    wide.columns = [f"{h}D" for h in wide.columns]
    f = scores.set_index(["night", "ticker"])[["score"]].rename(columns={"score": "factor"})
    data = f.join(wide, how="inner")
    data.index = data.index.set_names(["date", "asset"])
    return data


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main(tickers: int, nights: int, rounds: int, seed: int) -> None:
    from alphalens.performance import factor_information_coefficient

    prices, scores, night_list = panel(tickers, nights, seed)
    returns = forward_returns(prices, night_list, HORIZONS)
    assert (returns["status"] == "ok").all(), "the panel must be gap-free and matured"
    factor_data = alphalens_input(scores, returns)
    ours_t, theirs_t, fwd_t = [], [], []
    for _ in range(rounds):            # interleaved: drift in machine load hits both alike
        t, ours = timed(nightly_rank_ic, scores, returns)
        ours_t.append(t)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t, ref = timed(factor_information_coefficient, factor_data)
        theirs_t.append(t)
        fwd_t.append(timed(forward_returns, prices, night_list, HORIZONS)[0])
    got = ours.pivot(index="night", columns="horizon", values="ic")
    got.columns = [f"{h}D" for h in got.columns]
    diff = float(np.nanmax(np.abs(got.to_numpy() - ref[got.columns].loc[got.index].to_numpy())))
    o, a = float(np.median(ours_t)), float(np.median(theirs_t))
    print(f"panel: {tickers} tickers x {nights} nights x horizons {HORIZONS}; {rounds} rounds")
    print(f"nightly RankIC: ours {o * 1e3:.1f} ms, alphalens {a * 1e3:.1f} ms (medians)")
    print(f"forward returns (ours, all horizons): {np.median(fwd_t) * 1e3:.1f} ms")
    print(f"ratio_vs_alphalens={o / a:.4f} max_abs_diff={diff:.2e}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tickers", type=int, default=100)
    ap.add_argument("--nights", type=int, default=250)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    main(a.tickers, a.nights, a.rounds, a.seed)
