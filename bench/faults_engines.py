"""Fault trial `engine_mismatch`, for `bench/faults.py`: every wrong engine/server pairing.

A simulated llama-server, vLLM and SGLang (each answering as its real server does: /props,
/version, /server_info, /v1/models' owned_by, its /metrics prefix) stand behind the backup
path, whose `engine` names each of the two others in turn (6 pairings). Through the console
script, as a person runs them, `check --connect`, `doctor` and `nightly` must each refuse the
pairing in one line naming both engines, with no traceback, and nothing of the night may be
scored. A pairing any command lets through counts as an undetected swap.

    python -m bench.faults_engines
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import tomllib
from itertools import permutations
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "dualpath"
BUILDS = {"llama.cpp": "b9251-e2b129e1b", "vllm": "vllm-0.33.0", "sglang": "sglang-0.5.23"}
ALIAS = "qwen3.6-35b-a3b"


def _config(lab, night, engine: str, url: str) -> Path:
    """The lab's config with the backup path attached to `url` as `engine`, beside the
    lab's (its warehouse and runs folder the same)."""
    from dualpath.config_files import dump_toml

    data = tomllib.loads(lab.cfg_path.read_text())
    data["paths"]["backup"] = {"engine": engine, "base_url": url, "model": ALIAS, "slots": 4}
    # `check` refuses a universe too small for RankIC before it would contact a server:
    # the synthetic market's next names (nothing is scored, so no prices are needed)
    universe = data["experiment"]["universe"]
    universe += [f"SYN{i:03d}" for i in range(len(universe), 5)]
    path = lab.cfg_path.with_name(f"engine-{engine}-{night.isoformat()}.toml")
    path.write_text(dump_toml(data))
    return path


def _refused(args: list[str], configured: str, server: str) -> tuple[bool, int, str]:
    """(refused in one line naming both, tracebacks seen, what was wrong)."""
    r = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env=_env())
    out = r.stdout + r.stderr
    seen = out.count("Traceback (most recent call last)")
    named = f"config says engine {configured}, the server answers as {server} "
    if args[0] == "doctor":
        ok = r.returncode == 1 and any(ln.startswith("✗ backup: engine: " + named)
                                       for ln in r.stdout.splitlines())
    else:
        ok = r.returncode == 2 and r.stderr.startswith("error: path backup: " + named) \
            and len(r.stderr.strip().splitlines()) == 1
    return ok, seen, "" if ok else f"{args[0]} {configured}@{server}: exit {r.returncode}"


def _env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("DUALPATH_", "PREFECT_API"))}
    return {**env, "COLUMNS": "400"}


def _scored(lab, night) -> int:
    """Journals and stored runs of the night (a refused pairing leaves none)."""
    from dualpath.warehouse.db import reader

    runs = lab.cfg.resolve(lab.cfg.warehouse.runs_dir)
    journals = len(list(runs.glob(f"*/{night.isoformat()}/*/journal.jsonl")))
    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        stored = con.execute("SELECT count(*) FROM runs WHERE night = ?",
                             [night.isoformat()]).fetchone()[0]
    return journals + stored


def engine_mismatch(lab, night, t) -> None:
    """Each wrong (configured engine, server) pairing, refused by check --connect, doctor and
    nightly; nothing scored."""
    from dualpath.config import SimProfile
    from dualpath.sim.running import serve_in_thread

    servers = {d: serve_in_thread(SimProfile(dialect=d, build=b, model_alias=ALIAS,
                                             time_scale=1e-4))
               for d, b in BUILDS.items()}
    bad: list[str] = []
    try:
        for configured, server in permutations(BUILDS, 2):
            cfg = _config(lab, night, configured, servers[server].url)
            caught = True
            for args in (["check", "--connect", "-c", str(cfg)], ["doctor", "-c", str(cfg)],
                         ["nightly", "-c", str(cfg), "--date", night.isoformat()]):
                t.injected += 1
                ok, seen, why = _refused(args, configured, server)
                t.tracebacks += seen
                caught &= ok
                bad += [why] if why else []
            t.undetected_swap += int(not caught)
    finally:
        for s in servers.values():
            s.stop()
    scored = _scored(lab, night)
    t.detected = not bad and scored == 0
    t.detail = "; ".join(bad) or (f"6 pairings x check --connect, doctor, nightly: "
                                  f"{t.injected} refused in one line, {scored} scored")
    t.night = False


ENGINE_TRIALS = {"engine_mismatch": engine_mismatch}


def main() -> None:
    from bench.faultlab import Lab
    from bench.faults_cli import _Trial

    with tempfile.TemporaryDirectory() as root, \
            Lab(Path(root), tickers=4, draws=1, nights=2) as lab:
        t = _Trial("engine_mismatch")
        t.undetected_swap = 0
        t0 = time.monotonic()
        engine_mismatch(lab, lab.nights[0], t)
        print(f"engine_mismatch injected={t.injected} detected={'yes' if t.detected else 'NO'}"
              f" undetected_swaps={t.undetected_swap} tracebacks={t.tracebacks} "
              f"{time.monotonic() - t0:5.1f}s  {t.detail}")


if __name__ == "__main__":
    main()
