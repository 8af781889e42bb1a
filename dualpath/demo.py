"""The embedded default: the demo config and its synthetic market."""

from __future__ import annotations

import tomllib
from pathlib import Path

from dualpath.config import Config
from dualpath.market import SyntheticMarket, market_for_nights


def example_config_path() -> Path:
    """The real two-path setup shipped inside the package (`dualpath init`)."""
    return Path(__file__).with_name("example.toml")


def demo_config_path() -> Path:
    """The embedded default config shipped inside the package."""
    return Path(__file__).with_name("demo.toml")


def demo_config_data(root: Path, tickers: int, draws: int, clock: float = 1.0) -> dict:
    """The embedded demo config, resized, with storage under `root` and the clocks x `clock`."""
    data = tomllib.loads(demo_config_path().read_text())
    data["experiment"]["universe"] = data["experiment"]["universe"][:tickers]
    data["experiment"]["draws"] = draws
    data["warehouse"] = {"path": "warehouse.duckdb", "runs_dir": "runs"}
    for p in data["paths"].values():
        p["sim"]["time_scale"] = p["sim"].get("time_scale", 1.0) * clock
    return data


def demo_market(cfg: Config, nights: int) -> SyntheticMarket:
    """The synthetic market long enough for `nights` nights and the longest horizon."""
    return market_for_nights(cfg.market.synthetic_seed, nights, 100, max(cfg.experiment.horizons),
                             cfg.market.synthetic_start)
