"""Calibration and power of the interchangeability test (`evals.interchange`) on the user's shape.

Each replicate: 100 tickers, 1-3 draws a path a night, 5-30 nights. A ticker's latent quality
persists (AR(1), night-to-night correlation 0.9); a draw's grade is round(3 + TAU·latent + e),
e ~ N(0, SIGMA²), clipped to 1-5, which gives main's draws a self-agreement QWK of 0.118 with
58% exact agreement (measured over 12,000 ticker-nights; the user's 0.12 and 56-61%). The
backup's latent is w·main's + √(1-w²) of its own (w = 1: interchangeable; w = 0: its grades are noise, with the same marginal; the
boundary w* is set so that its true share ρ_TR/ρ_RR is the limit, by a long pooled run).

Cells (draws x nights): the size of 'interchangeable' at the boundary (one-sided α = 0.05),
and the coverage of the ratio's and of g's two-sided 95% intervals at w* (the truth from the
pooled run). One draw cannot estimate main's own disagreement: those cells say so. Power on the
user's shape (2 draws): the share of panels declared interchangeable at w = 1 and not
interchangeable at w = 0, night by night (fixed-sample tests at each n), and the first n with
power >= 0.8 for each, and at limits near the default (`limit_rows`). The power and
group-sequential rows simulate 4x the cells' panels (the boundary's type I error over all looks
8x: 8,000 at `bench/calibration.py`'s default, a standard error of ~0.0025), since the figures
they give sit near their goals. `check_against_project` recomputes replicates with the project's own
`evals.interchange.interchange` and requires equal estimates and verdicts.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

TICKERS, TAU, SIGMA, RHO_NIGHT = 100, 0.19, 0.42, 0.9
NIGHTS = [5, 10, 20, 30]
DRAWS = [1, 2, 3]
LIMIT, ALPHA = 0.5, 0.05


def latent(rng: np.random.Generator, reps: int, nights: int,
           persist: float = RHO_NIGHT) -> np.ndarray:
    x = np.empty((reps, nights, TICKERS))
    x[:, 0] = rng.normal(size=(reps, TICKERS))
    for t in range(1, nights):
        x[:, t] = persist * x[:, t - 1] + math.sqrt(1 - persist ** 2) * rng.normal(
            size=(reps, TICKERS))
    return x


def grades(rng: np.random.Generator, lat: np.ndarray, draws: int) -> np.ndarray:
    e = rng.normal(0, SIGMA, lat.shape + (draws,))
    return np.clip(np.round(3 + TAU * lat[..., None] + e), 1, 5)


def simulate(rng: np.random.Generator, reps: int, nights: int, draws: int, w: float,
             main_draws: int | None = None, persist: float = RHO_NIGHT) -> dict:
    """Both paths' grades; main scores `main_draws` draws (default: `draws`)."""
    main = latent(rng, reps, nights, persist)
    own = latent(rng, reps, nights, persist)
    back = w * main + math.sqrt(max(0.0, 1 - w * w)) * own
    return {"main": grades(rng, main, main_draws or draws), "backup": grades(rng, back, draws)}


def zranks(g: np.ndarray) -> np.ndarray:
    """Standardised mid-ranks along the ticker axis (axis -2); 0 for a flat draw."""
    r = stats.rankdata(g, axis=-2)
    r = r - r.mean(axis=-2, keepdims=True)
    sd = r.std(axis=-2, keepdims=True)
    return np.divide(r, sd, out=np.zeros_like(r), where=sd > 0)


def terms(sim: dict) -> dict:
    """Per replicate x night x ticker: the RR, TR and TT pair means of z products."""
    zr, zt = zranks(sim["main"]), zranks(sim["backup"])

    def within(z: np.ndarray) -> np.ndarray:
        d = z.shape[-1]
        return (z.sum(-1) ** 2 - (z ** 2).sum(-1)) / (d * (d - 1)) if d > 1 \
            else np.full(z.shape[:-1], np.nan)
    return {"rr": within(zr), "tr": zr.mean(-1) * zt.mean(-1), "tt": within(zt)}


