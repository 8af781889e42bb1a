"""The night's inputs, before any call is made: prices in the warehouse, and which tickers
cannot be scored tonight (named, so that their units are recorded `input_failed`)."""

from __future__ import annotations

from datetime import date

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.night import PriceHistory, missing_inputs
from warehouse.db import reader, writer
from warehouse.prices import load_prices


def ensure_prices(cfg: Config) -> None:
    """Profiles on the synthetic market import its prices once, before the first night."""
    from dualpath.market import SyntheticMarket
    from warehouse.prices import import_prices, validate_prices

    if cfg.market.synthetic_seed is None:
        return
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        if con.execute("SELECT count(*) FROM prices").fetchall()[0][0]:
            return
        raw = SyntheticMarket(cfg.market.synthetic_seed, start=cfg.market.synthetic_start,
                              n_days=400).prices()
        raw = raw[raw["ticker"].isin(cfg.tickers())]
        import_prices(con, validate_prices(raw, cfg.tickers(), "synthetic market")[0])


def price_history(cfg: Config) -> PriceHistory:
    """Prices from the warehouse for the prompts (only days up to each night are used)."""
    path = cfg.resolve(cfg.warehouse.path)
    if not path.exists():
        raise UserError(f"no warehouse at {path}; import prices first with "
                        "`dualpath prices import FILE`")
    with reader(path) as con:
        prices = load_prices(con)
    if prices.empty:
        raise UserError("the warehouse has no prices; import them with "
                        "`dualpath prices import FILE`")
    return PriceHistory(prices)


def describe_missing(missing: dict[str, str], night: date, limit: int = 5) -> str:
    """One line naming the tickers that cannot be scored tonight."""
    names = sorted(missing)
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    first = missing[names[0]]
    return (f"{len(names)} ticker(s) cannot be scored on {night}: {shown} (e.g. {first}); "
            "their units are recorded input_failed and the run cannot be complete")


__all__ = ["ensure_prices", "price_history", "missing_inputs", "describe_missing"]
