"""The night's inputs, before any call is made: prices in the warehouse, and which tickers
cannot be scored tonight (named, so that their units are recorded `input_failed`)."""

from __future__ import annotations

from datetime import date, datetime

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.night import PriceHistory, missing_inputs
from dualpath.warehouse.db import reader, writer
from dualpath.warehouse.prices import load_prices, price_rows


def prepare_night(cfg: Config, night: date, calendar, tickers: list[str],
                  log) -> tuple[PriceHistory, dict[str, str]]:
    """Before any call, in one warehouse session: the synthetic market's prices imported
    once, prices updated and gated (`update_and_gate`), the price history read. Returns
    the history and the tickers the gate holds back, with why."""
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        ensure_prices(con, cfg, tickers)
        gated = update_and_gate(con, cfg, night, calendar, tickers, log)
        return history_of(con), gated


def ensure_prices(con, cfg: Config, tickers: list[str]) -> None:
    """Profiles on the synthetic market import its prices once, before the first night."""
    from dualpath.config_checks import SYNTHETIC_IMPORT_DAYS
    from dualpath.market import SyntheticMarket
    from dualpath.warehouse.prices import import_prices, validate_prices

    if cfg.market.synthetic_seed is None or price_rows(con):
        return
    raw = SyntheticMarket(cfg.market.synthetic_seed, start=cfg.market.synthetic_start,
                          n_days=SYNTHETIC_IMPORT_DAYS).prices()
    raw = raw[raw["ticker"].isin(tickers)]
    import_prices(con, validate_prices(raw, tickers, "synthetic market")[0])


def history_of(con) -> PriceHistory:
    """The warehouse's prices for the prompts (only days up to each night are used)."""
    prices = load_prices(con)
    if prices.empty:
        raise UserError("the warehouse has no prices; import them with "
                        "`dualpath prices import FILE`")
    return PriceHistory(prices)


def price_history(cfg: Config) -> PriceHistory:
    """Prices from the warehouse for the prompts, read outside a night (tests, benches)."""
    path = cfg.resolve(cfg.warehouse.path)
    if not path.exists():
        raise UserError(f"no warehouse at {path}; import prices first with "
                        "`dualpath prices import FILE`")
    with reader(path) as con:
        return history_of(con)


def describe_missing(missing: dict[str, str], night: date, limit: int = 5) -> str:
    """One line naming the tickers that cannot be scored tonight."""
    names = sorted(missing)
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    first = missing[names[0]]
    return (f"{len(names)} ticker(s) cannot be scored on {night}: {shown} (e.g. {first}); "
            "their units are recorded input_failed and the run cannot be complete")


def calendar_of(cfg: Config):
    from dualpath.calendar import MarketCalendar
    return MarketCalendar.from_settings(cfg.market)


def scheduled_night(cfg: Config, now: datetime) -> tuple[date | None, str]:
    """The night a scheduled run scores: None (with why) when today is no session in the
    market's time zone (a holiday's run exits cleanly), else the latest closed session."""
    cal = calendar_of(cfg)
    today = now.astimezone(cal.tz).date()
    if not cal.is_session(today):
        return None, f"no session on {today}: {cal.why_not(today)}; nothing to score"
    return cal.default_night(now), ""


def _sources_configured(cfg: Config) -> bool:
    m = cfg.market
    return bool(m.prices_file or m.prices_dir or m.source != "files")


def update_and_gate(con, cfg: Config, night: date, cal, tickers: list[str],
                    log) -> dict[str, str]:
    """Before any call: update prices from the configured sources (a failing source is
    reported, scoring still runs), then the freshness gate. Returns the tickers that cannot
    be scored tonight, with why: missing, stale (no close for the night's session) or halted."""
    from dualpath.warehouse.freshness import as_line, freshness
    from dualpath.warehouse.price_sources import update_prices

    cal.require_session(night)
    horizon = max(cfg.experiment.horizons)
    if _sources_configured(cfg):
        report = update_prices(con, cfg.market, cfg.base_dir, cal, tickers, night,
                               max_horizon=horizon)
        for line in report.lines():
            log.info("%s", as_line(line))
        for s in report.failed:
            log.warning("price source %s failed: %s (scoring goes on)", s.name, s.error)
    fresh = freshness(con, tickers, night, cal, cfg.market, horizon)
    for msg in fresh.messages:
        (log.info if fresh.ok else log.warning)("%s", as_line(msg))
    out = {t: f"no price for {t} on or before {night}" for t in fresh.missing}
    out |= {t: f"stale price for {t}: last {fresh.last_priced[t]}, {fresh.behind[t]} "
               f"session(s) before {night}; update prices" for t in fresh.stale}
    out |= {t: f"{t} is halted on {night}" for t in fresh.halted}
    return out


__all__ = ["prepare_night", "ensure_prices", "history_of", "price_history", "missing_inputs", "describe_missing",
           "scheduled_night", "update_and_gate", "calendar_of"]
