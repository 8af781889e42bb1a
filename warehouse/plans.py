"""Frozen plans and the deviation log, in the warehouse."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from pathlib import Path

import duckdb
import orjson
import pandas as pd

from dualpath.errors import UserError
from dualpath.prereg import Plan
from dualpath.warehouse.db import has_column, has_table


@dataclass(frozen=True)
class FrozenPlan:
    """A plan as frozen: the hash recorded then, and whether the freeze was forced."""

    plan: Plan
    plan_hash: str
    frozen_at: datetime
    forced: bool
    nights_before_freeze: int
    plan_path: str | None = None          # absolute, as frozen
    plan_relpath: str | None = None       # relative to the config's folder
    force_reason: str | None = None
    already_frozen: bool = False          # a freeze that found this hash frozen: nothing new

    @property
    def intact(self) -> bool:
        """The stored plan still hashes to what was frozen."""
        return self.plan.sha256() == self.plan_hash


def nights_in_window(con: duckdb.DuckDBPyConnection, plan: Plan) -> list[date]:
    """Nights of the plan's experiment from the first night on that have any run."""
    rows = con.execute("SELECT DISTINCT night FROM runs WHERE experiment = ? AND night >= ? "
                       "ORDER BY night", [plan.experiment, plan.window.first_night]).fetchall()
    return [r[0] for r in rows]


def scoring_times(con: duckdb.DuckDBPyConnection, experiment: str) -> pd.DataFrame:
    """night, path, started_at (the run's first segment), segments: when each run of the
    experiment was scored and whether it was resumed, for the label's disclosures."""
    df = con.execute("SELECT night, path, started_at, segments FROM runs WHERE experiment = ? "
                     "ORDER BY night, path", [experiment]).df()
    df["night"] = pd.to_datetime(df["night"])
    return df


def freeze(con: duckdb.DuckDBPyConnection, plan: Plan, plan_path: str,
           force: bool = False, reason: str | None = None, relpath: str | None = None,
           untestable: list[str] | None = None,
           unreassuring: list[str] | None = None) -> FrozenPlan:
    """Record the plan's hash; refused when nights of its window exist, when another plan is
    frozen, or when the window cannot test its primary (`untestable`), unless forced. A plan
    whose hash is already the frozen one records nothing (`already_frozen`), forced or not.
    A plan whose RankIC pass would not reassure (`unreassuring`: its false-reassurance rate
    is high) needs --force with a reason too, which is recorded; that alone does not make
    the window exploratory (its test is still the preregistered one, and every headline
    prints the rate)."""
    existing = current(con, plan.experiment)
    if existing is not None and existing.plan_hash == plan.sha256():
        return replace(existing, already_frozen=True)
    if existing is not None and not force:
        raise UserError(f"experiment {plan.experiment!r} already has a frozen plan "
                        f"({existing.plan_hash[:12]}, {existing.frozen_at:%Y-%m-%d}); a new "
                        "plan mid-study is a deviation: pass --force --reason '…' to record it")
    before = nights_in_window(con, plan)
    if before and not force:
        raise UserError(f"{len(before)} night(s) of the window already exist (from "
                        f"{before[0]}); a plan frozen after seeing data is not a "
                        "preregistration. Pass --force --reason '…' to freeze anyway: every "
                        "report will say it was forced")
    if untestable and not force:
        raise UserError("the window cannot test the primary: " + "; ".join(untestable)
                        + ". Choose a shorter primary horizon or a longer window (`dualpath "
                        "prereg draft` proposes one), or pass --force --reason '…'")
    if unreassuring and not force:
        raise UserError("the plan would not reassure: " + "; ".join(unreassuring) + ". Tie "
                        "the margin to main's IC, lengthen the window, or pass --force "
                        "--reason '…' (recorded with the plan)")
    forced = bool(existing or before or untestable)
    if (forced or unreassuring) and not (reason or "").strip():
        raise UserError("a forced freeze needs --reason '…': every report quotes it")
    now = datetime.now(timezone.utc)
    con.execute("INSERT INTO plans (plan_hash, experiment, frozen_at, forced, "
                "nights_before_freeze, plan_path, plan_json, plan_relpath, force_reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [plan.sha256(), plan.experiment, now, forced, len(before), plan_path,
                 orjson.dumps(plan.model_dump(mode="json")).decode(), relpath,
                 reason.strip() if forced or unreassuring else None])
    if existing is not None:
        record_deviation(con, plan.experiment, None, "plan replaced",
                         f"plan {existing.plan_hash[:12]} replaced by {plan.sha256()[:12]}",
                         plan.sha256())
    return current(con, plan.experiment)


