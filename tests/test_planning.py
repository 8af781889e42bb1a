"""The night window: durations estimated from measured speed, a deadline that is honoured."""

import asyncio
import time
from datetime import datetime, timezone

from typer.testing import CliRunner

from dualpath.cli import app
from dualpath.flows import inputs, runner
from dualpath.flows.planning import estimates, seconds_until
from tests.helpers import SimFleet, ingest, make_project, score_night_plain


def test_seconds_until_the_next_deadline_in_market_time():
    # 2027-05-03 12:00 UTC is 21:00 in Seoul: 07:00 is ten hours later, the next morning
    now = datetime(2027, 5, 3, 12, 0, tzinfo=timezone.utc)
    assert seconds_until("07:00", "Asia/Seoul", now) == 10 * 3600
    assert seconds_until("22:00", "Asia/Seoul", now) == 3600


def test_estimates_come_from_measured_runs_and_say_so(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=4, draws=1, nights=2)
    assert {e.source for e in estimates(cfg)} == {"time model (no measurements yet)"}
    with SimFleet(cfg) as fleet:
        for n in nights:
            ingest(cfg, score_night_plain(cfg, n, fleet.urls))
    est = {e.path: e for e in estimates(cfg)}
    assert est["backup"].source.startswith("measured (2 runs")
    assert est["backup"].lo <= est["backup"].s_per_unit <= est["backup"].hi
    assert est["backup"].s_per_unit > est["main"].s_per_unit       # the slower path is slower
    r = CliRunner().invoke(app, ["plan", "-c", str(cfg_path), "--tickers", "100", "--draws",
                                 "3", "--window-hours", "8"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "100 tickers × 3 draws" in r.output and "measured (2 runs" in r.output
    assert "draws_that_fit" in r.output


def test_a_deadline_stops_the_night_partial_never_complete(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1, clock=5.0)
    history = inputs.price_history(cfg)
    work = runner.plan_path(cfg, nights[0], "backup")
    with SimFleet(cfg) as fleet:
        out = asyncio.run(runner.run_path(cfg, nights[0], work, history, {},
                                          override_url=fleet.urls["backup"],
                                          deadline_mono=time.monotonic() + 1.0))
    assert out.status in ("partial", "failed") and "deadline passed" in out.reason
    assert out.units_done < 12
