"""The machinery of the fault trials (`bench/faults.py`): a small project on the synthetic
market, simulated servers in their own killable processes, one fault proxy per path, nights
scored in this process or in a child that can be killed, and the warehouse checks.

Every night is scored the way `dualpath nightly` scores it (plan, connect, identity, score
into the journal, ingest) minus Prefect, which adds only start-up time here.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from urllib.parse import urlsplit

from dualpath.config import Config, load_config
from dualpath.demo import demo_config_data, demo_market
from dualpath.procs import spawn, stop_process
from dualpath.sim.fleet import wait_ready
from dualpath.sim.proxy import FaultProxy
from dualpath.flows import inputs, runner
from dualpath.warehouse.db import reader, writer
from dualpath.warehouse.ingest import ingest_journals
from dualpath.warehouse.journal import read_journal
from dualpath.flows.demo import synthetic_project
from dualpath.warehouse.prices import import_prices, validate_prices

ROOT = Path(__file__).resolve().parents[1]
# Fast, bounded retries so that a trial takes seconds; a read timeout short enough that a
# hung request is given up quickly, long against a simulated call (tens of ms).
FAULT_PATH_SETTINGS = {"read_timeout_s": 1.0, "connect_timeout_s": 1.0, "backoff_s": 0.05,
                       "backoff_max_s": 0.4, "retry_after_max_s": 1.0, "max_attempts": 10,
                       "retry_budget_s": 30.0, "identity_poll_s": 0.1, "load_poll_s": 0.2,
                       # a killed server is waited for 5 s (60 by default), so server_kill_x3
                       # takes ~65 s, not ~200 s, and a same-port restart is still met
                       "server_down_wait_s": 5.0}


def make_lab_project(root: Path, tickers: int, draws: int, nights: int, clock: float,
                     real: bool = False):
    """A demo-shaped project: main (vLLM dialect, not streamed), backup (llama.cpp dialect,
    streamed, so both cut JSON and cut streams can be tried); prices imported. `real`: the
    backup path is a real llama-server (Gemma 3 270M, short JSON-graded answers)."""
    root.mkdir(parents=True, exist_ok=True)
    data = demo_config_data(root, tickers, draws, clock)
    data["experiment"]["name"] = "faults"
    for name, p in data["paths"].items():
        p.update(FAULT_PATH_SETTINGS)
        p["stream"] = name == "backup"
    if real:
        # a CPU prefill of a few thousand tokens takes seconds: a longer read timeout
        data["paths"]["backup"] = {
            "engine": "llama.cpp", "base_url": "http://127.0.0.1:9", "model": REAL_ALIAS,
            "slots": 4, "stream": True, "grade_format": "json",
            **FAULT_PATH_SETTINGS, "read_timeout_s": 30.0, "retry_budget_s": 120.0}
        data["sampling"]["max_tokens"] = 32
        data["pipeline"] = {"history_days": 20}
    path, cfg, market, _ = synthetic_project(root, data, nights)
    return path, cfg, market.nights(nights)


REAL_ALIAS = "gemma-backup"


class _Process:
    """A server process a trial can kill -9 or stop."""

    proc: subprocess.Popen | None

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc:
            stop_process(self.proc)


@dataclass
class RealServer(_Process):
    """A real llama-server (Gemma 3 270M) in its own process; same interface as SimServer."""

    binary: str
    model: str
    alias: str = REAL_ALIAS
    slots: int = 4
    port: int = 0
    proc: subprocess.Popen | None = None
    url: str = ""

    def start(self) -> "RealServer":
        import socket

        import httpx
        if not self.port:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [self.binary, "-m", self.model, "--alias", self.alias, "--host", "127.0.0.1",
                "--port", str(self.port), "-np", str(self.slots), "-c", str(4096 * self.slots),
                "-t", "2", "--metrics", "--slots", "--no-repack"]   # see tests/realserver.py
        self.proc = spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError("real llama-server did not start")


@dataclass
class SimServer(_Process):
    """A simulated server in its own process (kill -9 it; start another on its port)."""

    cfg: Config
    path: str
    slots: int | None = None
    profile_over: dict = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen | None = None
    url: str = ""

    def start(self) -> "SimServer":
        sp = self.cfg.paths[self.path]
        profile = sp.sim.model_copy(update=self.profile_over)
        argv = [sys.executable, "-m", "dualpath.sim", "--slots", str(self.slots or sp.slots),
                "--port", str(self.port), "--market-start",
                self.cfg.market.synthetic_start.isoformat(), "--profile",
                profile.model_dump_json()]
        self.proc = spawn(argv, stdout=subprocess.PIPE, text=True)
        self.url = wait_ready(self.path, self.proc, 30.0)
        self.port = int(self.url.rsplit(":", 1)[1])
        return self


class LabProxy(FaultProxy):
    """The fault proxy, plus `huge_answer`: the server's real answer with 50 MB of text
    appended to its content (an unstreamed chat completion)."""

    EXTRA = ("huge_answer",)
    huge_bytes = 50_000_000

    def inject(self, kind: str, n: int = 1) -> None:
        if kind not in self.EXTRA:
            return super().inject(kind, n)
        with self._lock:
            self._queue += [kind] * n

    async def _spoil(self, kind: str, body: bytes, writer) -> None:
        if kind != "huge_answer":
            return await super()._spoil(kind, body, writer)
        import orjson

        from dualpath.sim.proxy import _reply
        up = urlsplit(self.upstream)
        r, w = await asyncio.open_connection(up.hostname, up.port)
        w.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: %s:%d\r\ncontent-type: "
                b"application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
                % (up.hostname.encode(), up.port, len(body)) + body)
        await w.drain()
        raw = await r.read()
        w.close()
        answer = orjson.loads(raw.partition(b"\r\n\r\n")[2])
        answer["choices"][0]["message"]["content"] += "\n" + "x" * self.huge_bytes
        writer.write(_reply("200 OK", orjson.dumps(answer)))
        await writer.drain()


class Lab:
    """Servers and proxies for both paths of a project; nights scored through the proxies."""

    def __init__(self, root: Path, tickers: int = 4, draws: int = 2, nights: int = 20,
                 clock: float = 1.0, real: tuple[str, str] | None = None):
        """`real`: (llama-server binary, GGUF model) to put a real server on the backup path."""
        self.real = real
        self.cfg_path, self.cfg, self.nights = make_lab_project(root, tickers, draws, nights,
                                                                clock, real is not None)
        self.servers: dict[str, SimServer] = {}
        self.proxies: dict[str, FaultProxy] = {}
        self.spare: list[SimServer] = []

    def __enter__(self) -> "Lab":
        for name in self.cfg.paths:
            self.servers[name] = (RealServer(*self.real) if self.real and name == "backup"
                                  else SimServer(self.cfg, name)).start()
            self.proxies[name] = LabProxy(self.servers[name].url).__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for p in self.proxies.values():
            p.__exit__()
        for s in [*self.servers.values(), *self.spare]:
            s.stop()

    @property
    def urls(self) -> dict[str, str]:
        return {name: p.url for name, p in self.proxies.items()}

    def new_server(self, path: str, port: int = 0, **profile_over) -> SimServer:
        """Start another server for `path` (not yet behind its proxy)."""
        if self.real and path == "backup":
            new = RealServer(*self.real, alias=profile_over.get("model_alias", REAL_ALIAS),
                             slots=profile_over.get("slots", 4), port=port)
        else:
            new = SimServer(self.cfg, path, port=port, slots=profile_over.pop("slots", None),
                            profile_over=profile_over)
        for _ in range(50):             # a killed server's port may take a moment to free
            try:
                new.start()
                break
            except RuntimeError:
                time.sleep(0.1)
        self.spare.append(new)
        return new

    def put_behind(self, path: str, server: SimServer) -> None:
        """Make `server` the one behind the path's port (a swap, when it is another)."""
        self.servers[path] = server
        self.proxies[path].upstream = server.url

    def replace_server(self, path: str, same_port: bool = False, **profile_over) -> SimServer:
        """Start a server for `path` (on the old one's port when `same_port`) and use it."""
        port = self.servers[path].port if same_port else 0
        new = self.new_server(path, port, **profile_over)
        self.put_behind(path, new)
        return new

    def units_done(self, night: date) -> int:
        return sum(len(read_journal(runner.journal_path(self.cfg, night, p)).units)
                   for p in self.cfg.paths)

    def calls_done(self, night: date, path: str = "backup") -> int:
        j = runner.journal_path(self.cfg, night, path)
        return read_journal(j).call_lines if j.exists() else 0

    def running(self, night: date, path: str = "backup") -> bool:
        """The path's latest segment began and has not ended (a fault now hits it)."""
        j = runner.journal_path(self.cfg, night, path)
        jc = read_journal(j) if j.exists() else None
        return bool(jc and len(jc.begins) > len(jc.ends))

    def score(self, night: date, during=None) -> list:
        """Score the night in this process; `during(lab)` runs in a thread meanwhile."""
        return score_night(self.cfg, night, self.urls, during and (lambda: during(self)),
                           config_path=self.cfg_path)

    def ensure_prices(self) -> None:
        """The lab's prices again, when a rebuilt warehouse could not keep them."""
        market = demo_market(self.cfg, len(self.nights))
        raw = market.prices()
        raw = raw[raw["ticker"].isin(self.cfg.tickers())]
        with writer(self.cfg.resolve(self.cfg.warehouse.path)) as con:
            if con.execute("SELECT count(*) FROM prices").fetchone()[0] == 0:
                import_prices(con, validate_prices(raw, self.cfg.tickers())[0])

    def ingest(self, night: date) -> None:
        journals = [runner.journal_path(self.cfg, night, p) for p in self.cfg.paths]
        with writer(self.cfg.resolve(self.cfg.warehouse.path)) as con:
            ingest_journals(con, [j for j in journals if j.exists()])

    def child(self, night: date, *, ingest: bool = True) -> subprocess.Popen:
        """Score (and ingest) the night in a child process, as a harness that can be killed."""
        args = [sys.executable, "-m", "bench.faults", "--child", str(self.cfg_path),
                night.isoformat(), self.urls["main"], self.urls["backup"], str(int(ingest))]
        return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def score_night(cfg: Config, night: date, urls: dict[str, str], during=None,
                config_path: Path | None = None) -> list:
    """Score the night as the flow does: its lock held and the night claimed first."""
    with runner.hold_night(cfg, night):
        runner.claim_night(cfg, night, config_path)
        return _score_held(cfg, night, urls, during)


