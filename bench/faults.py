"""Fault trials: real nights on simulated servers, with faults injected, then rerun as a user
would, and every outcome counted from the warehouse.

    python bench/faults.py [--tickers 4] [--draws 2] [--only KIND ...] [--real | --real-only]

Each fault gets its own night. Transport faults go through a fault-injecting loopback proxy
(`dualpath.sim.proxy`); process faults kill or interrupt the servers and the harness; swaps
put another server (another alias, build or slot count) behind the path's port mid-night.
After each, the night is rerun and the warehouse must show: every planned unit with a final
outcome, every journaled call stored once, no unit measured twice, no contaminated call in
a unit that metrics use, and every transient fault retried (the proxy saw the spoiled
request again). Prints a table and, last, `faults=… lost=… duplicated=…
contaminated_counted=… undetected_swaps=… mislabelled=… tracebacks=…
distorted_speed_counted=…` (goals: ≥ 12 kinds, zeros for the rest). The proxy also rewrites
the server's own answers: a completion count of 2**40 or "lots" (kept as sent, flagged on
the call, never a number), `finish_reason: "abort"` half-way (a failed call, retried), and a
reply cut at max_tokens inside the `<think>` a Qwen3.5/3.6 template opened in the prompt, with
and without vLLM's reasoning parser (on a night with thinking on: the thinking is stored as
thinking, never as the answer, never quoted into a later prompt). The
trials of the night and the warehouse (two writers, an aliased server, a second config, a 50 MB answer, partial
journals, a full disk, a damaged warehouse, SIGTERM, a Prefect cancel, a long `sql`) are in
`bench/faults_night.py`; those of places and inputs (a warehouse named through a symlink,
another `TMPDIR` on the same servers, conflicting price files, a killed long `sql` on its
snapshot copy) in `bench/faults_places.py`; those of labels and exits (a wall clock stepped
mid-night, Ctrl-C on a long `sql`, a warehouse where no file can be made) in
`bench/faults_labels.py`; a GPU reader failing mid-night, for good or for a second, in
`bench/faults_telemetry.py`.
With --real, the trials a real llama-server can take are run again with one on the backup
path (Gemma 3 270M, as `make test` builds it; several minutes on a CPU).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):      # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.faultlab import ROOT, Lab, check_night, score_night, swap_detected  # noqa: E402
from bench.faults_cli import CLI_TRIALS  # noqa: E402
from bench.faults_engines import ENGINE_TRIALS  # noqa: E402
from bench.faults_labels import LABEL_TRIALS  # noqa: E402
from bench.faults_night import NIGHT_TRIALS, REAL_TRIALS, mislabelled, tracebacks  # noqa: E402
from bench.faults_places import PLACE_TRIALS  # noqa: E402
from bench.faults_telemetry import TELEMETRY_TRIALS  # noqa: E402
from dualpath.sim.proxy import THINK_CUTS, THINKING_MARK, TRANSIENT, wait_until  # noqa: E402

PROXY_FAULTS = {  # kind -> path it is tried on (cut JSON needs the unstreamed path)
    "reset": "backup", "http500": "backup", "http429": "main", "http503": "backup",
    "hang": "main", "cut_json": "main", "cut_sse": "backup", "overflow": "backup",
    # the server's own answer rewritten: the unstreamed path's JSON
    "huge_usage": "main", "typed_usage": "main", "abort": "main",
    # cut at max_tokens inside a <think> the template opened, thinking on: vLLM's dialect
    "think_cut": "main", "think_cut_parser": "main"}
SWAPS = {"swap_alias": {"model_alias": "another-model"},
         "swap_build": {"build": "sim-b9999-other"},
         "swap_slots": {"slots": 8}}
PROCESS_FAULTS = ("server_kill_x3", "server_restart_same_port", "harness_kill_scoring",
                  "harness_kill_ingest", "sigint")
TRIALS = {**NIGHT_TRIALS, **PLACE_TRIALS, **CLI_TRIALS, **LABEL_TRIALS, **REAL_TRIALS,
          **TELEMETRY_TRIALS, **ENGINE_TRIALS}   # kind -> (lab, night, trial)
# the simulated paths' trials
ALL = (*PROXY_FAULTS, *SWAPS, *PROCESS_FAULTS, *NIGHT_TRIALS, *PLACE_TRIALS, *CLI_TRIALS,
       *LABEL_TRIALS, *TELEMETRY_TRIALS, *ENGINE_TRIALS)


@dataclass
class Trial:
    fault: str
    injected: int = 0
    survived: bool = False
    lost: int = 0
    duplicated: int = 0
    contaminated_counted: int = 0
    transient: int = 0          # injected faults that a client should retry
    retried: int = 0            # of those, retried (the proxy saw the request again)
    undetected_swap: int = 0
    mislabelled: int = 0        # runs shown `running` that no process scores
    tracebacks: int = 0         # tracebacks a person would have seen
    distorted_speed_counted: int = 0   # disturbed runs whose seconds entered a median
    detected: bool = True       # dualpath reacted as it must (refused, diagnosed, labelled)
    detail: str = ""
    rerun_done: bool = False    # the trial reran the night itself (through the CLI)
    night: bool = True          # False: the trial scores no night (parser, console script)

    @property
    def not_retried(self) -> int:
        return max(self.transient - self.retried, 0)


def _midway(lab: Lab, night, path: str = "backup") -> bool:
    """Wait until a third of the path's calls are journaled; True if it is still scoring."""
    total = len(lab.cfg.tickers()) * lab.cfg.draws_for(path) * 17
    wait_until(lambda: lab.calls_done(night, path) >= total // 3 or
               (lab.calls_done(night, path) > 0 and not lab.running(night, path)), 60)
    return lab.running(night, path)


