"""One experiment per server, sampling parity, and load that is not dualpath's."""

import asyncio

import httpx
import pytest

from dualpath.identity import sampling_differences
from dualpath.locks import EndpointBusy, endpoint_lock
from dualpath.sim.fleet import SimFleet
from dualpath.flows import inputs, runner
from tests.helpers import ingest, make_project, score_night_plain
from dualpath.warehouse.db import reader
from dualpath.flows.report import run_warnings


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
    from dualpath.evals.scores import usable_units
    from dualpath.warehouse.db import writer
    from dualpath.warehouse.frames import units_frame

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


# --- identity and restarts during the run (llama.cpp dialect, behind one port) -----------

def _backup_behind_proxy(tmp_path, sim_server):
    """A project whose backup path re-reads identity every 50 ms, its simulated server
    (llama.cpp dialect) behind a proxy port that another server can be put behind."""
    from dualpath.config import load_config
    from dualpath.sim.proxy import FaultProxy

    cfg_path, cfg, nights = make_project(tmp_path, tickers=4, draws=2, nights=1, clock=1.0)
    cfg_path.write_text(cfg_path.read_text().replace(
        "[paths.backup]\n", "[paths.backup]\nidentity_poll_s = 0.05\n"))
    cfg = load_config(cfg_path)
    profile = {**cfg.paths["backup"].sim.model_dump(), "time_scale": 2e-3}
    first = sim_server(slots=4, **profile)
    return cfg, nights[0], profile, first, FaultProxy(first.url)


def _score_with_change(cfg, night, proxy, new_upstream: str):
    """Score the backup path; after two units, put `new_upstream` behind the port."""
    from dualpath.sim.proxy import wait_until

    history = inputs.price_history(cfg)
    work = runner.plan_path(cfg, night, "backup")

    async def go():
        task = asyncio.create_task(runner.run_path(cfg, night, work, history, {},
                                                   override_url=proxy.url))
        await asyncio.to_thread(wait_until, lambda: len(runner.read_journal(work.journal).units) >= 2)
        proxy.upstream = new_upstream
        return await task
    return asyncio.run(go()), work


def test_a_swap_to_more_slots_is_caught_by_the_re_read_identity(tmp_path, sim_server):
    """Same alias, same build, same port: only /props total_slots tells the servers apart."""
    cfg, night, profile, first, proxy = _backup_behind_proxy(tmp_path, sim_server)
    with proxy:
        eight = sim_server(slots=8, **profile)
        outcome, work = _score_with_change(cfg, night, proxy, eight.url)
    assert outcome.status != "complete" and "slots 4 -> 8" in outcome.reason
    ingest(cfg, [work])
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        problem = con.execute("SELECT identity_problem FROM server_sessions").fetchone()[0]
        flagged = con.execute("SELECT count(*) FROM calls WHERE contaminated IS NOT NULL"
                              ).fetchone()[0]
    assert "slots 4 -> 8" in problem and flagged > 0


def test_a_restart_on_the_same_port_is_recorded_and_not_compared(tmp_path, sim_server):
    """A fresh server with the same identity: no contamination, but its counters restarted,
    so `runs --evidence` says the session cannot be compared instead of comparing."""
    from dualpath.warehouse.queries import server_evidence

    cfg, night, profile, first, proxy = _backup_behind_proxy(tmp_path, sim_server)
    with proxy:
        fresh = sim_server(slots=4, **profile)
        outcome, work = _score_with_change(cfg, night, proxy, fresh.url)
    assert outcome.status == "complete"
    ingest(cfg, [work])
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        ev = server_evidence(con).set_index("path")
    row = ev.loc["backup"]
    assert row["restarts"] >= 1 and not row["comparable"] and "restarted" in row["note"]
    assert __import__("pandas").isna(row["server_prompt_tokens"])      # not compared


def test_counters_going_down_mean_a_restart():
    from dualpath.flows.watch import counters_went_down

    before = {"llamacpp:n_requests_total": 10.0, "llamacpp:requests_processing": 3.0}
    assert counters_went_down(before, {"llamacpp:n_requests_total": 12.0,
                                       "llamacpp:requests_processing": 0.0}) == []
    assert counters_went_down(before, {"llamacpp:n_requests_total": 2.0}) == [
        "llamacpp:n_requests_total"]
    assert counters_went_down({"process_start_time_seconds": 1.0},
                              {"process_start_time_seconds": 2.0}) == ["process_start_time_seconds"]
    assert counters_went_down(None, before) == []


def test_a_planted_key_is_sent_but_never_stored_or_printed(tmp_path, monkeypatch):
    """The key travels in the Authorization header only: not in the journal, any warehouse
    column, or what the CLI prints."""
    from dualpath.config import load_config
    from dualpath.sim.proxy import FaultProxy
    from tests.cli_run import run_cli

    key = "sk-planted-7c1e9a42"
    monkeypatch.setenv("DUALPATH_TEST_PLANTED_KEY", key)
    cfg_path, cfg, nights = make_project(tmp_path, tickers=2, draws=1, nights=1)
    cfg_path.write_text(cfg_path.read_text().replace(
        "[paths.backup]\n", '[paths.backup]\napi_key_env = "DUALPATH_TEST_PLANTED_KEY"\n'))
    cfg = load_config(cfg_path)
    with SimFleet(cfg) as fleet, FaultProxy(fleet.urls["backup"]) as proxy:
        works = score_night_plain(cfg, nights[0], {**fleet.urls, "backup": proxy.url})
    ingest(cfg, works)
    # every request to the path carried the key: chat, identity, load and metrics reads
    assert {"/v1/chat/completions", "/props", "/v1/models", "/slots", "/metrics"} <= set(proxy.requests)
    assert proxy.authorized == proxy.requests
    for f in tmp_path.rglob("*"):
        if f.is_file() and f.suffix not in (".duckdb", ".wal"):
            assert key.encode() not in f.read_bytes(), f
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        cols = con.execute("""SELECT table_name, column_name FROM information_schema.columns
                              WHERE data_type = 'VARCHAR' AND table_schema = 'main'""").fetchall()
        hits = [(t, c) for t, c in cols if con.execute(
            f'SELECT count(*) FROM "{t}" WHERE "{c}" LIKE ?', [f"%{key}%"]).fetchone()[0]]
        hits += [("texts", "text")] if con.execute(
            "SELECT count(*) FROM texts WHERE text LIKE ?", [f"%{key}%"]).fetchone()[0] else []
    assert hits == []
    for args in (["sql", "SELECT * FROM server_sessions"], ["runs", "--evidence"]):
        r = run_cli(*args, "-c", str(cfg_path), "-f", "csv")     # in process, as `dualpath` runs
        assert r.returncode == 0 and key not in r.stdout + r.stderr, r.stderr
