"""How long `dualpath --help`, `dualpath runs` and `dualpath metrics` take, start to exit, on
the tests' seeded 10-night warehouse (`tests/seeded.py`), and what each imports.

    python bench/startup.py [--repeat 5] [--source DIR]

Each command runs `--repeat` times in a fresh `python -m dualpath` (the commands interleaved,
so a change in the machine's load falls on all three alike); the figure is the median wall
clock, printed beside the median CPU seconds (user + system), which a busy machine inflates
less. `--source` times another checkout's code (its root put first on PYTHONPATH) on the
same warehouse: the before of a change. The load is the 1-minute load average before and
after: on 2 shared cores a load of 8 doubles every figure.
Last line: `help_s=… runs_s=… metrics_s=… (median of 5; load …)`
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Run as a script, this folder comes first on sys.path and would shadow the `evals` package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

COMMANDS = {"help": ["--help"], "runs": ["runs"], "metrics": ["metrics"]}
# what a command should import only when it needs it
HEAVY = ("prefect", "pandas", "matplotlib", "scipy", "statsmodels", "arch", "duckdb", "httpx",
         "jinja2", "aiohttp", "uvicorn")


def _env(source: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PYTHONPATH"] = str(source)
    env["COLUMNS"] = "100"
    return env


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _time(args: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one `dualpath ARGS`."""
    cpu0, t0 = _children_cpu(), time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "dualpath", *args], cwd=cwd, env=env,
                       capture_output=True, text=True)
    took, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if r.returncode != 0:
        raise SystemExit(f"dualpath {' '.join(args)} exited {r.returncode}: {r.stderr[-500:]}")
    return took, cpu


def _imports(args: list[str], cwd: Path, env: dict) -> list[str]:
    """The heavy top-level packages the command imported (from `python -X importtime`)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "dualpath", *args], cwd=cwd,
                       env=env, capture_output=True, text=True)
    seen = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines()
            if line.startswith("import time:")}
    return [name for name in HEAVY if name in seen]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--source", type=Path, default=ROOT,
                    help="the checkout whose code is timed (default: this one)")
    a = ap.parse_args()
    from tests.seeded import seed_warehouse

    with tempfile.TemporaryDirectory(prefix="dualpath-startup-") as tmp:
        seed_warehouse(Path(tmp))
        env = _env(a.source.resolve())
        load_before = os.getloadavg()[0]
        seconds: dict[str, list[float]] = {name: [] for name in COMMANDS}
        cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
        for _ in range(a.repeat):
            for name, args in COMMANDS.items():
                wall, used = _time(args, Path(tmp), env)
                seconds[name].append(wall)
                cpu[name].append(used)
        load_after = os.getloadavg()[0]
        for name, args in COMMANDS.items():
            runs = " ".join(f"{s:.2f}" for s in seconds[name])
            heavy = ", ".join(_imports(args, Path(tmp), env)) or "none of them"
            print(f"dualpath {' '.join(args):<9} median {statistics.median(seconds[name]):.2f} s "
                  f"({runs}), CPU {statistics.median(cpu[name]):.2f} s; imports {heavy}")
    medians = " ".join(f"{name}_s={statistics.median(s):.2f}" for name, s in seconds.items())
    print(f"{medians} (median of {a.repeat}; load {load_before:.1f} before, "
          f"{load_after:.1f} after; code {a.source})")


if __name__ == "__main__":
    main()