def run_proxy_fault(lab: Lab, night, kind: str, n: int) -> Trial:
    t = Trial(kind)
    proxy = lab.proxies[PROXY_FAULTS[kind]]
    proxy.reset_counts()
    proxy.inject(kind, n)
    if kind in THINK_CUTS:
        return _think_cut(lab, night, kind, t)
    lab.score(night)
    proxy.clear()
    t.injected = proxy.injected[kind]
    if kind in TRANSIENT:
        t.transient, t.retried = t.injected, proxy.retried()[kind]
    if kind in ("huge_usage", "typed_usage"):    # kept as sent, flagged, never a number
        lab.ingest(night)
        t.detected = untrusted_calls(lab, night, PROXY_FAULTS[kind]) >= t.injected
    return t


def _think_cut(lab: Lab, night, kind: str, t: Trial) -> Trial:
    """A night with thinking on (its own config, so the trial reruns it with that config)."""
    cfg = lab.cfg.model_copy(update={"sampling": lab.cfg.sampling.model_copy(
        update={"thinking": "on"})})
    proxy = lab.proxies[PROXY_FAULTS[kind]]
    score_night(cfg, night, lab.urls, config_path=lab.cfg_path)
    proxy.clear()
    t.injected = proxy.injected[kind]
    score_night(cfg, night, lab.urls, config_path=lab.cfg_path)
    t.rerun_done = True
    lab.ingest(night)
    apart, leaked = thinking_kept(lab, night, PROXY_FAULTS[kind])
    t.detected = apart >= t.injected and leaked == 0
    t.detail = f"thinking stored apart {apart}, in an answer or prompt {leaked}"
    return t


def thinking_kept(lab: Lab, night, path: str) -> tuple[int, int]:
    """(cut calls on `path` whose spoiled thinking is stored as thinking with an empty
    answer, stored texts other than thinking that carry it: answers, prompts, final texts)."""
    from dualpath.warehouse.db import reader
    mark = f"%{THINKING_MARK}%"
    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        apart = con.execute(
            "SELECT count(*) FROM calls c JOIN texts r ON r.hash = c.reasoning_hash "
            "JOIN texts o ON o.hash = c.output_hash WHERE c.night = ? AND c.path = ? AND "
            "c.finish_reason = 'length' AND r.text LIKE ? AND o.text = ''",
            [night, path, mark]).fetchone()[0]
        leaked = con.execute(
            "SELECT count(*) FROM texts WHERE text LIKE ? AND hash NOT IN (SELECT "
            "reasoning_hash FROM calls WHERE reasoning_hash IS NOT NULL)", [mark]).fetchone()[0]
    return apart, leaked


def untrusted_calls(lab: Lab, night, path: str) -> int:
    """The night's calls on `path` whose completion count was kept only as sent."""
    from dualpath.warehouse.db import reader
    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        return con.execute("SELECT count(*) FROM calls WHERE night = ? AND path = ? AND "
                           "untrusted LIKE '%completion_tokens%'",
                           [night, path]).fetchone()[0]


