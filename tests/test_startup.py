"""What a command pays before it does anything: `--help` and `runs` import only what they use
(checked in a fresh interpreter, as a person's shell starts one), and a rerun of a night that
is already complete says so without starting Prefect or any server, writing nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dualpath.flows.complete import complete_night
from tests.cli_run import run_cli
from tests.seeded import seed_warehouse
from dualpath.warehouse.db import reader, writer

ROOT = Path(__file__).resolve().parents[1]
PROBE = """import runpy, sys
sys.argv = ["dualpath", *sys.argv[1:]]
try:
    runpy.run_module("dualpath", run_name="__main__")
except SystemExit:
    pass
print("imported:", " ".join(m for m in {heavy!r} if m in sys.modules))
"""


def imported(args: list[str], heavy: list[str], cwd: Path) -> tuple[str, str]:
    """(the command's output, the `heavy` packages it imported) in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    r = subprocess.run([sys.executable, "-c", PROBE.format(heavy=heavy), *args], cwd=cwd,
                       env=env, capture_output=True, text=True, timeout=120)
    *out, last = r.stdout.splitlines()
    assert last.startswith("imported:"), r.stdout + r.stderr
    return "\n".join(out), last.removeprefix("imported:").strip()


def test_help_imports_neither_prefect_pandas_nor_matplotlib(tmp_path):
    out, heavy = imported(["--help"], ["prefect", "pandas", "matplotlib"], tmp_path)
    assert "Score nights" in out and "nightly" in out       # the help itself was printed
    assert heavy == ""


def test_runs_imports_no_prefect_scipy_matplotlib_or_simulated_server(tmp_path):
    cfg_path, _, nights = seed_warehouse(tmp_path)
    out, heavy = imported(["runs", "-c", str(cfg_path)],
                          ["prefect", "scipy", "matplotlib", "uvicorn"], tmp_path)
    assert nights[0].isoformat() in out                      # the runs were listed
    assert heavy == ""


def _complete_seeded(tmp_path: Path):
    """The seeded warehouse with its runs stored under this config (the seed writes a
    placeholder hash): every night complete on both paths but the last."""
    cfg_path, cfg, nights = seed_warehouse(tmp_path)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("UPDATE runs SET config_hash = ?", [cfg.fingerprint()])
    return cfg_path, cfg, nights


def _stored(cfg) -> list:
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        return [con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in ("runs", "run_segments", "server_sessions", "units")]


def test_a_rerun_of_a_complete_night_says_so_and_starts_nothing(tmp_path):
    cfg_path, cfg, nights = _complete_seeded(tmp_path)
    before = _stored(cfg)
    r = run_cli("nightly", "-c", cfg_path, "--date", nights[0].isoformat())
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout == (f"night {nights[0]} is already complete on every path (main, backup): "
                        "nothing to score; `dualpath runs` lists its runs\n")
    # no run, segment, server session or unit written; Prefect never set up (the CLI makes
    # its home before it starts it), and no path's journal opened (scoring writes it first)
    assert _stored(cfg) == before
    assert not cfg.resolve(Path(".dualpath/prefect")).exists()
    assert list(cfg.resolve(cfg.warehouse.runs_dir).rglob("journal.jsonl")) == []


def test_a_night_is_complete_only_when_every_path_is_under_this_config(tmp_path):
    cfg_path, cfg, nights = _complete_seeded(tmp_path)
    assert complete_night(cfg, nights[0]) == ["main", "backup"]
    assert complete_night(cfg, nights[0], ["main"]) == ["main"]
    # the seed's last night: backup partial, main complete
    assert complete_night(cfg, nights[-1]) is None
    assert complete_night(cfg, nights[-1], ["main"]) == ["main"]
    # a night never scored, and a run stored under another config, are left to the night
    assert complete_night(cfg, nights[-1].replace(year=nights[-1].year + 1)) is None
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("UPDATE runs SET config_hash = 'another' WHERE night = ? AND path = 'main'",
                    [nights[0]])
    assert complete_night(cfg, nights[0]) is None


def test_no_warehouse_yet_is_not_a_complete_night(tmp_path):
    cfg_path, cfg, nights = seed_warehouse(tmp_path)
    cfg.resolve(cfg.warehouse.path).unlink()
    assert complete_night(cfg, nights[0]) is None


def test_the_flow_returns_a_complete_night_as_stored_without_scoring(tmp_path,
                                                                     prefect_harness):
    """A deployment's rerun (no CLI in front): the flow itself sees the night is done before
    it checks, launches or connects to any server (none runs here: the seed started none)."""
    import asyncio

    from dualpath.flows.nightly import nightly_local

    cfg_path, cfg, nights = _complete_seeded(tmp_path)
    before = _stored(cfg)

    async def go():
        state = await nightly_local(str(cfg_path), nights[0], return_state=True)
        return state, await state.result(raise_on_failure=False)
    state, result = asyncio.run(go())
    assert state.is_completed()
    assert {r["path"]: r["status"] for r in result["runs"]} == {"main": "complete",
                                                                "backup": "complete"}
    assert {p: o["status"] for p, o in result["outcomes"].items()} == {
        "main": "nothing_to_do", "backup": "nothing_to_do"}
    assert _stored(cfg) == before
    assert list(cfg.resolve(cfg.warehouse.runs_dir).rglob("journal.jsonl")) == []
