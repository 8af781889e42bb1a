"""The interchangeability test's size and the pilot planner's power on every DGP of
`bench/dgps.py` (Gaussian, heavy-tailed persistent, tied ordinal; each with 3% failed
draws and 5 tickers swapped mid-window), the worst of them printed.

- Size: at the boundary (the backup's share of main's agreement exactly the limit 0.5,
  `boundary`), the group-sequential design of a 20-night window (looks 5/10/15/20,
  O'Brien-Fleming spending, boundaries on t with K - 1 df: `evals.sequential.bounds`)
  declares either verdict; its type I error over all looks and through each look, for
  'interchangeable' and for 'not interchangeable', at 20 and at 100 tickers; beside it the
  fixed-sample test at each look.
- Planner: from each of `PILOTS` 5-night pilots (100 tickers, 2 x 2 draws) the nights
  `evals.icr_plan.pilot_nights` proposes, and the power those nights deliver on the DGP
  itself (the fixed-sample test, `TRUE_PANELS` panels a night): an equal backup declared
  interchangeable, a noise backup declared not. The mean over pilots is the delivered power.
- `assumed_vars`: g's per-ticker-night variance at each draws cell on a DGP (what
  `evals.interchange.ASSUMED_VARS` holds, measured on `heavy`), and the nights the no-pilot
  default proposes against that DGP's own power curve.

The vectorised statistic (`evals.icr_panels`) is checked equal to
`evals.interchange.interchange` on panels with failed draws and the universe change.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import importlib.util
import math
import warnings

import numpy as np
import pandas as pd

from dualpath.evals import dist
from dualpath.evals import icr_panels as ip
from dualpath.evals.sequential import bounds

LIMIT, ALPHA, LOOKS, WINDOW = 0.5, 0.05, [5, 10, 15, 20], 20
PILOT_NIGHTS, PILOTS, TRUE_PANELS, CAP = 5, 12, 1000, 60


def dgps():
    """bench/dgps.py (this folder is off sys.path)."""
    where = Path(__file__).resolve().parent / "dgps.py"
    spec = importlib.util.spec_from_file_location("dgps", where)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("dgps", mod)
    spec.loader.exec_module(mod)
    return mod


def true_g(seed: int, dgp, w: float, reps: int, draws=(2, 2)) -> float:
    """g's population value at w, pooled over many 20-night panels of 100 tickers; the same
    `seed` at every w (common random numbers: g is then smooth in w, and the root finder
    sees none of the sampling noise between points)."""
    p = dgps().panels(np.random.default_rng(seed), dgp, reps, 20, 100, w, draws)
    t = ip.terms(p["main"], p["backup"])
    return float(np.nanmean(t["tr"]) - LIMIT * np.nanmean(t["rr"]))


def boundary(rng, dgp, reps: int = 600) -> float:
    """w* where the backup keeps exactly LIMIT of main's agreement: secant steps on one
    pooled sample of `reps` panels (g's sampling error there ~5e-4, w's ~3e-3)."""
    seed = int(rng.integers(2 ** 31))
    w = [0.4, 0.6]
    g = [true_g(seed, dgp, x, reps) for x in w]
    for _ in range(3):
        new = w[1] - g[1] * (w[1] - w[0]) / (g[1] - g[0])
        w, g = [w[1], new], [g[1], true_g(seed, dgp, new, reps)]
    return float(w[1])


def looks_z(rng, dgp, w: float, tickers: int, reps: int, nights: list[int],
            chunk: int = 500) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(g / its se about 0 — the looks' statistic, g / se — the fixed-sample test's, df)
    of `reps` panels at each of `nights`."""
    out = {"z_null": [], "z": [], "df": []}
    for s in range(0, reps, chunk):
        p = dgps().panels(rng, dgp, min(chunk, reps - s), max(nights), tickers, w)
        c = ip.cumulative(ip.terms(p["main"], p["backup"]))
        st = [ip.statistic(c, n, LIMIT) for n in nights]
        for k in out:
            out[k].append(np.stack([x[k] for x in st], 1))
    return tuple(np.concatenate(out[k]) for k in ("z_null", "z", "df"))


