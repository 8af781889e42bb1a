"""The speed lines say what the numbers say: a slowdown below 1 reads as faster, and a path
whose calls mostly ran away to max_tokens is flagged beside the seconds it distorts."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from dualpath.evals.headline import Slowdown, runaway_shares, speed_lines

V = SimpleNamespace(candidate="backup", baseline="main")


def _slowdown(ratio: float, lo: float, hi: float) -> Slowdown:
    return Slowdown("main", "backup", "throughput", "", ratio, lo, hi, 0.95, 12, 300.0,
                    276.0, 2, {"backup": 1.5, "main": 1.7}, 20, 20,
                    {"backup": 1.5, "main": 1.7})


def test_a_slowdown_below_one_reads_as_faster():
    lines = speed_lines(_slowdown(0.92, 0.88, 0.96), V)
    assert lines[0] == ("Speed — how much slower is backup?  1.1× faster than main "
                        "(95% CI 1.0×–1.1×, 12 paired nights)")


def test_a_runaway_share_above_20_percent_is_flagged_beside_the_seconds():
    speed = pd.DataFrame({"path": ["backup", "main"], "runaway_share": [0.94, 0.05]})
    flags = runaway_shares(speed, V)
    assert flags == {"backup": 0.94}
    lines = speed_lines(_slowdown(6.0, 5.8, 6.2), V, None, flags)
    assert lines[1].startswith("  throughput basis")
    assert lines[2] == ("  runaway: 94% of backup's calls hit max_tokens (over 20%): "
                        "its s/ticker times capped answers too")
    assert all(len(ln) <= 100 for ln in lines)
    assert runaway_shares(speed.assign(runaway_share=[0.2, 0.1]), V) == {}
