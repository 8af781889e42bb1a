"""The warehouse is documented: every column of every table and view has a meaning, and the
README lists every table and view."""

from pathlib import Path

import duckdb

from warehouse.dictionary import dictionary
from warehouse.migrations import migrate

ROOT = Path(__file__).resolve().parents[1]


def test_every_column_of_every_table_and_view_is_documented():
    with duckdb.connect() as con:
        migrate(con)
        d = dictionary(con)
    missing = d[d["unit and meaning"] == ""][["table", "column"]].values.tolist()
    assert missing == []
    assert {"calls", "units", "runs", "v_calls", "v_calls_real", "v_units"} <= set(d["table"])


def test_the_readme_names_every_table_and_view():
    readme = (ROOT / "README.md").read_text()
    with duckdb.connect() as con:
        migrate(con)
        names = set(dictionary(con)["table"])
    assert [n for n in sorted(names) if f"`{n}`" not in readme] == []