def run_swap(lab: Lab, night, kind: str) -> Trial:
    t = Trial(kind)
    original = lab.servers["backup"]
    other = lab.new_server("backup", **dict(SWAPS[kind]))   # ready before the night

    def swap(lab: Lab) -> None:
        if _midway(lab, night):
            lab.put_behind("backup", other)
            t.injected = int(lab.running(night))   # it met calls of this night

    lab.score(night, during=swap)
    lab.ingest(night)
    t.undetected_swap = int(t.injected and not swap_detected(lab.cfg, night, "backup"))
    lab.put_behind("backup", original)              # the rerun meets the right server again
    return t


def run_server_kill(lab: Lab, nights, restart: bool) -> Trial:
    t = Trial("server_restart_same_port" if restart else "server_kill_x3")
    for night in nights:
        def kill(lab: Lab) -> None:
            if _midway(lab, night):
                lab.servers["backup"].kill9()
                t.injected += 1
                if restart:                        # back on the same port at once
                    lab.replace_server("backup", same_port=True)
        lab.score(night, during=kill)
        if not restart:
            lab.ingest(night)
            lab.replace_server("backup")           # the user restarts it, then reruns
    return t


def run_harness_fault(lab: Lab, night, kind: str) -> Trial:
    t = Trial(kind)
    child = lab.child(night)
    try:
        if kind == "harness_kill_ingest":
            while (line := child.stdout.readline()) and line.strip() != "ingesting":
                pass
            if line:
                child.send_signal(signal.SIGKILL)
                t.injected = 1
        elif _midway(lab, night):
            child.send_signal(signal.SIGINT if kind == "sigint" else signal.SIGKILL)
            t.injected = 1
        child.wait(timeout=60)
        t.tracebacks += tracebacks(child.stderr.read())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    t.mislabelled += mislabelled(lab, night)
    return t


def run_one(lab: Lab, kind: str, nights: list, n: int) -> Trial:
    if kind in PROXY_FAULTS:
        t = run_proxy_fault(lab, nights[0], kind, n)
    elif kind in SWAPS:
        t = run_swap(lab, nights[0], kind)
    elif kind in ("server_kill_x3", "server_restart_same_port"):
        t = run_server_kill(lab, nights, kind == "server_restart_same_port")
    elif kind in TRIALS:
        t = Trial(kind, detected=False)
        TRIALS[kind](lab, nights[0], t)
    else:
        t = run_harness_fault(lab, nights[0], kind)
    if not t.night:
        t.survived = t.detected
        return t
    for night in nights:                  # the user reruns the night; ingest is the flow's
        if not t.rerun_done:
            lab.score(night)
        lab.ingest(night)
        c = check_night(lab.cfg, night)
        t.lost += c.lost
        t.duplicated += c.duplicated
        t.contaminated_counted += c.contaminated_counted
        t.survived = (t.survived or night is nights[0]) and c.complete and c.lost == 0 \
            and t.detected
        if kind.startswith("server_"):
            t.transient, t.retried = t.injected, min(t.injected, c.retried_calls)
    return t


def restart_recorded(lab: Lab, night) -> bool:
    """`runs --evidence` must refuse to compare the restarted session."""
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.queries import server_evidence

    with reader(lab.cfg.resolve(lab.cfg.warehouse.path)) as con:
        ev = server_evidence(con)
    rows = ev[ev["session_id"].str.contains(f"/{night.isoformat()}/backup#1")]
    return bool(len(rows)) and not rows["comparable"].any() and rows["restarts"].iloc[0] >= 1


# On a real llama-server: its build cannot be swapped (one binary), and a hung request costs
# the longer read timeout a CPU server needs.
REAL_KINDS = ("reset", "http500", "http503", "cut_sse", "overflow", "swap_alias", "swap_slots",
              "server_restart_same_port", "speed_restarted", "speed_stalled", "speed_shared",
              *REAL_TRIALS)


def real_server() -> tuple[str, str] | None:
    """(llama-server binary, Gemma 3 270M GGUF) where `make test` built them, else None."""
    try:
        from dualpath.launcher import gemma_model, llama_server_binary
        return llama_server_binary(), gemma_model(ROOT / ".dualpath" / "models")
    except Exception:    # noqa: BLE001 - any failure means: no real server on this machine
        return None