def _score_held(cfg: Config, night: date, urls: dict[str, str], during=None) -> list:
    works = runner.plan_night(cfg, night)
    history = inputs.price_history(cfg)
    missing = inputs.missing_inputs(cfg, history, night)

    async def go():
        tasks = [runner.run_path(cfg, night, w, history, missing, override_url=urls[w.path])
                 for w in works]
        if during is None:
            return await asyncio.gather(*tasks)
        side = asyncio.create_task(asyncio.to_thread(during))
        out = await asyncio.gather(*tasks)
        await side
        return out

    return asyncio.run(go())


def child_main(cfg_path: str, night: str, main_url: str, backup_url: str, ingest: str) -> None:
    """The harness in a child process: prints 'scoring', 'ingesting', 'done' as it goes."""
    try:
        _child(cfg_path, night, main_url, backup_url, ingest)
    except KeyboardInterrupt:        # as `dualpath nightly` ends on Ctrl-C: one line, 130
        print("interrupted; rerun the night to resume", file=sys.stderr, flush=True)
        sys.exit(130)


def _child(cfg_path: str, night: str, main_url: str, backup_url: str, ingest: str) -> None:
    cfg = load_config(cfg_path)
    when = date.fromisoformat(night)
    with runner.hold_night(cfg, when):           # held through the ingest, as the flow does
        print("scoring", flush=True)
        score_night(cfg, when, {"main": main_url, "backup": backup_url}, config_path=cfg_path)
        if ingest == "1":
            print("ingesting", flush=True)
            journals = [runner.journal_path(cfg, when, p) for p in cfg.paths]
            with writer(cfg.resolve(cfg.warehouse.path)) as con:
                ingest_journals(con, [j for j in journals if j.exists()])
    print("done", flush=True)


