"""Calibration and power of the project's tests on panels shaped like the study.

Each replicate is a synthetic panel: 50 tickers, persistent grades (mean of 3 draws, 1-5, AR(1)
latent with night-to-night correlation 0.9) on two paths that share the latent (so their ICs
are correlated and ΔIC = 0 in truth), the candidate missing 2 random tickers a night, and
heavy-tailed daily returns (Student t, 4 df) independent of the grades (so the true IC is 0);
nights are consecutive sessions, so h-session forward returns of neighbouring nights overlap.

Per (h, n) cell: rejection rates at nominal 5% of the RankIC test (two-sided), the ΔIC test
(two-sided) and the non-inferiority test at its boundary (true ΔIC = -δ, one-sided), and the
coverage of nominal-95% intervals for the IC and ΔIC; "insufficient" where the project
refuses. For reference, `nw_reject`: the Newey-West t (Bartlett, lag h-1, normal critical
values) on every night of the RankIC series.

Power (h = 1 and 5; 20 and 30 nights; δ = POWER_MARGIN): the simulated share of panels the
non-inferiority test declares non-inferior when the true ΔIC is 0 (`sim_ni_0`) and inferior
when it is -2δ (`sim_inf_m2d`; the panel's ΔIC shifted by -2δ), beside what the plan predicts
(`evals.power`, from the sd of one night's ΔIC pooled over every simulated night, as a long
pilot would estimate it) and `plugin_ni_0`, the mean power computed from each panel's own sd.

The panels are simulated for all replicates at once with numpy (ranks with ties along the
ticker axis); `check_against_project` recomputes a few replicates with the project's own
`forward_returns`, `nightly_rank_ic`, `paired_delta_ic` and `delta_test` and requires equal
results. The interchangeability test's cells and power follow (`bench/calibration_icr.py`), then
the slowdown interval's coverage under night-to-night drift and clustered runaways
(`bench/calibration_speed.py`), then the claimed vs delivered power of plans drafted from a
5- and a 10-night pilot (`bench/calibration_pilot.py`), then the interchangeability test's
size and the pilot planner's delivered power on the three generating processes of
`bench/dgps.py` (`bench/calibration_dgps.py`), the worst of them.
Last line: `worst_reject=… worst_coverage=… cells=… worst_power_gap=… worst_seq_reject=…
icr_worst_reject=… icr_worst_coverage=… nights_to_decide_equal=… nights_to_decide_noise=…
nights_to_decide_noise_main3=… noise_rate_gap=… slowdown_drift_coverage=… pilot5_power_gap=…
pilot10_power_gap=… dgps=… icr_seq_size_20=… icr_seq_size_100=… planner_power_worst=…`
(goals <= 0.08, >= 0.90, <= 0.05, <= α + 0.01, <= 0.08, >= 0.90, <= 10,
<= 10, <= 10, <= 0.05, >= 0.92, <= 0.05, <= 0.05, >= 3, <= 0.06, <= 0.06, >= 0.78; the
`nights_to_decide_*` figures are the Gaussian DGP's, the kindest: a plan's nights come from
its pilot; `_main3`: 3 draws on main, 2 on backup;
`noise_rate_gap`: the headline's noise-backup rate vs simulation; the
sequential rows also give the expected stopping night when equal and when noise). Run:
`python bench/calibration.py [--reps 2000] [--quick]` (415 s at the default on 2 cores shared
at a load of 17-19 before the DGP section; `--quick`, which the test runs, is 60 replicates
and one pilot a DGP). At the default, 2026-12-03: `worst_reject=0.059
worst_coverage=0.941 cells=12 worst_power_gap=0.010 worst_seq_reject=0.055
icr_worst_reject=0.055 icr_worst_coverage=0.940 nights_to_decide_equal=9
nights_to_decide_noise=12 nights_to_decide_noise_main3=8 noise_rate_gap=0.010
slowdown_drift_coverage=0.922 pilot5_power_gap=0.004 pilot10_power_gap=0.018` (the noise
decision at 2 x 2 draws misses its 10 nights: `bench/calibration_icr.py`'s
`why_noise_is_slower`). At --reps 1000, 2026-12-06 (1,218 s at a load of ~12 on 2 cores):
`... dgps=3 icr_seq_size_20=0.048 icr_seq_size_100=0.057 planner_power_worst=0.950`.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this folder comes first on sys.path and would shadow the `evals` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse
import math
import time

import numpy as np
import pandas as pd
from scipy import stats

from dualpath.evals import power as pw
from dualpath.evals.inference import MIN_INDEPENDENT
from dualpath.evals.rankic import spearman_rows

HORIZONS = [1, 5, 20]
NIGHTS = [10, 20, 30, 40, 60, 120]
POWER_CELLS = [(1, 20), (1, 30), (5, 20), (5, 30)]
TICKERS, DRAWS, MARGIN, POWER_MARGIN, ALPHA = 50, 3, 0.03, 0.05, 0.05
LOST = 2


def simulate(rng: np.random.Generator, reps: int) -> dict:
    """Arrays for `reps` panels: daily returns, both paths' scores, the candidate's gaps."""
    n, days = max(NIGHTS), max(NIGHTS) + max(HORIZONS) + 1
    daily = stats.t.rvs(4, size=(reps, days, TICKERS), random_state=rng) * 0.01
    latent = np.empty((reps, n, TICKERS))
    latent[:, 0] = rng.normal(size=(reps, TICKERS))
    for t in range(1, n):                       # grades move slowly from night to night
        latent[:, t] = 0.9 * latent[:, t - 1] + math.sqrt(1 - 0.81) * rng.normal(
            size=(reps, TICKERS))
    scores = []
    for _ in ("main", "backup"):
        draws = np.clip(np.round(3 + latent[..., None]
                                 + rng.normal(0, 0.8, (reps, n, TICKERS, DRAWS))), 1, 5)
        scores.append(draws.mean(axis=3))
    lost = rng.random((reps, n, TICKERS)).argsort(axis=2)[..., :LOST]
    drop = np.zeros((reps, n, TICKERS), dtype=bool)
    np.put_along_axis(drop, lost, True, axis=2)
    return {"daily": daily, "main": scores[0], "backup": scores[1], "drop": drop}


def close_prices(daily: np.ndarray) -> np.ndarray:
    return 100 * np.exp(np.cumsum(daily, axis=-2))


def ics(sim: dict) -> dict:
    """{h: (baseline IC, ΔIC)} arrays of shape (reps, nights), as the project computes them."""
    close = close_prices(sim["daily"])
    reps, n = sim["main"].shape[:2]
    out = {}
    for h in HORIZONS:
        fwd = close[:, h:h + n] / close[:, :n] - 1            # night t: close t -> t + h
        flat = lambda a: a.reshape(reps * n, TICKERS)
        ic_main, _ = spearman_rows(flat(sim["main"]), flat(fwd))
        common = ~flat(sim["drop"])
        on = lambda a: np.where(common, flat(a), np.nan)
        ib, _ = spearman_rows(on(sim["main"]), on(fwd))
        ic, _ = spearman_rows(on(sim["backup"]), on(fwd))
        out[h] = (ic_main.reshape(reps, n), (ic - ib).reshape(reps, n))
    return out


def t_rows(x: np.ndarray, level: float) -> dict:
    """Row-wise one-sample t: mean, se, df and the two-sided `level` half-width."""
    m = x.shape[1]
    mean, sd = x.mean(axis=1), x.std(axis=1, ddof=1)
    se = sd / math.sqrt(m)
    q = stats.t.ppf(1 - (1 - level) / 2, m - 1)
    return {"mean": mean, "sd": sd, "se": se, "half": q * se, "df": m - 1, "m": m}


def newey_west_reject(x: np.ndarray, lag: int) -> np.ndarray:
    n = x.shape[1]
    d = x - x.mean(axis=1, keepdims=True)
    v = (d * d).sum(axis=1) / n
    for j in range(1, min(lag, n - 1) + 1):
        v = v + 2 * (1 - j / (lag + 1)) * (d[:, j:] * d[:, :-j]).sum(axis=1) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        return (v > 0) & (np.abs(x.mean(axis=1) / np.sqrt(v / n)) > 1.959964)


def cell(ic: np.ndarray, delta: np.ndarray, h: int, n: int) -> dict:
    """One (h, n) cell's size and coverage over the replicates."""
    idx = np.arange(0, n, h)                   # consecutive sessions: every h-th night
    row = {"h": h, "n": n, "m": len(idx)}
    if len(idx) < MIN_INDEPENDENT:
        return {**row, "status": "insufficient",
                "nw_reject": float(newey_west_reject(ic[:, :n], max(h - 1, 1)).mean())}
    ti, td = t_rows(ic[:, idx], 0.95), t_rows(delta[:, idx], 0.95)
    q1 = stats.t.ppf(1 - ALPHA, len(idx) - 1)
    ni = t_rows(delta[:, idx] - MARGIN, 0.95)  # at the boundary: true ΔIC = -δ
    return {**row, "status": "reported",
            "ic_reject": float((np.abs(ti["mean"]) > ti["half"]).mean()),
            "delta_reject": float((np.abs(td["mean"]) > td["half"]).mean()),
            "ni_reject": float((ni["mean"] - q1 * ni["se"] > -MARGIN).mean()),
            "ic_cover": float((np.abs(ti["mean"]) <= ti["half"]).mean()),
            "delta_cover": float((np.abs(td["mean"]) <= td["half"]).mean()),
            "nw_reject": float(newey_west_reject(ic[:, :n], max(h - 1, 1)).mean())}


