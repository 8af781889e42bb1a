"""Migration names sort in the order they run, and a warehouse recorded under the former names
(numbered when written, on branches that landed in another order) migrates cleanly."""

from __future__ import annotations

import duckdb
import pytest

from dualpath.warehouse.migrations import FORMER_NAMES, MIGRATIONS, applied, migrate

# The list as dualpath ran it until the renaming, frozen here: what older warehouses recorded.
FORMER_ORDER = [
    "m001_initial", "m002_views", "m003_server_evidence", "m004_outcomes",
    "m005_preregistration", "m006_real_seconds", "m007_price_log", "m008_attempt_errors",
    "m009_prompt_view", "m010_sweeps", "m011_hosts", "m012_messages", "m013_quotes",
    "m014_service_split", "m018_plan_provenance", "m021_server_files", "m023_unanswered",
    "m015_thinking", "m017_experiments", "m025_untrusted", "m026_energy", "m028_session_mono",
]
# today's names, in order: the former list's, then those added since
LATER = [name for name, _ in MIGRATIONS]


def former_warehouse(path, upto: int) -> duckdb.DuckDBPyConnection:
    """A warehouse as the former code built it: its first `upto` migrations, each recorded
    under the name it had then (the SQL never changed, only the names)."""
    sql = dict(MIGRATIONS)
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at "
                "TIMESTAMPTZ DEFAULT now())")
    for name in FORMER_ORDER[:upto]:
        con.execute(sql[FORMER_NAMES.get(name, name)])
        con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [name])
    return con


def recorded(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()]


def test_names_sort_in_the_order_they_run_with_no_number_twice():
    names = [name for name, _ in MIGRATIONS]
    assert names == sorted(names)
    numbers = [name.split("_")[0] for name in names]
    assert numbers == [f"m{i:03d}" for i in range(1, len(names) + 1)]


def test_every_former_name_maps_onto_the_migration_it_was_in_order():
    # The former list ran the same SQL in the same order: only the names differ.
    assert [FORMER_NAMES.get(n, n) for n in FORMER_ORDER] == LATER[:len(FORMER_ORDER)]
    assert not set(FORMER_NAMES) & {n for n, _ in MIGRATIONS}     # no name means two things


def test_a_fully_migrated_former_warehouse_is_renamed_and_gets_nothing_twice(tmp_path):
    con = former_warehouse(tmp_path / "w.duckdb", len(FORMER_ORDER))
    # read-only readers see it as far as it went, by today's names
    assert applied(con) == set(LATER[:len(FORMER_ORDER)])
    assert migrate(con) == LATER[len(FORMER_ORDER):]    # only what came after the renaming
    assert recorded(con) == [n for n, _ in MIGRATIONS]
    assert migrate(con) == []


@pytest.mark.parametrize("upto", [14, 15, 17, 19, 21])
def test_a_former_warehouse_part_way_gets_exactly_the_rest(tmp_path, upto):
    """Part way is where an older dualpath stopped: m018_plan_provenance, for one, adds its
    columns without IF NOT EXISTS, so applying it twice would fail."""
    con = former_warehouse(tmp_path / "w.duckdb", upto)
    assert migrate(con) == [n for n, _ in MIGRATIONS[upto:]]
    assert recorded(con) == [n for n, _ in MIGRATIONS]
    cols = {r[0] for r in con.execute("SELECT column_name FROM information_schema.columns "
                                      "WHERE table_name = 'server_sessions'").fetchall()}
    assert {"binary_sha256", "unanswered_s", "stopped_mono"} <= cols
