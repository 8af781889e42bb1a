""""The same config", defined once: `Config.fingerprint()` hashes the tickers a night is
scored from, and the resume guard, each run's hash and the preregistration agree on it."""

from __future__ import annotations

import pytest

from dualpath.config import load_config
from dualpath.errors import UserError
from dualpath.prereg import deviations, draft_plan
from dualpath.flows import runner
from tests.helpers import SimFleet, make_project, score_night_plain


def with_universe_file(cfg_path, tickers):
    """The project's config with its universe moved to a file (same tickers)."""
    (cfg_path.parent / "universe.txt").write_text("\n".join(tickers) + "\n")
    text = cfg_path.read_text()
    start = text.index("universe = [")
    end = text.index("]", start) + 1
    cfg_path.write_text(text[:start] + 'universe_file = "universe.txt"' + text[end:])
    return load_config(cfg_path)


def test_the_universe_counts_by_its_tickers_not_by_the_file_that_lists_them(tmp_path):
    cfg_path, inline, _ = make_project(tmp_path, tickers=3, draws=1, nights=1)
    from_file = with_universe_file(cfg_path, inline.tickers())
    assert from_file.fingerprint() == inline.fingerprint()
    (tmp_path / "universe.txt").write_text("\n".join(inline.tickers()[:2]) + "\n")
    assert load_config(cfg_path).fingerprint() != inline.fingerprint()


def test_a_resumed_night_whose_universe_file_changed_is_refused(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=3, draws=1, nights=1)
    cfg = with_universe_file(cfg_path, cfg.tickers())
    plan = draft_plan(cfg, nights[0], 2)
    assert deviations(plan, cfg) == []
    with SimFleet(cfg) as fleet:
        score_night_plain(cfg, nights[0], fleet.urls, stop_after_units=1)
    # the file edited between the two segments: another ticker in place of the last
    (tmp_path / "universe.txt").write_text("\n".join(cfg.tickers()[:2] + ["SYN099"]) + "\n")
    edited = load_config(cfg_path)
    with pytest.raises(UserError, match="was started with a different config"):
        runner.plan_night(edited, nights[0])
    # the preregistration sees the same change through the same definition
    assert any("universe changed" in d for d in deviations(plan, edited))