def power_cell(delta: np.ndarray, sd: float, h: int, n: int) -> dict:
    """Simulated and predicted power of the non-inferiority test at δ = POWER_MARGIN."""
    idx = np.arange(0, n, h)
    m = len(idx)
    q = stats.t.ppf(1 - ALPHA, m - 1)
    t = t_rows(delta[:, idx], 0.95)
    ni0 = t["mean"] - q * t["se"] > -POWER_MARGIN
    inf = t["mean"] - 2 * POWER_MARGIN + q * t["se"] < -POWER_MARGIN   # shifted by -2δ
    plug = [pw.decision_probability("non-inferiority", "non-inferior", s, m, POWER_MARGIN,
                                    ALPHA) for s in t["sd"]]
    pred0 = pw.decision_probability("non-inferiority", "non-inferior", sd, m, POWER_MARGIN,
                                    ALPHA, 0.0)
    pred2 = pw.decision_probability("non-inferiority", "inferior", sd, m, POWER_MARGIN, ALPHA,
                                    -2 * POWER_MARGIN)
    return {"h": h, "n": n, "m": m, "sd_delta": sd, "sim_ni_0": float(ni0.mean()),
            "pred_ni_0": pred0, "plugin_ni_0": float(np.mean(plug)),
            "sim_inf_m2d": float(inf.mean()), "pred_inf_m2d": pred2,
            "gap": max(abs(ni0.mean() - pred0), abs(inf.mean() - pred2))}