def sim_terms(rng: np.random.Generator, reps: int, *args, chunk: int = 1000, **kw) -> dict:
    """`terms(simulate(rng, reps, *args))` built `chunk` panels at a time (the grades and
    ranks of 8,000 panels x 30 nights would take gigabytes; their terms take a fifth)."""
    parts = [terms(simulate(rng, min(chunk, reps - s), *args, **kw))
             for s in range(0, reps, chunk)]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def estimate(t: dict, n: int, limit: float = LIMIT, alpha: float = ALPHA) -> dict:
    """The project's estimator, vectorised over replicates, on the first n nights."""
    a = {k: v[:, :n].sum(axis=1) for k, v in t.items()}        # per ticker (cluster)
    big = n * TICKERS
    m = {k: v.sum(axis=1) / big for k, v in a.items()}
    psi = {k: (a[k] - m[k][:, None] * n) / big for k in ("rr", "tr")}
    k = TICKERS
    se = lambda p: np.sqrt(k / (k - 1) * (p ** 2).sum(axis=1))
    rr, tr = m["rr"], m["tr"]
    ratio = (1 - tr) / (1 - rr)
    se_log = se(-psi["tr"] / (1 - tr)[:, None] + psi["rr"] / (1 - rr)[:, None])
    g = tr - limit * rr
    se_g = se(psi["tr"] - limit * psi["rr"])
    qa = stats.t.ppf(1 - alpha, k - 1)
    q = stats.t.ppf(0.975, k - 1)
    return {"rr": rr, "tr": tr, "tt": m["tt"], "ratio": ratio, "g": g, "z": g / se_g,
            "g_lo95": g - q * se_g, "g_hi95": g + q * se_g,
            "ratio_low": ratio * np.exp(-q * se_log), "ratio_high": ratio * np.exp(q * se_log),
            "g_low": g - qa * se_g, "g_high": g + qa * se_g}


def truth(rng: np.random.Generator, w: float, draws: int = 2, reps: int = 400) -> dict:
    """The true ρ's at w: pooled over a long run (their sampling error ~1e-4)."""
    t = terms(simulate(rng, reps, 30, draws, w))
    return {k: float(np.nanmean(v)) for k, v in t.items()}


def boundary(rng: np.random.Generator) -> float:
    """w* with true share ρ_TR/ρ_RR = LIMIT (secant on a pooled run; share ≈ w here)."""
    w0, w1 = LIMIT * 0.8, LIMIT * 1.2
    f = lambda w: (lambda x: x["tr"] - LIMIT * x["rr"])(truth(rng, w))
    f0, f1 = f(w0), f(w1)
    for _ in range(2):
        w0, w1, f0 = w1, w1 - f1 * (w1 - w0) / (f1 - f0), f1
        f1 = f(w1)
    return float(w1)


def size_cells(rng: np.random.Generator, reps: int, w_star: float) -> pd.DataFrame:
    rows = []
    for d in DRAWS:
        if d < 2:
            rows += [{"draws": d, "n": n, "status": "not estimable (main needs 2 draws)"}
                     for n in NIGHTS]
            continue
        tr = truth(rng, w_star, d)
        true_ratio, true_g = (1 - tr["tr"]) / (1 - tr["rr"]), tr["tr"] - LIMIT * tr["rr"]
        t = terms(simulate(rng, reps, max(NIGHTS), d, w_star))
        for n in NIGHTS:
            e = estimate(t, n)
            rows.append({"draws": d, "n": n, "status": "reported", "true_g": true_g,
                         "reject": float((e["g_low"] > 0).mean()),
                         "ratio_cover": float(((e["ratio_low"] <= true_ratio)
                                               & (true_ratio <= e["ratio_high"])).mean()),
                         "g_cover": float(((e["g_lo95"] <= true_g)
                                           & (true_g <= e["g_hi95"])).mean())})
    return pd.DataFrame(rows)


def power_rows(rng: np.random.Generator, reps: int, nights: int = 30, draws: int = 2,
               main_draws: int | None = None, persist: float = RHO_NIGHT) -> pd.DataFrame:
    """Power of each decision (the user's shape: 2 draws), night by night."""
    eq = sim_terms(rng, reps, nights, draws, 1.0, main_draws, persist)
    noise = sim_terms(rng, reps, nights, draws, 0.0, main_draws, persist)
    rows = []
    for n in range(2, nights + 1):
        a, b = estimate(eq, n), estimate(noise, n)
        rows.append({"n": n, "equal_interchangeable": float((a["g_low"] > 0).mean()),
                     "equal_wrong": float((a["g_high"] < 0).mean()),
                     "noise_not_interchangeable": float((b["g_high"] < 0).mean()),
                     "noise_wrong": float((b["g_low"] > 0).mean())})
    return pd.DataFrame(rows)


