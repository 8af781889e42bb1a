"""Prefect flows and the plain functions behind them.

`flows.nightly` is the scheduled flow; `flows.runner` plans, scores into journals and
ingests without Prefect; `flows.report` summarises runs; `flows.demo` drives the demo.
"""
