"""A journal's server numbers checked again as they are staged (`dualpath.server_numbers`).

A journal written before the client checked them may hold a count no warehouse column takes
(`usage.prompt_tokens = 2**40` made every ingest of its journal fail, INT64 into INTEGER) or a
count the JSON reader turned to NULL without a word ("lots"). Each such field is read as the
text it was, kept as a number only when it is one inside `LIMITS`, and otherwise added to the
call's `untrusted` JSON as the text it was: an ingest never stops on a server's number.
"""

from __future__ import annotations

from dualpath.server_numbers import LIMITS

CHECKED = tuple(LIMITS)


def _ok(field: str) -> str:
    kind, hi = LIMITS[field]
    if kind is int:
        return (f"(regexp_full_match({field}, '[0-9]+') AND "
                f"TRY_CAST({field} AS BIGINT) <= {int(hi)})")
    return f"coalesce(TRY_CAST({field} AS DOUBLE) BETWEEN 0 AND {hi!r}, false)"


def checked_columns() -> str:
    """SELECT expressions for every checked field and `untrusted`, over a staged row whose
    checked fields are VARCHAR (the text as journaled)."""
    exprs = []
    for f in CHECKED:
        kind = "BIGINT" if LIMITS[f][0] is int else "DOUBLE"
        exprs.append(f"CASE WHEN {_ok(f)} THEN TRY_CAST({f} AS {kind}) END AS {f}")
    pieces = ", ".join(f"CASE WHEN {f} IS NOT NULL AND NOT {_ok(f)} THEN "
                       f"'\"journal.{f}\":' || to_json({f}) END" for f in CHECKED)
    exprs.append(f"""CASE WHEN concat_ws(',', {pieces}) = '' THEN untrusted
                     ELSE json_merge_patch(coalesce(untrusted, '{{}}'),
                                           '{{' || concat_ws(',', {pieces}) || '}}')::VARCHAR
                     END AS untrusted""")
    return ",\n".join(exprs)
