"""The frames `evals` takes, read from the warehouse views (contracts in `evals`)."""

from __future__ import annotations

from datetime import date

import pandas as pd

from dualpath.warehouse.disturbed import DISTURBED
from dualpath.warehouse.energy import ENERGY_BY_RUN


def _where(experiment: str, since: date | None, paths: list[str] | None, alias: str = "") -> tuple[str, list]:
    p = f"{alias}." if alias else ""
    clauses, params = [f"{p}experiment = ?"], [experiment]
    if since:
        clauses.append(f"{p}night >= ?")
        params.append(since)
    if paths:
        clauses.append(f"{p}path IN (SELECT unnest(?))")
        params.append(paths)
    return " AND ".join(clauses), params


def units_frame(con, experiment: str, since: date | None = None,
                paths: list[str] | None = None) -> pd.DataFrame:
    where, params = _where(experiment, since, paths)
    # the latest attempt of each unit is its outcome (earlier failed attempts were re-scored)
    df = con.execute(f"""SELECT run_id, path, night, ticker, draw, unit_attempt, start_wall,
                                end_wall, seconds, grade, outcome, run_status, clean
                         FROM v_units WHERE {where} AND is_final""", params).df()
    df["night"] = pd.to_datetime(df["night"])
    df["grade"] = df["grade"].astype("Int64")
    return df


def calls_frame(con, experiment: str, since: date | None = None,
                paths: list[str] | None = None) -> pd.DataFrame:
    """The numeric columns of every non-abandoned, uncontaminated call (no text)."""
    where, params = _where(experiment, since, paths)
    df = con.execute(f"""SELECT run_id, path, night, ticker, draw, agent, start_wall, end_wall,
                                latency_s, ttft_s, prompt_tokens, completion_tokens,
                                cached_tokens, prompt_n, prompt_ms, predicted_n, predicted_ms,
                                finish_reason, attempts, error_kind, is_contaminated AS contaminated,
                                abandoned, reasoning_tokens, reasoning_tokens_basis
                         FROM v_calls WHERE {where} AND NOT abandoned AND NOT is_contaminated""",
                     params).df()
    df["night"] = pd.to_datetime(df["night"])
    return df


def runs_frame(con, experiment: str, since: date | None = None,
               paths: list[str] | None = None) -> pd.DataFrame:
    where, params = _where(experiment, since, paths)
    df = con.execute(f"""SELECT run_id, path, night, status, wall_s, units_done AS units,
                                units_planned, tickers_planned, slots, time_scale, segments,
                                d.disturbed, e.joules, e.energy_s, e.idle_w, e.energy_unknown,
                                e.energy_basis, e.energy_hz, e.energy_error_j
                         FROM runs LEFT JOIN ({DISTURBED}) d USING (run_id)
                         LEFT JOIN ({ENERGY_BY_RUN}) e USING (run_id)
                         WHERE {where}""", params).df()
    df["night"] = pd.to_datetime(df["night"])
    return df


def prices_frame(con) -> pd.DataFrame:
    df = con.execute("SELECT ticker, date, adj_close FROM prices").df()
    df["date"] = pd.to_datetime(df["date"])
    return df
