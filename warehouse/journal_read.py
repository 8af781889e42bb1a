"""Reading a journal back (`read_journal`): its records grouped by kind, each unit's latest
attempt and outcome, a torn last line skipped and damage elsewhere named with its repair.
The format is described in `warehouse.journal`, which writes it and re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import orjson

from dualpath.errors import DataError
from dualpath.records import MEASURED


@dataclass
class JournalContents:
    """Everything in a journal, grouped by kind."""

    path: Path
    begins: list[dict] = field(default_factory=list)
    sessions: list[dict] = field(default_factory=list)
    ustarts: list[dict] = field(default_factory=list)
    calls: list[dict] = field(default_factory=list)
    units: list[dict] = field(default_factory=list)
    ends: list[dict] = field(default_factory=list)
    call_lines: int = 0
    part_lines: int = 0
    torn_tail: bool = False
    longest_line: int = 0          # bytes, of the call and part lines (DuckDB reads those)

    def unit_results(self, running: bool = False) -> list[dict]:
        """Every unit attempt with its outcome: the recorded results, plus each started
        attempt that has none (`abandoned`, unless the run is still going), and with
        `contaminated` for results the server-identity watcher later put in doubt."""
        results = {(u["ticker"], u["draw"], u["unit_attempt"]): dict(u) for u in self.units}
        for u in results.values():
            u["outcome"] = unit_outcome(u)
        for (lo, hi), problem, clock in self.identity_lost_windows():
            for u in results.values():
                end = u.get(f"end_{clock}")
                if u["outcome"] in MEASURED and end is not None and lo < end <= hi:
                    u["outcome"], u["grade"] = "contaminated", None
                    u["failure_detail"] = problem
        if not running:
            for s in self.ustarts:
                key = (s["ticker"], s["draw"], s["unit_attempt"])
                if key not in results:
                    results[key] = {**s, "outcome": "abandoned", "end_wall": None,
                                    "n_calls": None, "grade": None,
                                    "failure_detail": "started, never finished (the run "
                                                      "stopped or crashed)"}
        return list(results.values())

    def identity_lost_windows(self) -> list[tuple[tuple[float, float], str, str]]:
        """((after, until), why, clock) windows in which responses may be from another
        server: on the monotonic clock ("mono", compared with end_mono) where the session
        kept it, else (older journals) the wall clock ("wall")."""
        out = []
        for s in self.sessions:
            why = s.get("identity_problem") or "server identity changed"
            if s.get("identity_lost_after_mono") is not None:
                out.append(((s["identity_lost_after_mono"], s.get("stopped_mono") or 1e18),
                            why, "mono"))
            elif s.get("identity_lost_after_wall") is not None:
                out.append(((s["identity_lost_after_wall"], s.get("stopped_wall") or 1e18),
                            why, "wall"))
        return out

    def final_units(self, running: bool = False) -> dict[tuple[str, int], dict]:
        """The latest attempt of each (ticker, draw), with its outcome."""
        out: dict[tuple[str, int], dict] = {}
        for u in self.unit_results(running):
            key = (u["ticker"], u["draw"])
            if key not in out or u["unit_attempt"] >= out[key]["unit_attempt"]:
                out[key] = u
        return out

    def measured_units(self) -> set[tuple[str, int]]:
        """(ticker, draw) whose latest attempt is a measurement: a rerun skips only these,
        and scores failed, contaminated and abandoned units again."""
        return {k for k, u in self.final_units().items() if u["outcome"] in MEASURED}

    def attempts(self) -> dict[tuple[str, int], int]:
        """How often each unit was started: the next start is attempt + 1."""
        out: dict[tuple[str, int], int] = {}
        for s in self.ustarts:
            key = (s["ticker"], s["draw"])
            out[key] = max(out.get(key, 0), s["unit_attempt"])
        return out


def unit_outcome(u: dict) -> str:
    """A journal unit's outcome (journals written before outcomes existed: from the grade)."""
    if "outcome" in u:
        return u["outcome"]
    if u.get("grade") is not None:
        return "graded"
    return {"parse_failure": "parse_failed", "server_error": "call_failed"}.get(
        u.get("failure_kind"), "pipeline_failed")


_CALL_PREFIX = b'{"k":"call",'
_PART_PREFIX = b'{"k":"part",'
_GROUPS = {"begin": "begins", "session": "sessions", "ustart": "ustarts", "call": "calls",
           "unit": "units", "end": "ends"}


def iter_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, line, is_last) without holding the whole file in memory."""
    with open(path, "rb") as f:
        prev, n = None, 0
        for line in f:
            if prev is not None:
                yield n, prev, False
            prev, n = line, n + 1
        if prev is not None:
            yield n, prev, True


def repair_hint(path: Path | str) -> str:
    """What to do with a damaged journal. Moving it aside (the old advice) left the calls
    already ingested from it in the warehouse: the rerun stored them again, and lost what
    was never ingested."""
    return (f"quarantine it and re-ingest exactly what is readable with "
            f"`dualpath repair {path} -c CONFIG`, then rerun the night")


def _damaged(path: Path, n: int, line: bytes) -> DataError:
    return DataError(f"journal {path} line {n} is damaged: {line[:120]!r}; {repair_hint(path)}")


def read_journal(path: Path, skip_calls: bool = False) -> JournalContents:
    """Parse a journal, streaming it. A torn last line (crash mid-write) is skipped; damage
    elsewhere is an error. Calls get their `prompt_text` back whole from the parts.

    With `skip_calls`, call and part lines are only counted (the warehouse parses those in
    bulk), and the file is scanned with a cheap prefix test per line.
    """
    out = JournalContents(path)
    if not path.exists():
        return out
    parts: dict[int, str] = {}
    answers: dict[str, str] = {}     # call id -> output_text, for parts that quote one
    for n, line, last in iter_lines(path):
        if not line.endswith(b"\n"):
            out.torn_tail = True     # the process died mid-line; that record was never synced
            break
        if skip_calls and line.startswith(_CALL_PREFIX):
            out.call_lines += 1
            out.longest_line = max(out.longest_line, len(line))
            continue
        if line.startswith(_PART_PREFIX):
            out.part_lines += 1
            out.longest_line = max(out.longest_line, len(line))
            if not skip_calls:
                try:
                    obj = orjson.loads(line)
                    parts[obj["key"]] = (obj["text"] if "quote" not in obj else
                                         orjson.dumps(answers[obj["call"]])[1:-1].decode())
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    raise _damaged(path, n, line) from None
            continue
        try:
            obj = orjson.loads(line)
            group = getattr(out, _GROUPS[obj.pop("k")])
            if "prompt_parts" in obj:
                obj["prompt_text"] = "".join(parts[k] for k in obj.pop("prompt_parts"))
            if group is out.calls:
                answers[obj["call_id"]] = obj.get("output_text") or ""
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            raise _damaged(path, n, line) from None
        group.append(obj)
    out.call_lines += len(out.calls)
    return out