def sequential_rows(rng: np.random.Generator, reps: int, w_star: float,
                    windows=(20, 30)) -> pd.DataFrame:
    """The group-sequential design (`evals.sequential`, looks every 5 nights) on 2 draws:
    its overall type I error across all looks at the boundary (on 2 x `reps` panels: at
    8,000 its standard error is ~0.0025), and the expected night it stops when the paths
    are interchangeable and when the backup is noise."""
    from dualpath.evals.sequential import bounds, planned_looks

    rows = []
    for window in windows:
        looks = planned_looks(window)
        b = np.array(bounds(looks, window, ALPHA))
        for case, w in (("boundary", w_star), ("equal", 1.0), ("noise", 0.0)):
            k = 2 * reps if case == "boundary" else reps
            t = sim_terms(rng, k, window, 2, w)
            z = np.stack([estimate(t, n)["z"] for n in looks], axis=1)
            up, down = z >= b, z <= -b
            hit = up | down
            first = np.where(hit.any(axis=1), hit.argmax(axis=1), len(looks) - 1)
            idx = np.arange(k)
            rows.append({"window": window, "looks": "/".join(map(str, looks)), "case": case,
                         "panels": k,
                         "interchangeable": float(up[idx, first].mean()),
                         "not_interchangeable": float(down[idx, first].mean()),
                         "mean_stop_night": float(np.array(looks)[first].mean())})
    return pd.DataFrame(rows)


def _panel(sim: dict, r: int, n: int) -> pd.DataFrame:
    """Replicate r's first n nights as a project ``units`` frame."""
    return pd.concat([pd.DataFrame({"night": k, "path": p, "draw": d,
                                    "ticker": np.arange(TICKERS), "grade": sim[p][r, k, :, d]})
                      for p in ("main", "backup") for k in range(n)
                      for d in range(sim[p].shape[-1])], ignore_index=True)


def noise_rate_rows(rng: np.random.Generator, reps: int, panels: int) -> pd.DataFrame:
    """The noise-backup rate the headline prints beside a verdict (`evals.interchange.
    noise_rate`, fixed-sample; `evals.sequential.noise_rate`, looks 5/10/15/20 at look 2),
    averaged over `panels` noise panels (w = 0, 2 draws) as the project computes it from
    each, beside the share of `reps` noise panels that got each verdict."""
    from dualpath.evals import sequential as sq
    from dualpath.evals.interchange import interchange, noise_rate

    sim = simulate(rng, reps, 10, 2, 0.0)
    t = terms(sim)
    looks = [5, 10, 15, 20]
    b = np.array(sq.bounds(looks, 20, ALPHA))
    z = np.stack([estimate(t, n)["z"] for n in looks[:2]], axis=1)
    up, down = z >= b[:2], z <= -b[:2]
    first, crossed = (up | down).argmax(axis=1), (up | down).any(axis=1)
    idx = np.arange(reps)
    seq_sim = {"interchangeable": (crossed & up[idx, first]).mean(),
               "not interchangeable": (crossed & down[idx, first]).mean(),
               "no decision yet": (~crossed).mean()}
    rows = []
    for n in (5, 10):
        e = estimate(t, n)
        sim_share = {"interchangeable": (e["g_low"] > 0).mean(),
                     "not interchangeable": (e["g_high"] < 0).mean()}
        sim_share["inconclusive"] = 1 - sum(sim_share.values())
        xs = [interchange(_panel(sim, r, n), "main", "backup", LIMIT, ALPHA)
              for r in range(panels)]
        for v, share in sim_share.items():
            pred = float(np.mean([noise_rate(x, v) for x in xs]))
            rows.append({"design": "fixed", "n": n, "verdict": v, "sim": float(share),
                         "pred": pred, "gap": abs(pred - float(share))})
        if n == 10:
            for v, share in seq_sim.items():
                pred = float(np.mean([sq.noise_rate(x, looks, 2, v) for x in xs]))
                rows.append({"design": "looks 5/10/15/20, look 2", "n": n, "verdict": v,
                             "sim": float(share), "pred": pred,
                             "gap": abs(pred - float(share))})
    return pd.DataFrame(rows)


