"""The deployment file points at the real flow with parameters the flow accepts."""

import importlib
import inspect
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_prefect_yaml_entrypoints_and_schedules():
    spec = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    names = {}
    for dep in spec["deployments"]:
        module_path, func = dep["entrypoint"].split(":")
        mod = importlib.import_module(module_path.removesuffix(".py").replace("/", "."))
        flow = getattr(mod, func)
        names[dep["name"]] = flow.name
        assert set(dep["parameters"]) <= set(inspect.signature(flow.fn).parameters)
        assert dep["schedules"][0]["timezone"] == "Asia/Seoul"
        assert dep["concurrency_limit"] == 1
    assert names == {"nightly": "dualpath-nightly", "weekly-report": "dualpath-weekly-report"}
