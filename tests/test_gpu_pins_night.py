"""A night refuses a path whose GPU reads otherwise than its `[paths.X.expect.gpu]` pins, as
it refuses a server that is not the model the path expects: the path is recorded failed with
the field and the value to write, and the other path is scored."""

from __future__ import annotations

from dualpath.demo import demo_config_data
from dualpath.flows.demo import synthetic_project
from tests.helpers import SimFleet, ingest, score_night_plain
from dualpath.warehouse.db import reader
from dualpath.warehouse.queries import run_summaries


def _project(root, gpu_pin: dict):
    data = demo_config_data(root, 3, 1, 0.01)
    data["paths"]["backup"].setdefault("expect", {})["gpu"] = gpu_pin
    _, cfg, market, _ = synthetic_project(root, data, 1)
    return cfg, market.nights(1)[0]


def _runs(cfg, night) -> dict[str, tuple[str, str | None]]:
    """Per path: (status, status_detail) of the night's run, from the warehouse."""
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, night, fleet.urls)
    ingest(cfg, works)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        runs = run_summaries(con)
    return {r.path: (r.status, r.status_detail) for r in runs.itertuples()}


def test_a_gpu_that_differs_from_its_pin_refuses_the_path_naming_the_value(tmp_path):
    # the simulated backup GPU reports a 210 W limit and a Gen4 x16 link
    cfg, night = _project(tmp_path, {"power_limit_w": 300, "pcie": "Gen4 x16"})
    runs = _runs(cfg, night)
    assert runs["main"][0] == "complete"
    assert runs["backup"] == ("failed", (
        "0 of 3 units measured; 3 never started; IdentityError: gpu.power_limit_w: expected "
        "300, GPU 0 reads 210; if this GPU is the "
        "one meant, write power_limit_w = 210 under [paths.backup.expect.gpu]"))


def test_a_gpu_that_matches_its_pins_is_scored(tmp_path):
    cfg, night = _project(tmp_path, {"power_limit_w": 210, "pcie": "Gen4 x16",
                                     "model": "simulated Radeon AI PRO R9700",
                                     "vram_total_mb": 32768})
    assert {p: s for p, (s, _) in _runs(cfg, night).items()} == {"main": "complete",
                                                                 "backup": "complete"}
