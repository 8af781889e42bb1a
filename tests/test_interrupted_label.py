"""An interrupted run is partial, and says so; the requests it abandoned in flight are not
someone else's: it read `shared: the server generated 8,434 tokens more than this run
received` (the server finished or counted answers no call was left to receive)."""

from __future__ import annotations

from tests.helpers import SimFleet, ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader
from dualpath.warehouse.disturbed import DISTURBED


def test_a_run_cut_mid_flight_is_partial_and_not_shared(tmp_path):
    _, cfg, nights = make_project(tmp_path, tickers=6, draws=2, nights=1, clock=0.5)
    with SimFleet(cfg) as fleet:
        works = score_night_plain(cfg, nights[0], fleet.urls, stop_after_units=3)
    ingest(cfg, works)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        rows = con.execute(f"""SELECT r.path, r.status, s.detail, d.disturbed FROM runs r
                               JOIN run_segments s USING (run_id)
                               LEFT JOIN ({DISTURBED}) d USING (run_id) ORDER BY r.path""").fetchall()
    assert [(p, st, det) for p, st, det, _ in rows] == [("backup", "partial", "interrupted"),
                                                        ("main", "partial", "interrupted")]
    assert not any("shared" in (d or "") for *_, d in rows), rows