def current(con: duckdb.DuckDBPyConnection, experiment: str) -> FrozenPlan | None:
    """The experiment's latest frozen plan, if any."""
    if not has_table(con, "plans"):   # a warehouse before m005
        return None
    # a read-only connection to a warehouse written before m015 has no provenance columns
    extra = "plan_relpath, force_reason" if has_column(con, "plans", "force_reason") else "NULL, NULL"
    row = con.execute("SELECT plan_json, plan_hash, frozen_at, forced, nights_before_freeze, "
                      f"plan_path, {extra} FROM plans WHERE experiment = ? "
                      "ORDER BY frozen_at DESC LIMIT 1", [experiment]).fetchone()
    if row is None:
        return None
    return FrozenPlan(Plan.model_validate(orjson.loads(row[0])), row[1], row[2], row[3],
                      row[4] or 0, row[5], row[6], row[7])


def record_deviation(con: duckdb.DuckDBPyConnection, experiment: str, night: date | None,
                     kind: str, detail: str, plan_hash: str | None) -> None:
    """Log a deviation once (the same night, kind and detail are not logged twice)."""
    seen = con.execute("SELECT count(*) FROM deviations WHERE experiment = ? AND night IS NOT "
                       "DISTINCT FROM ? AND kind = ? AND detail = ?",
                       [experiment, night, kind, detail]).fetchone()[0]
    if not seen:
        con.execute("INSERT INTO deviations (experiment, night, kind, detail, plan_hash) "
                    "VALUES (?, ?, ?, ?, ?)", [experiment, night, kind, detail, plan_hash])


def deviation_log(con: duckdb.DuckDBPyConnection, experiment: str):
    """Every logged deviation, oldest first, as a frame."""
    if not has_table(con, "plans"):   # a warehouse before m005
        return pd.DataFrame(columns=["night", "kind", "detail", "recorded_at"])
    return con.execute("SELECT night, kind, detail, recorded_at FROM deviations WHERE "
                       "experiment = ? ORDER BY recorded_at", [experiment]).df()


def freeze_log(warehouse: Path) -> Path:
    """Beside the warehouse, every freeze as it was recorded: no journal holds a plan, so a
    warehouse rebuilt from the journals restores its preregistration from here (without it
    a confirmatory study could only be frozen again after its nights: exploratory)."""
    return warehouse.with_name(warehouse.name + ".plans.jsonl")


def log_freeze(con: duckdb.DuckDBPyConnection, warehouse: Path, plan_hash: str) -> None:
    """Append the committed plans row of `plan_hash` to the freeze log (synced)."""
    cur = con.execute("SELECT * FROM plans WHERE plan_hash = ?", [plan_hash])
    names = [d[0] for d in cur.description]
    row = cur.fetchone()
    if row is None:
        return
    line = orjson.dumps(dict(zip(names, row)), default=str) + b"\n"
    with open(freeze_log(warehouse), "ab") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def restore_freezes(con: duckdb.DuckDBPyConnection, warehouse: Path) -> int:
    """Plans rows from the freeze log into a (rebuilt) warehouse that lacks them."""
    log = freeze_log(warehouse)
    if not log.exists():
        return 0
    cols = {r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE "
                                      "table_name = 'plans' AND database_name = "
                                      "current_database()").fetchall()}
    restored = 0
    for line in log.read_bytes().splitlines():
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue                          # a torn last line: that freeze never returned
        rec = {k: v for k, v in rec.items() if k in cols}
        if not rec.get("plan_hash") or con.execute(
                "SELECT 1 FROM plans WHERE plan_hash = ?", [rec["plan_hash"]]).fetchone():
            continue
        names = ", ".join(f'"{k}"' for k in rec)
        con.execute(f"INSERT INTO plans ({names}) VALUES ({', '.join('?' * len(rec))})",
                    list(rec.values()))
        restored += 1
    return restored