def check_against_project(sim: dict, got: dict, reps: int = 3) -> None:
    """The vectorised ICs and verdicts equal the project's own on the first replicates."""
    from dualpath.evals.compare import paired_delta_ic
    from dualpath.evals.inference import delta_test
    from dualpath.evals.rankic import nightly_rank_ic
    from dualpath.evals.returns import forward_returns

    n = max(NIGHTS)
    days = pd.bdate_range("2027-01-04", periods=n + max(HORIZONS) + 1)
    names = np.array([f"T{i:02d}" for i in range(TICKERS)])
    for r in range(reps):
        close = close_prices(sim["daily"][r])
        prices = pd.DataFrame({"ticker": np.tile(names, len(days)),
                               "date": np.repeat(days, TICKERS), "adj_close": close.ravel()})
        frames = [pd.DataFrame({"night": np.repeat(days[:n], TICKERS), "path": p,
                                "ticker": np.tile(names, n), "score": sim[p][r].ravel(),
                                "n_draws": DRAWS, "n_failed": 0}) for p in ("main", "backup")]
        frames[1] = frames[1][~sim["drop"][r].ravel()]
        scores = pd.concat(frames, ignore_index=True)
        returns = forward_returns(prices, list(days[:n]), HORIZONS)
        ic = nightly_rank_ic(scores[scores["path"] == "main"], returns)
        paired = paired_delta_ic(scores, returns, "main", "backup")
        for h in HORIZONS:
            a = ic[ic["horizon"] == h].sort_values("night")["ic"].to_numpy()
            d = paired[paired["horizon"] == h].sort_values("night")
            assert np.allclose(a, got[h][0][r], atol=1e-12), f"IC differs at h={h}"
            assert np.allclose(d["delta"], got[h][1][r], atol=1e-12), f"ΔIC differs at h={h}"
            for hh, nn in POWER_CELLS:
                if hh != h:
                    continue
                dd = d.iloc[:nn]
                v = delta_test(dd["delta"].to_numpy(), h, "non-inferiority", POWER_MARGIN,
                               ALPHA, dd["start_pos"].to_numpy())
                idx = np.arange(0, nn, h)
                x = got[h][1][r][idx]
                low = x.mean() - stats.t.ppf(1 - ALPHA, len(idx) - 1) * x.std(ddof=1) \
                    / math.sqrt(len(idx))
                assert (v["verdict"] == "non-inferior") == (low > -POWER_MARGIN)