def nights_to(power: pd.DataFrame, col: str, goal: float = 0.8) -> int | None:
    hit = power[power[col] >= goal]
    return int(hit["n"].iloc[0]) if len(hit) else None


def check_against_project(rng: np.random.Generator, reps: int = 2) -> None:
    """The vectorised estimates equal `evals.interchange.interchange` on a few panels (2 and
    3 draws on main)."""
    for main_draws in (2, 3):
        sim = simulate(rng, reps, 5, 2, 0.7, main_draws)
        _check_panels(sim, estimate(terms(sim), 5), reps)


def _check_panels(sim: dict, e: dict, reps: int) -> None:
    from dualpath.evals.interchange import interchange

    for r in range(reps):
        rows = [pd.DataFrame({"night": n, "path": p, "draw": d, "ticker": np.arange(TICKERS),
                              "grade": sim[p][r, n, :, d]})
                for p in ("main", "backup") for n in range(5) for d in range(sim[p].shape[-1])]
        x = interchange(pd.concat(rows, ignore_index=True), "main", "backup", LIMIT, ALPHA)
        for k, got in (("rr", x.rho_rr), ("tr", x.rho_tr), ("tt", x.rho_tt), ("g", x.g),
                       ("ratio_low", x.ratio_low), ("g_low", x.g_low)):
            assert abs(e[k][r] - got) < 1e-9, f"{k} differs: {e[k][r]} vs {got}"


def self_qwk(rng: np.random.Generator) -> tuple[float, float]:
    """Main's self-agreement (mean QWK, exact agreement) at these settings."""
    from dualpath.evals.agreement import quadratic_kappa

    g = grades(rng, latent(rng, 20, 30), 2).reshape(-1, 2).astype(int)
    return quadratic_kappa(g[:, 0], g[:, 1]), float((g[:, 0] == g[:, 1]).mean())