def size_row(rng, dgp, w: float, tickers: int, reps: int) -> dict:
    """Type I error of each verdict over all looks and through each look, and of the
    fixed-sample test (g / se on t) at each look."""
    z, plain, df = looks_z(rng, dgp, w, tickers, reps, LOOKS)
    b = np.array([bounds(LOOKS, WINDOW, ALPHA, df=list(d)) for d in df])
    up, dn = z >= b, z <= -b
    hit = up | dn
    first = np.where(hit.any(1), hit.argmax(1), len(LOOKS))
    by_look = lambda cross: [float((cross[np.arange(len(z)), np.minimum(first, len(LOOKS) - 1)]
                                    & (first <= k)).mean()) for k in range(len(LOOKS))]
    q = dist.t_ppf(1 - ALPHA, df)
    row = {"dgp": dgp.name, "tickers": tickers, "panels": reps, "w_star": w}
    for name, cross, fixed in (("interchangeable", up, plain > q), ("not", dn, plain < -q)):
        through = by_look(cross)
        row[f"{name}_overall"] = through[-1]
        row[f"{name}_by_look"] = "/".join(f"{v:.3f}" for v in through)
        row[f"{name}_fixed"] = "/".join(f"{v:.3f}" for v in fixed.mean(0))
    row["size"] = max(row["interchangeable_overall"], row["not_overall"])
    return row


def power_curve(rng, dgp, reps: int, nights: int = CAP, draws=(2, 2), tickers: int = 100
                ) -> pd.DataFrame:
    """The fixed-sample test's power night by night on the DGP: equal and noise backups."""
    out = {"n": np.arange(1, nights + 1)}
    for alt, w in (("equal", 1.0), ("noise", 0.0)):
        share = np.zeros(nights)
        for s in range(0, reps, 250):
            k = min(250, reps - s)
            p = dgps().panels(rng, dgp, k, nights, tickers, w, draws)
            c = ip.cumulative(ip.terms(p["main"], p["backup"]))
            for n in range(1, nights + 1):
                yes, no = ip.decisions(ip.statistic(c, n, LIMIT), ALPHA)
                share[n - 1] += (yes if alt == "equal" else no).sum()
        out[alt] = share / reps
    return pd.DataFrame(out)


