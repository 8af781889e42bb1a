"""The warehouse is documented: every column of every table and view has a meaning, and the
documentation's warehouse page (docs/warehouse.md) lists every table and view."""

from pathlib import Path

import duckdb

from dualpath.warehouse.dictionary import dictionary
from dualpath.warehouse.migrations import migrate

ROOT = Path(__file__).resolve().parents[1]


def test_every_column_of_every_table_and_view_is_documented():
    with duckdb.connect() as con:
        migrate(con)
        d = dictionary(con)
    missing = d[d["unit and meaning"] == ""][["table", "column"]].values.tolist()
    assert missing == []
    assert {"calls", "units", "runs", "v_calls", "v_calls_real", "v_units"} <= set(d["table"])


def test_the_warehouse_page_names_every_table_and_view():
    page = (ROOT / "docs" / "warehouse.md").read_text()
    with duckdb.connect() as con:
        migrate(con)
        names = set(dictionary(con)["table"])
    assert [n for n in sorted(names) if f"`{n}`" not in page] == []


def test_a_warehouse_from_an_older_dualpath_is_brought_up_to_date_by_readers(tmp_path):
    from dualpath.warehouse.db import reader
    from dualpath.warehouse.migrations import MIGRATIONS

    db = tmp_path / "old.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY, applied_at "
                    "TIMESTAMPTZ DEFAULT now())")
        for name, sql in MIGRATIONS[:3]:
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations (name) VALUES (?)", [name])
    with reader(db) as con:
        views = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables")
                 .fetchall()}
    assert "v_calls_real" in views and "plans" in views
