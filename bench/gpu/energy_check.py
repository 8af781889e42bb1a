"""Per dualpath night under RES: the joules dualpath stored (`energy_runs`), the independent
probe's NVML counter over the same window (`energy_probe.py`), their ratio, J per ticker,
mean and idle watts, power limit and link, the night's wall clock.

usage: python bench/gpu/energy_check.py RES
"""
import sys
from pathlib import Path

import duckdb
import numpy as np


def probe_joules(f: Path, t0: float, t1: float) -> float:
    a = np.loadtxt(f)
    return float(np.interp(t1, a[:, 0], a[:, 1]) - np.interp(t0, a[:, 0], a[:, 1])) / 1e3


print("night | wall s | tickers | stored J | probe J | stored ÷ probe | J/ticker | mean W | "
      "idle W | power limit W | link (start) | link max | basis | samples | gpu changes")
for d in sorted(Path(sys.argv[1]).iterdir()):
    wh = d / "warehouse.duckdb"
    if not wh.exists():
        continue
    con = duckdb.connect(str(wh), read_only=True)
    r = con.execute("SELECT wall_s, tickers_planned FROM runs").fetchone()
    e = con.execute("SELECT joules, mean_w, idle_w, power_limit_w, link, link_max, basis, "
                    "samples, changes, started_wall, ended_wall, unknown FROM energy_runs").fetchone()
    if e is None or e[0] is None:
        print(f"{d.name} | {r[0]:.1f} | {r[1]} | energy unknown: {e[-1] if e else 'no record'}")
        continue
    p = probe_joules(d / "probe.txt", e[9], e[10]) if (d / "probe.txt").exists() else float("nan")
    print(f"{d.name} | {r[0]:.1f} | {r[1]} | {e[0]:.0f} | {p:.0f} | {e[0] / p:.4f} | "
          f"{e[0] / r[1]:.0f} | {e[1]:.1f} | {e[2]:.1f} | {e[3]:.0f} | {e[4]} | {e[5]} | {e[6]} | "
          f"{e[7]} | {e[8]}")
