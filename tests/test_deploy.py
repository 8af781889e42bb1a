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
    # named as `dualpath deploy` names the default experiment's
    from dualpath.flows.deploy import deployment_names
    assert {f"{flow}/{name}" for name, flow in names.items()} == set(
        deployment_names("dualpath").values())


def test_deployments_named_for_another_experiment_or_config_are_crossings():
    from dualpath.flows.deploy import crossings, deployment_names

    assert deployment_names("exp") == {"nightly": "dualpath-nightly/nightly-exp",
                                       "weekly-report": "dualpath-weekly-report/weekly-report-exp"}
    here, there = "/srv/a/dualpath.toml", "/srv/b/dualpath.toml"
    listed = [("dualpath-nightly/nightly-exp", {"config_path": here}),
              ("dualpath-nightly/nightly-exp-served", {"config_path": here}),
              ("dualpath-weekly-report/weekly-report-exp", {"config_path": there}),
              ("dualpath-nightly/nightly", {"config_path": here}),          # before names
              ("dualpath-nightly/nightly-other", {"config_path": there}),   # not ours
              ("dualpath-path-share/gpu-a", {"ship_every_s": 30})]
    good, problems = crossings(listed, "exp", here)
    assert good == ["dualpath-nightly/nightly-exp", "dualpath-nightly/nightly-exp-served"]
    assert problems == [
        "dualpath-nightly/nightly also runs this config but is not named for experiment 'exp' "
        "(an older or crossed deployment): delete it (prefect deployment delete "
        "dualpath-nightly/nightly)",
        f"dualpath-weekly-report/weekly-report-exp runs {there}, not this config ({here})"]