# --- what the warehouse must show after the rerun ---------------------------------------

@dataclass
class NightCheck:
    planned: int = 0
    final: int = 0
    measured: int = 0
    journal_calls: int = 0
    warehouse_calls: int = 0
    duplicated: int = 0
    contaminated_counted: int = 0
    retried_calls: int = 0
    complete: bool = False

    @property
    def lost(self) -> int:
        return (self.planned - self.final) + max(self.journal_calls - self.warehouse_calls, 0)


def journal_call_ids(cfg: Config, night: date) -> set[str]:
    import orjson
    ids: set[str] = set()
    for p in cfg.paths:
        j = runner.journal_path(cfg, night, p)
        if not j.exists():
            continue
        for line in j.read_bytes().splitlines():
            if line.startswith(b'{"k":"call"'):
                try:
                    ids.add(orjson.loads(line)["call_id"])
                except orjson.JSONDecodeError:
                    pass        # a torn last line: never acknowledged, not a call
    return ids


def check_night(cfg: Config, night: date) -> NightCheck:
    from dualpath.evals.scores import usable_units
    from dualpath.warehouse.frames import units_frame

    c = NightCheck()
    ids = journal_call_ids(cfg, night)
    c.journal_calls = len(ids)
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        q = lambda sql, *a: con.execute(sql, list(a)).fetchall()
        c.planned, c.final, c.measured, done = q("""
            SELECT sum(r.units_planned)::BIGINT,
                   (SELECT count(*) FROM v_units u WHERE u.night = ? AND u.is_final),
                   (SELECT count(*) FROM v_units u WHERE u.night = ? AND u.is_final AND measured),
                   bool_and(r.status = 'complete')
            FROM runs r WHERE r.night = ?""", night, night, night)[0]
        c.complete = bool(done)
        stored = {r[0] for r in q("SELECT call_id FROM calls WHERE night = ?", night)}
        c.warehouse_calls = len(stored & ids)
        c.duplicated = q("SELECT count(*) - count(DISTINCT call_id) FROM calls WHERE night = ?",
                         night)[0][0]
        # a unit measured twice (a rerun that scored a measured unit again) is a duplicate
        c.duplicated += q("""SELECT coalesce(sum(n - 1), 0)::BIGINT FROM (
                                SELECT count(*) n FROM v_units WHERE night = ? AND measured
                                GROUP BY run_id, ticker, draw) WHERE n > 1""", night)[0][0]
        c.retried_calls = q("SELECT count(*) FROM calls WHERE night = ? AND attempts > 1",
                            night)[0][0]
        usable = usable_units(units_frame(con, cfg.experiment.name))
        usable = usable[usable["night"].dt.date == night]
        # independent of v_units.clean: a call flagged, or one that ended after the last good
        # identity check of a session that lost its identity
        suspect = {tuple(r) for r in q("""
            SELECT c.run_id, c.ticker, c.draw, c.unit_attempt FROM calls c
            JOIN server_sessions s ON s.run_id = c.run_id
            WHERE c.night = ? AND (c.contaminated IS NOT NULL OR (s.identity_problem IS NOT NULL
                  AND c.end_wall > s.identity_lost_after_wall
                  AND c.end_wall <= coalesce(s.stopped_wall, 1e18)))""", night)}
        keys = zip(usable["run_id"], usable["ticker"], usable["draw"], usable["unit_attempt"])
        c.contaminated_counted = sum(k in suspect for k in keys)
    return c


def swap_detected(cfg: Config, night: date, path: str) -> bool:
    """The first run of a swapped night flagged calls, or its session lost its identity."""
    with reader(cfg.resolve(cfg.warehouse.path)) as con:
        flagged = con.execute("SELECT count(*) FROM calls WHERE night = ? AND path = ? AND "
                              "contaminated IS NOT NULL", [night, path]).fetchone()[0]
        lost = con.execute("""SELECT count(*) FROM server_sessions s JOIN runs r USING (run_id)
                              WHERE r.night = ? AND s.path = ? AND s.identity_problem IS NOT NULL""",
                           [night, path]).fetchone()[0]
    return flagged > 0 or lost > 0
