"""The scheduled deployment as a user runs it: a real `prefect server`, `dualpath deploy`, a
`prefect worker` on a process pool, a triggered night on simulated paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers import make_project
from dualpath.warehouse.db import reader

BIN = Path(sys.executable).parent

TRIGGER = """
import asyncio, json, sys
from prefect.deployments import run_deployment
from prefect.client.orchestration import get_client

async def main():
    run = await run_deployment(sys.argv[2], timeout=300, poll_interval=1,
                               parameters=json.loads(sys.argv[1]))
    async with get_client() as c:
        arts = [a.data for a in await c.read_artifacts() if a.flow_run_id == run.id]
    print(json.dumps({"state": run.state.type.value, "name": run.name,
                      "message": run.state.message, "artifacts": arts}))
asyncio.run(main())
"""


def env_for(api: str, tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_API_URL=api, PREFECT_HOME=str(tmp_path / "prefect-client"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false",
               # a worker, a served runner and the trigger each poll every second, not every
               # 10, 10 and 5 s (Prefect's defaults): a night here lasts seconds
               PREFECT_WORKER_QUERY_SECONDS="1", PREFECT_RUNNER_POLL_FREQUENCY="1")
    return env


def trigger(env: dict, deployment: str = "dualpath-nightly/nightly-demo", **params) -> dict:
    r = subprocess.run([sys.executable, "-c", TRIGGER, json.dumps(params), deployment], env=env,
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_deploy_then_a_worker_runs_the_scheduled_night(tmp_path, prefect_api):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=3, draws=1, nights=1)
    down = tmp_path / "down.toml"            # the same night with the backup unreachable
    down.write_text(cfg_path.read_text().replace('name = "demo"', 'name = "demo-down"').replace(
        '[paths.backup]\nengine = "sim"', '[paths.backup]\nengine = "sim"\n'
        'base_url = "http://127.0.0.1:9"'))
    env = env_for(prefect_api, tmp_path)
    d = subprocess.run([str(BIN / "dualpath"), "deploy", "-c", str(cfg_path), "--pool",
                        "dp-test"], env=env, capture_output=True, text=True, timeout=300)
    assert d.returncode == 0, d.stdout + d.stderr
    assert "deployed dualpath-nightly/nightly-demo " in d.stdout
    assert "deployed dualpath-weekly-report/weekly-report-demo " in d.stdout
    worker = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "dp-test"],
                              env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ok = trigger(env, night=nights[0].isoformat())
        failed = trigger(env, night=nights[0].isoformat(), config_path=str(down.resolve()))
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:     # a worker still shutting down is not the test
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=60)
    assert ok["state"] == "COMPLETED", ok
    assert ok["name"] == f"demo/{nights[0].isoformat()}"
    assert "| main | **complete** |" in ok["artifacts"][0]
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        rows = con.execute("SELECT path, status, units_planned FROM runs WHERE experiment = 'demo' "
                           "ORDER BY 1").fetchall()
        calls = con.execute("SELECT count(*) FROM calls WHERE run_id LIKE 'demo/%'").fetchone()[0]
    assert rows == [("backup", "complete", 3), ("main", "complete", 3)] and calls == 2 * 3 * 17
    assert failed["state"] == "FAILED", failed
    assert "backup failed" in failed["message"] and failed["name"].startswith("demo-down/")


def test_deploy_then_serve_coexist_and_a_second_config_cannot_take_them_over(tmp_path,
                                                                          prefect_api):
    """`serve` once upserted the worker deployment of the same name (its pool kept, its
    source lost: the next run crashed in '…/None'); a second config of the same experiment
    silently took the deployments over; `doctor` showed ✓ for deployments of another config."""
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1,
                                         experiment={"name": "served"})
    env = env_for(prefect_api, tmp_path)
    run = lambda *a: subprocess.run([str(BIN / "dualpath"), *a], env=env, capture_output=True,
                                    text=True, timeout=300, cwd=tmp_path)
    d = run("deploy", "-c", str(cfg_path), "--pool", "dp-serve")
    assert d.returncode == 0, d.stdout + d.stderr
    served = subprocess.Popen([str(BIN / "dualpath"), "serve", "-c", str(cfg_path)], env=env,
                              cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        waited = subprocess.run([sys.executable, "-c", DEPLOYMENT_OF,
                                 "dualpath-nightly/nightly-served-served", "wait"],
                                env=env, capture_output=True, text=True, timeout=200)
        assert waited.returncode == 0, waited.stderr[-2000:]
        ok = trigger(env, "dualpath-nightly/nightly-served-served", night=nights[0].isoformat())
    finally:
        os.killpg(served.pid, signal.SIGTERM)
        _, err = served.communicate(timeout=60)
    assert ok["state"] == "COMPLETED", ok
    assert "dualpath-nightly/nightly-served (dualpath deploy) also schedules" in err
    check = subprocess.run([sys.executable, "-c", DEPLOYMENT_OF, "dualpath-nightly/nightly-served"],
                           env=env, capture_output=True, text=True, timeout=120)
    pool, steps = json.loads(check.stdout.strip().splitlines()[-1])
    assert pool == "dp-serve" and steps            # the worker's deployment kept its source

    other = tmp_path / "other.toml"
    other.write_text(cfg_path.read_text())
    refused = run("deploy", "-c", str(other), "--pool", "dp-serve")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert (f"deployment dualpath-nightly/nightly-served runs {cfg_path.resolve()}: experiment "
            "'served' is bound to that config") in refused.stderr
    doc = run("doctor", "-c", str(other))
    line, = [ln for ln in doc.stdout.splitlines() if "prefect: deployments" in ln]
    assert line.startswith("✗") and f"nightly-served runs {cfg_path.resolve()}, not this config" in line
    doc = run("doctor", "-c", str(cfg_path))
    line, = [ln for ln in doc.stdout.splitlines() if "prefect: deployments" in ln]
    assert line.startswith("✓") and "dualpath-nightly/nightly-served," in line


DEPLOYMENT_OF = """
import asyncio, json, sys
from prefect.client.orchestration import get_client

from prefect.exceptions import ObjectNotFound

async def main():
    for _ in range(180):            # with 'wait': until `dualpath serve` has registered it
        try:
            async with get_client() as c:
                d = await c.read_deployment_by_name(sys.argv[1])
            break
        except ObjectNotFound:
            if sys.argv[2:] != ["wait"]:
                raise
            await asyncio.sleep(1)
    print(json.dumps([d.work_pool_name, d.pull_steps]))
asyncio.run(main())
"""
