"""What a person asks of the warehouse directly: SQL they type (sandboxed), the schema of a
warehouse or of a new one, an export of every table. The queries behind `dualpath sql`,
`dualpath schema` and `dualpath export`, so that the CLI holds no SQL and no duckdb."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from dualpath.errors import UserError
from dualpath.warehouse.db import bounded_query, reader, table_names
from dualpath.warehouse.dictionary import dictionary
from dualpath.warehouse.migrations import migrate
from dualpath.warehouse.queries import sql
from dualpath.warehouse.quoting import ident, literal


def user_sql(path: Path, query: str, timeout_s: float = 60.0) -> pd.DataFrame:
    """A person's read-only query over the warehouse file and nothing else, stopped after
    `timeout_s` and never keeping a night's ingest out (`warehouse.db.bounded_query`); a
    refused, failed or stopped query is a UserError saying why."""
    try:
        return bounded_query(path, lambda con: sql(con, query), timeout_s)
    except duckdb.PermissionException as e:
        raise UserError(f"query refused: {str(e).splitlines()[0][:300]}. `dualpath sql` "
                        "reads the warehouse only (no files, COPY TO, EXPORT, ATTACH or "
                        "extensions); use `dualpath export` to write files") from None
    except (duckdb.CatalogException, duckdb.BinderException) as e:
        raise UserError(f"query failed: {one_line(e)}; `dualpath schema` lists every table, "
                        "view and column") from None
    except duckdb.Error as e:
        raise UserError(f"query failed: {one_line(e)}") from None


HINT_MAX = 160      # a longer hint (a long list of candidates) is left out


def one_line(e: duckdb.Error) -> str:
    """DuckDB's message as one line: its first, and its hint ('Did you mean …', 'Candidate
    bindings: …') in brackets when short; the echoed query and its caret are dropped."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    hints = [line for line in lines[1:]
             if not line.startswith("LINE ") and set(line) - set("^ ")]
    head = lines[0][:300] if lines else type(e).__name__
    return head + (f" ({hints[0]})" if hints and len(hints[0]) <= HINT_MAX else "")


def schema_frame(path: Path) -> pd.DataFrame:
    """The data dictionary of the warehouse at `path`, or of a new one where none is yet."""
    if path.exists():
        with reader(path) as con:
            return dictionary(con)
    with duckdb.connect() as con:   # the schema a new warehouse will have
        migrate(con)
        return dictionary(con)


def export_tables(path: Path, out: Path, fmt: str) -> int:
    """Every table and view of the warehouse written to `out` as one parquet or csv file
    each; returns how many."""
    opts = "(FORMAT parquet)" if fmt == "parquet" else "(HEADER, DELIMITER ',')"
    with reader(path) as con:
        names = table_names(con)
        for name in names:
            target = (out / f"{name}.{fmt}").resolve()
            con.execute(f"COPY (SELECT * FROM {ident(name)}) TO {literal(target)} {opts}")
    return len(names)
