"""The demo's temporary Prefect server: lean settings, and no second migration of a database
already at the installed Prefect's newest schema."""

from __future__ import annotations

import importlib.util
import os
import re
import sqlite3
from pathlib import Path

from dualpath.cli._common import prefect_env
from dualpath.flows.prefect_api import database_current

LEAN = ("PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED",
        "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED", "PREFECT_LOGGING_TO_API_ENABLED")
MIGRATE = "PREFECT_API_DATABASE_MIGRATE_ON_START"


def newest_revision() -> str:
    """The revision of the newest sqlite migration by its file name's date (independent of
    `database_current`'s down_revision chain)."""
    root = Path(list(importlib.util.find_spec("prefect").submodule_search_locations)[0])
    newest = sorted((root / "server/database/_migrations/versions/sqlite").glob("2*.py"))[-1]
    return re.search(r'^revision = "(\w+)"', newest.read_text(), re.M).group(1)


def prefect_db(home: Path, version: str | None) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(home / "prefect.db") as con:
        if version is not None:
            con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
            con.execute("INSERT INTO alembic_version VALUES (?)", [version])
    return home


def test_only_a_database_at_the_newest_migration_reads_current(tmp_path, monkeypatch):
    assert not database_current(tmp_path / "none")                  # no database yet
    assert not database_current(prefect_db(tmp_path / "empty", None))   # no alembic table
    assert not database_current(prefect_db(tmp_path / "old", "8f5eda7c1dd7x"))
    current = prefect_db(tmp_path / "current", newest_revision())
    assert database_current(current)
    # another database configured: the file under PREFECT_HOME is not the one served
    monkeypatch.setenv("PREFECT_API_DATABASE_CONNECTION_URL", "sqlite+aiosqlite:///x.db")
    assert not database_current(current)


def _scrubbed(monkeypatch) -> None:
    for key in (*LEAN, MIGRATE, "PREFECT_HOME", "PREFECT_LOGGING_LEVEL",
                "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS",
                "PREFECT_SERVER_ANALYTICS_ENABLED", "PREFECT_UI_ENABLED"):
        monkeypatch.setenv(key, "")    # recorded, so what prefect_env sets is undone after
        monkeypatch.delenv(key)


def test_the_lean_demo_server_skips_a_migration_only_once_migrated(tmp_path, monkeypatch):
    _scrubbed(monkeypatch)
    prefect_env(tmp_path / "fresh", quiet=True, lean=True)
    assert all(os.environ[k] == "false" for k in LEAN)
    assert MIGRATE not in os.environ                       # a new database is migrated
    _scrubbed(monkeypatch)
    prefect_env(prefect_db(tmp_path / "done", newest_revision()), quiet=True, lean=True)
    assert os.environ[MIGRATE] == "false"


def test_other_commands_and_a_configured_api_keep_prefects_defaults(tmp_path, monkeypatch):
    _scrubbed(monkeypatch)
    home = prefect_db(tmp_path / "done", newest_revision())
    prefect_env(home, quiet=True)                           # e.g. a sweep: not lean
    assert not any(k in os.environ for k in (*LEAN, MIGRATE))
    _scrubbed(monkeypatch)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    prefect_env(home, quiet=True, lean=True)                # a real server: left as it is
    assert not any(k in os.environ for k in (*LEAN, MIGRATE))


def test_the_early_server_leaves_a_configured_api_alone(monkeypatch):
    """`EarlyAPI` (the demo's Prefect server, started before Prefect is imported) starts
    nothing when PREFECT_API_URL names a server, and leaves the variable as it was."""
    from dualpath.flows.prefect_api import EarlyAPI

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    api = EarlyAPI()
    assert api.proc is None
    with api as ready:
        ready()                                  # nothing to wait for
    assert os.environ["PREFECT_API_URL"] == "http://127.0.0.1:4200/api"
