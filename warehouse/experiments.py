"""Which runs folder and which config each experiment and night belong to (migration m019).

One experiment, one runs folder: a second config of the same experiment name writing its
journals elsewhere made new journals for the same run ids, and each ingest overwrote the
runs and added the calls again. One night, one config: a night's runs keep the
`config_hash` they were scored with (`Config.fingerprint()`), and a night already stored
is not resumed under another, even when its journals are not where this config looks.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

import duckdb

from dualpath.errors import UserError


def bind(con: duckdb.DuckDBPyConnection, experiment: str, runs_dir: str, config_path: str,
         host: str) -> None:
    """Bind the experiment to its runs folder on its first night; refuse another folder."""
    row = con.execute("SELECT runs_dir, config_path, host, bound_at FROM experiments "
                      "WHERE experiment = ?", [experiment]).fetchone()
    if row is None:
        con.execute("INSERT INTO experiments VALUES (?, ?, ?, ?, ?)",
                    [experiment, runs_dir, config_path, host, datetime.now(timezone.utc)])
        return
    bound, by, on, at = row
    if bound != runs_dir:
        raise UserError(
            f"experiment '{experiment}' keeps its runs in {bound} (bound by {by} on {on} at "
            f"{at:%Y-%m-%d %H:%M} UTC); this config ({config_path}) writes them to "
            f"{runs_dir}. One experiment in two folders overwrites its runs and stores their "
            f"calls twice: give this config another [experiment] name, or set [warehouse] "
            f"runs_dir to {bound}")


def check_night_config(con: duckdb.DuckDBPyConnection, experiment: str, night: date,
                       config_hash: str) -> None:
    """Refuse to score a night already stored under another config."""
    rows = con.execute("SELECT DISTINCT config_hash FROM runs WHERE experiment = ? AND "
                       "night = ? AND config_hash <> ?",
                       [experiment, night, config_hash]).fetchall()
    if rows:
        raise UserError(
            f"night {night} of experiment '{experiment}' is stored with another config (hash "
            f"{rows[0][0]}, now {config_hash}); results of two configs must not mix in one "
            "run. Score another night, restore that config, or use another experiment name")