def run(reps: int, seed: int) -> dict:
    """Every table and the figures of the last line."""
    rng = np.random.default_rng(seed)
    check_against_project(rng)
    qwk, exact = self_qwk(rng)
    w_star = boundary(rng)
    size = size_cells(rng, reps, w_star)
    many = 4 * reps      # the nights-to-power figures sit near 0.8: ~0.006 at 4,000 panels
    power = {d: power_rows(rng, many, draws=d) for d in (2, 3)}
    power["main3"] = power_rows(rng, many, nights=15, main_draws=3)
    power["iid"] = power_rows(rng, many, nights=15, persist=0.0)
    seq = sequential_rows(rng, many, w_star)
    limits = limit_rows(rng, many)
    noise = noise_rate_rows(rng, reps, panels=min(max(reps // 5, 8), 240))
    done = size[size["status"] == "reported"]
    at = seq[seq["case"] == "boundary"]
    return {"qwk": qwk, "exact": exact, "w_star": w_star, "size": size, "power": power,
            "panels": many, "limits": limits,
            "worst_reject": float(done["reject"].max()),
            "worst_coverage": float(done[["ratio_cover", "g_cover"]].to_numpy().min()),
            "equal": nights_to(power[2], "equal_interchangeable"),
            "noise": nights_to(power[2], "noise_not_interchangeable"), "seq": seq,
            "noise_main3": nights_to(power["main3"], "noise_not_interchangeable"),
            "worst_seq_reject": float(at["interchangeable"].max()), "noise_rates": noise,
            "noise_rate_gap": float(noise["gap"].max())}


LIMITS_TRIED = (0.5, 0.53, 0.55)


def limit_rows(rng: np.random.Generator, reps: int, nights: int = 15) -> pd.DataFrame:
    """Nights to power 0.8 of each decision (2 draws) at limits near the default: a higher
    limit f makes the noise decision's mean -f ρ_RR larger but adds f² Var ρ_RR to its
    variance, and takes from the interchangeable decision's (1 - f) ρ_RR."""
    eq = sim_terms(rng, reps, nights, 2, 1.0)
    noise = sim_terms(rng, reps, nights, 2, 0.0)
    rows = []
    for f in LIMITS_TRIED:
        p = pd.DataFrame([{"n": n,
                           "eq": float((estimate(eq, n, f)["g_low"] > 0).mean()),
                           "noise": float((estimate(noise, n, f)["g_high"] < 0).mean())}
                          for n in range(2, nights + 1)])
        rows.append({"limit": f, "nights_equal": nights_to(p, "eq"),
                     "nights_noise": nights_to(p, "noise"),
                     "power10_equal": float(p.loc[p["n"] == 10, "eq"].iloc[0]),
                     "power10_noise": float(p.loc[p["n"] == 10, "noise"].iloc[0])})
    return pd.DataFrame(rows)


def why_noise_is_slower(power: dict, limits: pd.DataFrame) -> list[str]:
    """Why a noise backup takes longer than 10 nights at 2 draws, and what decides it sooner.

    g's variance per ticker-night is what one rank correlation from 2 x 2 draws carries
    (Var z̄_T z̄_R + f² Var z_R1 z_R2 ≈ 0.31 + 0.26, near the ~1-per-pair bound of any
    correlation estimate near 0; every draw pair is used: 4 backup-main, 1 main-main); the
    tickers' night-to-night persistence adds between-ticker variance on top (a ticker the
    backup grades high persists, whichever way main grades it): 0.66 in all, where power 0.8
    at 10 nights x 100 tickers needs <= 0.58. Nothing else in the test is slack: ranks
    within night lose nothing (standardised centred grades gave 0.756 at 10 nights against
    the ranks' 0.752, 6,000 panels), the interval is not conservative (its size at the
    boundary is 0.05-0.06, above α, not below), no limit near 50% brings both decisions to
    10 (`limit_rows`), and looks can only lower the power at a given night. So no calibrated
    estimator of the population share reaches 0.8 at 10 nights on 2 draws: the lever is
    main's draws, on the path that is ~6x faster."""
    at = lambda p, c, n=10: float(p.loc[p["n"] == n, c].iloc[0])
    col = "noise_not_interchangeable"
    lim = "; ".join(f"{r.limit:.2f}: {r.nights_equal}/{r.nights_noise} nights "
                    f"(at 10: {r.power10_equal:.3f}/{r.power10_noise:.3f})"
                    for r in limits.itertuples())
    return [f"noise decision, 2 draws: power {at(power[2], col):.3f} at 10 nights, "
            f"{at(power[2], col, 11):.3f} at 11, {at(power[2], col, 12):.3f} at 12; with "
            f"ticker-nights independent (no persistence: the estimator's own variance) "
            f"{at(power['iid'], col):.3f} at 10",
            f"nights to power 0.8 interchangeable/noise by limit share (2 draws): {lim}",
            f"3 draws on main, 2 on backup: nights to power 0.8 interchangeable "
            f"{nights_to(power['main3'], 'equal_interchangeable')}, noise "
            f"{nights_to(power['main3'], col)} (power at 10: "
            f"{at(power['main3'], 'equal_interchangeable'):.3f}, {at(power['main3'], col):.3f})"]


def report(r: dict) -> list[str]:
    """The section `bench/calibration.py` prints."""
    pick = lambda p: p[p["n"].isin([5, 8, 10, 12, 15, 20, 30])].to_string(index=False)
    return [f"\ninterchangeability (evals.interchange): 100 tickers, main self-agreement "
            f"QWK {r['qwk']:.3f}, exact {r['exact']:.0%}; limit share {LIMIT}, one-sided "
            f"α = {ALPHA}; boundary w* = {r['w_star']:.3f}",
            "size of 'interchangeable' at the boundary; coverage of the 95% intervals",
            r["size"].to_string(index=False, na_rep="—"),
            "\npower, 2 draws (fixed-sample test at each n; w = 1 equal, w = 0 noise)",
            pick(r["power"][2]),
            "\npower, 3 draws", pick(r["power"][3]),
            f"nights to power 0.8 (2 draws): interchangeable {r['equal']}, noise "
            f"{r['noise']}; (3 draws): {nights_to(r['power'][3], 'equal_interchangeable')}, "
            f"{nights_to(r['power'][3], 'noise_not_interchangeable')}",
            *why_noise_is_slower(r["power"], r["limits"]),
            "\ngroup-sequential looks (O'Brien-Fleming spending, 2 draws): share declared "
            "at the first crossing (boundary: the type I error over all looks)",
            r["seq"].to_string(index=False),
            "\nnoise-backup rate beside each verdict (2 draws, w = 0): the project's rate "
            "averaged over panels vs the simulated share with that verdict",
            r["noise_rates"].to_string(index=False)]
