"""The only code that speaks DuckDB: migrations, journal ingest, views and queries.

Run journals (`warehouse.journal`) are the source of truth until ingested; ingest is
idempotent (`warehouse.ingest`); connections hold the file lock only briefly
(`warehouse.db`); `warehouse.frames` produces the frames `evals` takes.
"""
