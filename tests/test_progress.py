"""The night's progress log: every 30 s from the night's start, each path's units, elapsed
from the night's start, ETA at the path's own rate, the slower path named."""

from __future__ import annotations

import asyncio
import logging

from dualpath.flows.progress import LoggedProgress


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_line_times_each_path_from_the_nights_start_and_names_the_slower(caplog):
    clock, log = Clock(), logging.getLogger("t")
    p = LoggedProgress(log, totals={"main": 40, "backup": 40}, clock=clock)
    clock.t += 30
    assert p.line() == ("0m30s since the night's start: main 0/40 units, 0 calls, ETA — (no "
                        "unit finished yet); backup 0/40 units, 0 calls, ETA — (no unit "
                        "finished yet)")
    p("main", 10, 40, 170)
    assert p.line().endswith("main 10/40 units, 170 calls, ETA 1m30s at its own rate; "
                             "backup (slower) 0/40 units, 0 calls, ETA — (no unit finished yet)")
    clock.t += 150                                  # 3 min in
    p("backup", 4, 40, 68)
    with caplog.at_level(logging.INFO):
        p("main", 40, 40, 680)
    assert caplog.messages == ["main: 40/40 units, 680 calls, done 3m00s after the night's start"]
    assert p.line() == ("3m00s since the night's start: main 40/40 units, 680 calls, done at "
                        "3m00s; backup (slower) 4/40 units, 68 calls, ETA 27m00s at its own "
                        "rate")


def test_it_logs_every_interval_until_cancelled(caplog):
    async def go():
        p = LoggedProgress(logging.getLogger("t"), every_s=0.01, totals={"backup": 4})
        task = asyncio.create_task(p.run())
        await asyncio.sleep(0.05)
        task.cancel()

    with caplog.at_level(logging.INFO):
        asyncio.run(go())
    assert len(caplog.messages) >= 2
    assert all("since the night's start: backup 0/4 units" in m for m in caplog.messages)
