"""A forced freeze writes its plan and its deviation in one transaction: a crash between the
two statements once kept the new plan and lost the record that it replaced another."""

import inspect

import pytest

from dualpath.prereg import draft_plan, plan_toml
from dualpath.flows.prereg import freeze_plan, plan_status
from tests.helpers import make_project
from dualpath.warehouse import plans
from dualpath.warehouse.db import reader


def _forced(cfg, plan_path):
    extra = {"reason": "test"} if "reason" in inspect.signature(freeze_plan).parameters else {}
    return freeze_plan(cfg, plan_path, force=True, **extra)


def test_a_crash_between_the_plan_and_its_deviation_loses_neither(tmp_path, monkeypatch):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=5, draws=1, nights=2)
    first = tmp_path / "a.toml"
    first.write_text(plan_toml(draft_plan(cfg, nights[0], 4, margin=0.03)))
    kept = freeze_plan(cfg, first, force=True, reason="a test window: its false reassurance is accepted")
    second = tmp_path / "b.toml"
    second.write_text(first.read_text().replace("margin = 0.03", "margin = 0.05", 1))

    def crash(*a, **k):
        raise KeyboardInterrupt          # the process dies between the two statements

    monkeypatch.setattr(plans, "record_deviation", crash)
    with pytest.raises(KeyboardInterrupt):
        _forced(cfg, second)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        hashes = [r[0] for r in con.execute("SELECT plan_hash FROM plans").fetchall()]
    assert hashes == [kept.plan_hash]                  # the new plan went with its deviation
    assert plan_status(cfg).deviations == []

    monkeypatch.undo()
    replaced = _forced(cfg, second)
    st = plan_status(cfg)
    assert st.frozen.plan_hash == replaced.plan_hash != kept.plan_hash
    assert [d["kind"] for d in st.deviations] == ["plan replaced"]
