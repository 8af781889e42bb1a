"""SQL over a session's /metrics readings (`server_sessions.metrics_before_json` and
`metrics_after_json`), by what a counter means (`dualpath.engines.COUNTER_MEANINGS`): the
names are every registered engine's, so a new engine's counters are read everywhere at once
and no engine's name is written here."""

from __future__ import annotations

from dualpath.engines import cached_counter_names, counter_names
from dualpath.warehouse.quoting import ident, literal


def read_counter(col: str, names: tuple[str, ...], table: str = "") -> str:
    """SQL: the first of these /metrics counters a session's reading `col` holds (each
    engine's counters have their own prefix, so at most one is there); `table`: the
    server_sessions alias, if any."""
    where = f"{table}.{col}" if table else col
    reads = ", ".join(f"json_extract({where}, {literal('$.' + ident(n))})" for n in names)
    return f"coalesce({reads})::DOUBLE"


def growth(names: tuple[str, ...], table: str = "") -> str:
    """SQL: a counter's growth over the session (after - before)."""
    return (f"({read_counter('metrics_after_json', names, table)} - "
            f"{read_counter('metrics_before_json', names, table)})")


def counter_growth(meaning: str, table: str = "") -> str:
    """SQL: the growth of whichever registered engine's counter has this meaning."""
    return growth(counter_names(meaning), table)


def cached_growth(table: str = "") -> str:
    """SQL: the cache hits to take from an engine's prompt counter that counts them too
    (vLLM's and SGLang's prompt_tokens_total; llama-server's counts prefill only): 0 where
    none."""
    return f"coalesce({growth(cached_counter_names(), table)}, 0)"