def run_trials(root: Path, kinds=ALL, tickers: int = 4, draws: int = 2, per_fault: int = 3,
               echo=print, real: tuple[str, str] | None = None) -> list[Trial]:
    trials = []
    with Lab(root, tickers=tickers, draws=draws, nights=len(kinds) + 4, real=real) as lab:
        nights = iter(lab.nights)
        for kind in kinds:
            used = [next(nights) for _ in range(3 if kind == "server_kill_x3" else 1)]
            t0 = time.monotonic()
            t = run_one(lab, kind, used, per_fault)
            if kind == "server_restart_same_port" and not restart_recorded(lab, used[0]):
                t.survived = False
            trials.append(t)
            echo(f"  {kind:<26} {time.monotonic() - t0:5.1f}s")
    return trials


def table(trials: list[Trial]) -> str:
    head = f"{'fault':<32} {'injected':>8} {'survived':>8} {'lost':>5} {'duplicated':>10} " \
           f"{'contaminated counted':>20} {'retried':>8} {'mislabelled':>11} " \
           f"{'tracebacks':>10} {'distorted':>9}"
    rows = [head, "-" * len(head)]
    for t in trials:
        retried = f"{t.retried}/{t.transient}" if t.transient else "-"
        rows.append(f"{t.fault:<32} {t.injected:>8} {'yes' if t.survived else 'NO':>8} "
                    f"{t.lost:>5} {t.duplicated:>10} {t.contaminated_counted:>20} {retried:>8} "
                    f"{t.mislabelled:>11} {t.tracebacks:>10} {t.distorted_speed_counted:>9}"
                    + (f"  {t.detail}" if t.detail else ""))
    return "\n".join(rows)


def summary(trials: list[Trial]) -> str:
    # kinds of fault injected and survived (the same kind on a real server counts once)
    kinds = len({t.fault.removeprefix("real:") for t in trials if t.injected and t.survived})
    return (f"faults={kinds} lost={sum(t.lost for t in trials)} "
            f"duplicated={sum(t.duplicated for t in trials)} "
            f"contaminated_counted={sum(t.contaminated_counted for t in trials)} "
            f"undetected_swaps={sum(t.undetected_swap for t in trials)} "
            f"mislabelled={sum(t.mislabelled for t in trials)} "
            f"tracebacks={sum(t.tracebacks for t in trials)} "
            f"distorted_speed_counted={sum(t.distorted_speed_counted for t in trials)}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tickers", type=int, default=4)
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--per-fault", type=int, default=3, help="proxy faults injected per kind")
    ap.add_argument("--only", nargs="*", choices=(*ALL, *REAL_TRIALS), default=None)
    ap.add_argument("--real", action="store_true", help="also run the trials that a real "
                    "llama-server (built by `make test`) can take, on the backup path")
    ap.add_argument("--real-only", action="store_true", help="only the real llama-server's "
                    "trials (each takes minutes on a loaded CPU)")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        from bench.faultlab import child_main
        return child_main(*args.child)
    from dualpath.procs import start_reaper
    start_reaper()
    with tempfile.TemporaryDirectory(prefix="dualpath-faults-") as tmp:
        sim = [] if args.real_only else [k for k in args.only or ALL if k not in REAL_TRIALS]
        trials = run_trials(Path(tmp) / "sim", sim, args.tickers, args.draws,
                            args.per_fault) if sim else []
        real = real_server() if args.real or args.real_only else None
        if trials and real:                 # the simulated half, before the slow real one
            print(table(trials), summary(trials), sep="\n", flush=True)
        if (args.real or args.real_only) and real is None:
            print("no real llama-server here (`make test` builds it): real trials skipped")
        if real:
            print("real llama-server on the backup path:")
            kinds = [k for k in args.only or (*ALL, *REAL_TRIALS) if k in REAL_KINDS]
            for t in run_trials(Path(tmp) / "real", kinds, 2, 1, 1, real=real):
                t.fault = f"real:{t.fault}"
                trials.append(t)
    print(table(trials))
    not_retried = sum(t.not_retried for t in trials)
    if not_retried:
        print(f"transient faults not retried: {not_retried}")
    print(summary(trials))


if __name__ == "__main__":
    main()