def planner_rows(rng, dgp, curve: pd.DataFrame, pilots: int, seed: int) -> pd.DataFrame:
    """Nights proposed from each 5-night pilot and the power they deliver on the DGP."""
    from dualpath.evals.icr_plan import pilot_nights

    d = dgps()
    rows = []
    for i in range(pilots):
        p = d.panels(rng, dgp, 1, PILOT_NIGHTS, 100, 1.0)
        units = d.to_units(p, 0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            plan = pilot_nights(units, "main", 100, (2, 2), 0.8, LIMIT, ALPHA,
                                seed=seed + i, cap=CAP)
        n = plan.nights if plan.nights is not None else CAP
        at = curve.iloc[min(n, len(curve)) - 1]
        rows.append({"dgp": dgp.name, "pilot": i, "nights": plan.nights, "low": plan.low,
                     "high": plan.high, "claimed_equal": plan.power_equal,
                     "claimed_noise": plan.power_noise, "delivered_equal": at["equal"],
                     "delivered_noise": at["noise"]})
    return pd.DataFrame(rows)


def assumed_vars(rng, dgp, reps: int = 600, nights: int = 15) -> dict:
    """g's per-ticker-night variance (its variance over panels x ticker-nights: the
    sampling variance itself, tails and all) at each draws cell, equal and noise, and main's
    ρ_RR, at `nights` x 100 tickers with the DGP's failed draws and universe change."""
    out = {}
    for m in (2, 3, 4):
        for b in (1, 2, 3):
            cell = []
            for w in (1.0, 0.0):
                p = dgps().panels(rng, dgp, reps, nights, 100, w, (m, b))
                c = ip.cumulative(ip.terms(p["main"], p["backup"]))
                s = ip.statistic(c, nights, LIMIT)
                cell.append(round(float(np.var(s["g"])) * nights * 100, 2))
                if (m, b, w) == (2, 2, 1.0):
                    out["rho_rr"] = round(float(s["rr"].mean()), 3)
            out[(m, b)] = tuple(cell)
    return out


def assumed_row(dgp, curve: pd.DataFrame) -> dict:
    """The no-pilot default's nights against one DGP's own power curve."""
    from dualpath.evals.icr_plan import assumed_nights

    n = assumed_nights(100, (2, 2)).nights
    at = curve.iloc[min(n, len(curve)) - 1]
    need = curve[(curve["equal"] >= 0.8) & (curve["noise"] >= 0.8)]["n"]
    first = lambda col: curve[curve[col] >= 0.8]["n"].min()
    return {"dgp": dgp.name, "assumed_nights": n, "delivered_equal": at["equal"],
            "delivered_noise": at["noise"], "needs_equal": first("equal"),
            "needs_noise": first("noise"), "needs_both": need.min() if len(need) else None}


def check_against_project(rng) -> None:
    """`evals.icr_panels` equals `evals.interchange.interchange` on each DGP's panels."""
    from dualpath.evals.interchange import interchange

    d = dgps()
    for dgp in d.ALL:
        p = d.panels(rng, dgp, 2, 6, 20, 0.6)
        c = ip.cumulative(ip.terms(p["main"], p["backup"]))
        for n in (2, 6):
            s = ip.statistic(c, n, LIMIT)
            for r in range(2):
                x = interchange(d.to_units(p, r, n), "main", "backup", LIMIT, ALPHA)
                assert abs(x.g - s["g"][r]) < 1e-12 and abs(x.se_g - s["se"][r]) < 1e-12, \
                    f"{dgp.name}: g {x.g} vs {s['g'][r]}, se {x.se_g} vs {s['se'][r]}"
                assert abs(x.z_null - s["z_null"][r]) < 1e-9
                assert x.tickers - 1 == s["df"][r]


def run(seed: int, size_reps: int = 4000, pilots: int = PILOTS,
        true_panels: int = TRUE_PANELS) -> dict:
    """Every table and the worst figures (`bench/calibration.py`'s last line)."""
    rng = np.random.default_rng(seed)
    check_against_project(rng)
    d = dgps()
    sizes, plans, agree, assumed = [], [], [], []
    for dgp in d.ALL:
        agree.append((dgp.name, *d.self_agreement(rng, dgp, reps=10)))
        w = boundary(rng, dgp, reps=max(size_reps // 8, 50))
        for tickers in (20, 100):
            sizes.append(size_row(rng, dgp, w, tickers, size_reps))
        curve = power_curve(rng, dgp, true_panels)
        plans.append(planner_rows(rng, dgp, curve, pilots, seed))
        assumed.append(assumed_row(dgp, curve))
    size, plan = pd.DataFrame(sizes), pd.concat(plans, ignore_index=True)
    mean = plan.groupby("dgp")[["delivered_equal", "delivered_noise"]].mean()
    return {"size": size, "plan": plan, "delivered": mean, "agreement": agree,
            "assumed": pd.DataFrame(assumed),
            "dgps": len(d.ALL),
            "size_20": float(size[size["tickers"] == 20]["size"].max()),
            "size_100": float(size[size["tickers"] == 100]["size"].max()),
            "planner_power_worst": float(mean.to_numpy().min())}


def report(r: dict) -> list[str]:
    """The section `bench/calibration.py` prints."""
    agree = "; ".join(f"{n} QWK {q:.3f}, exact {e:.0%}, grade 3 {s:.0%}"
                      for n, q, e, s in r["agreement"])
    return [f"\ninterchangeability on {r['dgps']} generating processes (bench/dgps.py; main's "
            f"self-agreement: {agree})",
            "type I error at the boundary, group-sequential looks 5/10/15/20 on t bounds "
            "(overall; through each look; fixed-sample at each look)",
            r["size"].to_string(index=False),
            "\nnights proposed from a 5-night pilot (100 tickers, 2 x 2 draws) and the power "
            "they deliver on the DGP (fixed-sample)",
            r["plan"].to_string(index=False),
            "mean delivered power by DGP", r["delivered"].to_string(),
            "\nno pilot: the assumed nights (evals.interchange.ASSUMED_VARS, 100 tickers, "
            "2 x 2) and the power they deliver on each DGP, beside the nights each needs",
            r["assumed"].to_string(index=False)]


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20270104)
    ap.add_argument("--assumed", action="store_true",
                    help="print assumed_vars on the heavy DGP and stop")
    a = ap.parse_args()
    if a.assumed:
        print(assumed_vars(np.random.default_rng(a.seed), dgps().HEAVY))
    else:
        with pd.option_context("display.width", 200, "display.float_format", "{:.3f}".format):
            print("\n".join(report(run(a.seed))))
