"""Where a night's prices come from (`[market]` of `dualpath.toml`): a file, a drop folder,
an online source or the demo's synthetic market; how strictly files are read; which
exchange's sessions a night is counted in. Read as part of `dualpath.config.Config`, which
re-exports `MarketSettings`.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from dualpath.config_checks import date_format_problem, plain_path
from dualpath.strict import StrictModel


class MarketSettings(StrictModel):
    """Where prices come from (a file, a drop folder, an online source, or the demo's synthetic
    market), how strictly they are read, and which exchange's sessions a night is counted in."""

    calendar: str = Field("XKRX", min_length=1, description="Exchange calendar "
                          "(exchange_calendars code, e.g. XKRX, XNYS, XTKS), or 'synthetic' "
                          "for the demo's market. A night must be one of its sessions.")
    timezone: str = Field("Asia/Seoul", description="The market's time zone (IANA name); "
                          "unset = the exchange's own (XKRX: Asia/Seoul, XNYS: "
                          "America/New_York; 'synthetic': Asia/Seoul). The default night is "
                          "the latest session whose close has passed there; schedules run in "
                          "it.")
    prices_file: Path | None = Field(None, description="A CSV/Parquet of daily prices, "
                                     "imported (what is new) before every night.")
    prices_dir: Path | None = Field(None, description="A drop folder: every *.csv / *.parquet "
                                    "in it is imported (what is new) before every night; later "
                                    "file names win where two files give the same day.")
    columns: dict[str, str] = Field(default_factory=dict, description="Column mapping for "
                                    "price files, file header -> ticker|date|close|adj_close, "
                                    "e.g. {Date = 'date', 'Adj Close' = 'adj_close'}.")
    ticker_from_filename: bool = Field(False, description="A price file without a ticker "
                                       "column takes its ticker from its name (005930.csv -> "
                                       "005930): a drop folder of one-ticker exports.")
    date_format: str | None = Field(None, description="strptime format of the files' dates "
                                    "(e.g. '%d/%m/%Y'); unset = ISO YYYY-MM-DD only.")
    encoding: str = Field("utf-8", min_length=1, description="Text encoding of CSV price "
                          "files, e.g. 'cp949' or 'euc-kr' for a Korean Excel/HTS export "
                          "(any Python codec name).")
    thousands: str | None = Field(None, min_length=1, max_length=1, description="Thousands "
                                  "separator in the files' prices, e.g. ',' for '71,000' "
                                  "(unset: plain numbers only).")
    source: Literal["files", "pykrx", "fdr", "yfinance"] = Field(
        "files", description="'files': only prices_file / prices_dir; 'pykrx', 'fdr' "
        "(FinanceDataReader) or 'yfinance': also fetch the universe's recent prices online "
        "(optional extras; a failing source is reported and scoring still runs).")
    symbol_suffix: str = Field("", max_length=8, description="Appended to tickers for the "
                               "online source, e.g. '.KS' for Yahoo's KOSPI symbols.")
    backfill_sessions: int = Field(120, ge=1, le=5000, description="Sessions an online source "
                                   "fetches for a ticker with no prices yet.")
    refetch_sessions: int = Field(5, ge=0, le=260, description="Recent sessions an online "
                                  "source fetches again, so late revisions are picked up.")
    max_abs_log_return: float = Field(0.3365, gt=0, le=10, allow_inf_nan=False,
                                      description="Moves with |log return| above this are "
                                      "warned as suspicious (0.3365 = log 1.4: a 40% day).")
    synthetic_seed: int | None = Field(None, description="Seed of the synthetic market (demo).")
    synthetic_start: date = Field(date(2027, 1, 4), description="First synthetic trading day "
                                  "(the synthetic calendar's holidays count from it).")

    _plain = field_validator("prices_file", "prices_dir")(lambda v: plain_path(v))

    @field_validator("date_format")
    @classmethod
    def _strptime(cls, v: str | None) -> str | None:
        problem = date_format_problem(v) if v is not None else None
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("not an IANA time zone; use e.g. 'Asia/Seoul' or "
                             "'America/New_York'") from None
        return v

    @field_validator("columns")
    @classmethod
    def _targets(cls, v: dict[str, str]) -> dict[str, str]:
        bad = sorted(set(v.values()) - {"ticker", "date", "close", "adj_close"})
        if bad:
            raise ValueError(f"maps to unknown column(s) {bad}; targets are ticker, date, "
                             "close, adj_close")
        return v

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        # the synthetic market's days are the synthetic calendar's: its default calendar
        if data.get("synthetic_seed") is not None and "calendar" not in data:
            data["calendar"] = "synthetic"
        # an exchange trades in its own zone: the default, so XNYS is never judged in Seoul
        if data.get("timezone") is None and isinstance(data.get("calendar", "XKRX"), str):
            from dualpath.calendar import exchange_zone
            data["timezone"] = exchange_zone(data.get("calendar", "XKRX"))
        return data

    @model_validator(mode="after")
    def _synthetic(self) -> "MarketSettings":
        if self.synthetic_seed is not None and self.calendar != "synthetic":
            raise ValueError(f"synthetic_seed imports the synthetic market, whose days are the "
                             f"'synthetic' calendar's, not {self.calendar}'s; set calendar = "
                             "\"synthetic\", or remove synthetic_seed to use real prices")
        return self
