"""Quoting for what reaches SQL as text, not as a `?` parameter: identifiers (table and
column names, which may come from a file's header) and string literals (file paths in
COPY / ATTACH / read_parquet, which DuckDB takes only as literals there). DuckDB follows
standard SQL: a double quote inside an identifier and a single quote inside a literal are
doubled."""

from __future__ import annotations

from os import PathLike


def ident(name: str) -> str:
    """`name` as an SQL identifier: `a"b` -> `"a""b"`."""
    return '"' + str(name).replace('"', '""') + '"'


def literal(text: str | PathLike) -> str:
    """`text` (a path, say) as an SQL string literal: `it's` -> `'it''s'`."""
    return "'" + str(text).replace("'", "''") + "'"