def run(reps: int, seed: int, chunk: int = 250) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    ic = {h: [] for h in HORIZONS}
    delta = {h: [] for h in HORIZONS}
    for start in range(0, reps, chunk):
        sim = simulate(rng, min(chunk, reps - start))
        got = ics(sim)
        if start == 0:
            check_against_project(sim, got)
        for h in HORIZONS:
            ic[h].append(got[h][0])
            delta[h].append(got[h][1])
    ic = {h: np.concatenate(v) for h, v in ic.items()}
    delta = {h: np.concatenate(v) for h, v in delta.items()}
    size = pd.DataFrame([cell(ic[h], delta[h], h, n) for h in HORIZONS for n in NIGHTS])
    sd = {h: float(delta[h].std(ddof=1)) for h in HORIZONS}      # a long pilot's estimate
    power = pd.DataFrame([power_cell(delta[h], sd[h], h, n) for h, n in POWER_CELLS])
    return size, power


FRR_CELLS = [(0.02, 20, 0.06), (0.03, 20, 0.06), (0.05, 20, 0.06), (0.02, 30, 0.05),
             (0.04, 30, 0.05)]       # (main's true IC, nights at h = 1, margin δ)


def false_reassurance_rows(rng: np.random.Generator, reps: int, tickers: int = 100) -> pd.DataFrame:
    """The RankIC plan's false-reassurance rate: simulated (a backup of 2-draw noise grades
    against main's scores of true IC m, on 100 tickers) beside `evals.power`'s, computed
    from main's mean IC and sd pooled over the panels (as a long pilot would see them)."""
    rows = []
    for m_ic, n, margin in FRR_CELLS:
        ret = rng.normal(size=(reps * n, tickers))
        c = 2 * math.sin(math.pi * m_ic / 6)          # Pearson giving Spearman m_ic
        main = c * ret + math.sqrt(1 - c * c) * rng.normal(size=ret.shape)
        back = np.clip(np.round(3 + rng.normal(0, 0.45, ret.shape + (2,))), 1, 5).mean(-1)
        ic_m, _ = spearman_rows(main, ret)
        ic_b, _ = spearman_rows(back, ret)
        d = (ic_b - ic_m).reshape(reps, n)
        t = t_rows(d, 0.95)
        passed = t["mean"] - stats.t.ppf(1 - ALPHA, n - 1) * t["se"] > -margin
        pred = pw.false_reassurance("non-inferiority", float(ic_m.mean()),
                                    float(ic_m.std(ddof=1)), tickers, n, margin, ALPHA)
        rows.append({"main_ic": m_ic, "n": n, "margin": margin, "sim": float(passed.mean()),
                     "pred": pred, "gap": abs(float(passed.mean()) - pred)})
    return pd.DataFrame(rows)


