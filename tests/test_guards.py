"""One experiment per server, sampling parity, and load that is not dualpath's."""

import asyncio

import httpx
import pytest

from dualpath.identity import sampling_differences
from dualpath.locks import EndpointBusy, endpoint_lock
from dualpath.sim.fleet import SimFleet
from flows import runner
from tests.helpers import ingest, make_project, score_night_plain
from warehouse.db import reader
from flows.report import run_warnings


def test_endpoint_lock_is_exclusive_per_host_and_port():
    with endpoint_lock("http://127.0.0.1:18999", "run A"):
        with pytest.raises(EndpointBusy, match=r"127.0.0.1:18999 is in use by .*run A"):
            with endpoint_lock("http://127.0.0.1:18999/", "run B"):
                pass
        with endpoint_lock("http://127.0.0.1:18998", "run C"):   # another port is free
            pass
    with endpoint_lock("http://127.0.0.1:18999", "run B"):          # released on exit
        pass


def test_sampling_differences_ignore_float32_noise_only():
    a = {"temperature": 0.699999988079071, "top_k": 20, "top_p": 0.8, "repeat_last_n": -1}
    b = {"temperature": 0.7, "top_k": 40, "top_p": 0.800000011920929, "repeat_last_n": 4096}
    diffs = sampling_differences(a, b, (4096, 4096))
    assert diffs == ["top_k: 20 vs 40"]     # -1 and n_ctx both mean "whole context"


def test_external_load_is_recorded_and_warned(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=3, draws=1, nights=1, clock=2.0)
    text = cfg_path.read_text().replace("[paths.backup.sim]", "load_poll_s = 0.01\n\n[paths.backup.sim]")
    cfg_path.write_text(text)
    from dualpath.config import load_config
    cfg = load_config(cfg_path)

    with SimFleet(cfg) as fleet:
        url = fleet.urls["backup"]
        stop = False

        async def intruder():
            body = {"model": "x", "max_tokens": 4096, "repeat_last_n": 64,
                    # a long prompt: each intruding request holds its slot for many polls
                    "messages": [{"role": "user", "content": "someone else's experiment " * 3000}]}
            async with httpx.AsyncClient(timeout=60) as http:
                while not stop:
                    await http.post(f"{url}/v1/chat/completions", json=body)

        import threading
        t = threading.Thread(target=lambda: asyncio.run(asyncio.wait_for(intruder(), 60)))
        t.start()
        try:
            plans = score_night_plain(cfg, nights[0], fleet.urls)
        finally:
            stop = True
            t.join()
    ingest(cfg, plans)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        loads = dict(con.execute("SELECT path, external_load_max FROM server_sessions").fetchall())
        warnings = run_warnings(con)
    assert loads["backup"] >= 1 and loads["main"] == 0
    assert any("backup" in w and "not dualpath's" in w for w in warnings)


def test_contaminated_units_are_kept_but_never_counted(tmp_path):
    from evals.scores import usable_units
    from warehouse.db import writer
    from warehouse.frames import units_frame

    cfg_path, cfg, nights = make_project(tmp_path, tickers=3, draws=1, nights=1)
    with SimFleet(cfg) as fleet:
        ingest(cfg, score_night_plain(cfg, nights[0], fleet.urls))
    with writer(cfg.resolve(cfg.warehouse.path)) as con:   # as if one answer came from elsewhere
        con.execute("""UPDATE calls SET contaminated = 'model ''gemma-other'' != ''gemma-a'''
                       WHERE call_id = (SELECT min(call_id) FROM calls WHERE path = 'backup')""")
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        units = units_frame(con, cfg.experiment.name)
        warnings = run_warnings(con)
    assert len(units) == 6 and (~units["clean"]).sum() == 1          # kept in the warehouse
    assert len(usable_units(units)) == 5                              # never in a metric
    assert any("contaminated" in w for w in warnings)