def icr_bench(name: str = "calibration_icr"):
    """bench/calibration_icr.py, or another bench module `name` (loaded by path: this folder
    is off sys.path)."""
    import importlib.util
    where = Path(__file__).resolve().parent / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, where)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dgp_bench(reps: int, seed: int, quick: bool = False) -> dict:
    """bench/calibration_dgps.py at a size following `reps` (at the default 2,000: 8,000
    panels a size cell, a standard error ~0.0027 near 0.06; 12 pilots a DGP)."""
    d = icr_bench("calibration_dgps")
    if quick:
        return d, d.run(seed, size_reps=200, pilots=1, true_panels=100)
    return d, d.run(seed, size_reps=4 * reps, pilots=max(reps // 160, 2),
                    true_panels=max(reps // 2, 100))


def main(reps: int, seed: int, quick: bool = False) -> None:
    t0 = time.perf_counter()
    size, power = run(reps, seed)
    icr = icr_bench()
    inter = icr.run(max(reps // 2, 20), seed)
    with pd.option_context("display.width", 160, "display.float_format", "{:.3f}".format):
        print(f"{reps} replicates per cell; nominal: reject 0.05, cover 0.95")
        print(size.to_string(index=False, na_rep="insufficient"))
        print(f"\npower of non-inferiority at δ = {POWER_MARGIN}, one-sided α = {ALPHA} "
              "(sim: simulated; pred: the plan's prediction; plugin: from each panel's sd)")
        print(power.to_string(index=False))
        print("\n".join(icr.report(inter)))
        frr = false_reassurance_rows(np.random.default_rng(seed + 1), max(reps, 200))
        print("\nfalse reassurance of the RankIC plan (non-inferiority, h = 1, one-sided "
              f"α = {ALPHA}): a no-signal backup passes; sim vs evals.power")
        print(frr.to_string(index=False))
        print(f"worst false-reassurance gap {frr['gap'].max():.3f} (goal <= 0.05)")
        speed = icr_bench("calibration_speed")
        windows = max(reps, 200) * 100      # vectorised: 200,000 windows a cell take ~10 s
        slow = speed.run(windows, seed)
        print("\n".join(speed.report(slow, windows)))
        pilot = icr_bench("calibration_pilot")
        npilot = max(reps // 10, 30)
        drafts = pilot.run(npilot, seed + 2)
        print("\n".join(pilot.report(drafts, npilot)))
        pgap = pilot.gaps(drafts)
        dmod, many = dgp_bench(reps, seed + 3, quick)
        print("\n".join(dmod.report(many)))
    done = size[size["status"] == "reported"]
    worst_reject = done[["ic_reject", "delta_reject", "ni_reject"]].to_numpy().max()
    worst_cover = done[["ic_cover", "delta_cover"]].to_numpy().min()
    print(f"runtime {time.perf_counter() - t0:.1f} s")
    print(f"worst_reject={worst_reject:.3f} worst_coverage={worst_cover:.3f} cells={len(done)} "
          f"worst_power_gap={power['gap'].max():.3f} "
          f"worst_seq_reject={inter['worst_seq_reject']:.3f} "
          f"icr_worst_reject={inter['worst_reject']:.3f} "
          f"icr_worst_coverage={inter['worst_coverage']:.3f} "
          f"nights_to_decide_equal={inter['equal']} nights_to_decide_noise={inter['noise']} "
          f"nights_to_decide_noise_main3={inter['noise_main3']} "
          f"noise_rate_gap={inter['noise_rate_gap']:.3f} "
          f"slowdown_drift_coverage={speed.drift_coverage(slow):.3f} "
          f"pilot5_power_gap={pgap[5]:.3f} pilot10_power_gap={pgap[10]:.3f} "
          f"dgps={many['dgps']} icr_seq_size_20={many['size_20']:.3f} "
          f"icr_seq_size_100={many['size_100']:.3f} "
          f"planner_power_worst={many['planner_power_worst']:.3f} "
          f"nights_to_decide_worst_dgp={_worst_needs(many['assumed'])} "
          f"slowdown_drift08_coverage={speed.drift08_coverage(windows, seed + 4):.3f}")


def _worst_needs(assumed: pd.DataFrame) -> str:
    """'equal/noise': the most nights any DGP needs for power 0.8 at 2 x 2 draws (the keys
    nights_to_decide_* before it are the Gaussian model's, the kindest)."""
    def most(col: str) -> str:
        vals = pd.to_numeric(assumed[col], errors="coerce").dropna()
        return str(int(vals.max())) if len(vals) == len(assumed) else ">cap"
    return f"{most('needs_equal')}/{most('needs_noise')}"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20270104)
    ap.add_argument("--quick", action="store_true",
                    help="a small run (60 replicates, one pilot a DGP): the figures are rough")
    a = ap.parse_args()
    main(60 if a.quick else a.reps, a.seed, a.quick)
