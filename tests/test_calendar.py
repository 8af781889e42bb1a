"""The market calendar: nights are sessions; the default night follows the market's clock."""

from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from dualpath.calendar import MarketCalendar
from dualpath.config import MarketSettings, parse_config
from dualpath.errors import ConfigError, NotASession, UserError
from dualpath.market import SyntheticMarket

XKRX = MarketCalendar.from_settings(MarketSettings(), today=date(2026, 11, 30))
UTC, SEOUL = timezone.utc, ZoneInfo("Asia/Seoul")


def test_a_saturday_is_refused_with_the_sessions_around_it():
    with pytest.raises(NotASession) as e:
        XKRX.require_session(date(2026, 12, 5))
    assert str(e.value) == ("2026-12-05 is not a session of XKRX (Saturday, a weekend day); "
                            "the previous session is 2026-12-04, the next is 2026-12-07: score "
                            "one of those (--date YYYY-MM-DD)")


@pytest.mark.parametrize("holiday,before,after", [
    (date(2027, 1, 1), date(2026, 12, 30), date(2027, 1, 4)),     # New Year (and 12-31 closed)
    (date(2026, 9, 24), date(2026, 9, 23), date(2026, 9, 28)),    # Chuseok
    (date(2026, 12, 31), date(2026, 12, 30), date(2027, 1, 4)),   # KRX year-end closing day
])
def test_krx_holidays_are_refused(holiday, before, after):
    assert not XKRX.is_session(holiday)
    with pytest.raises(NotASession) as e:
        XKRX.require_session(holiday)
    assert str(e.value) == (f"{holiday} is not a session of XKRX ({holiday:%A}, an exchange "
                            f"holiday); the previous session is {before}, the next is {after}: "
                            "score one of those (--date YYYY-MM-DD)")
    assert (XKRX.previous_session(holiday), XKRX.next_session(holiday)) == (before, after)


def test_a_session_passes():
    assert XKRX.require_session(date(2026, 11, 30)) == date(2026, 11, 30)


@pytest.mark.parametrize("now,night", [
    (datetime(2026, 11, 30, 7, 0, tzinfo=UTC), date(2026, 11, 30)),     # 16:00 Seoul: closed
    (datetime(2026, 11, 30, 15, 30, tzinfo=UTC), date(2026, 11, 30)),   # 00:30 Seoul next day
    (datetime(2026, 11, 30, 6, 0, tzinfo=UTC), date(2026, 11, 27)),     # 15:00 Seoul: still open
    (datetime(2026, 11, 29, 23, 0, tzinfo=UTC), date(2026, 11, 27)),    # Monday 08:00 Seoul
    (datetime(2026, 12, 5, 12, 0, tzinfo=UTC), date(2026, 12, 4)),      # a Saturday
    (datetime(2027, 1, 1, 12, 0, tzinfo=UTC), date(2026, 12, 30)),      # New Year's Day
])
def test_default_night_is_the_latest_closed_session_in_seoul(now, night):
    assert XKRX.default_night(now) == night


def test_default_night_is_the_same_instant_whatever_the_zone_it_is_given_in():
    # a UTC host after the Seoul close: UTC says 2026-11-30, Seoul says 2026-12-01 01:00
    utc = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)
    assert XKRX.default_night(utc) == XKRX.default_night(utc.astimezone(SEOUL)) \
        == XKRX.default_night(utc.astimezone(ZoneInfo("America/New_York"))) == date(2026, 11, 30)
    assert XKRX.default_night(datetime(2026, 12, 1, 7, 0, tzinfo=UTC)) == date(2026, 12, 1)


def test_default_night_needs_an_aware_time():
    with pytest.raises(ValueError, match="aware datetime"):
        XKRX.default_night(datetime(2026, 11, 30, 16, 0))


def test_the_close_is_the_exchanges_own():
    assert XKRX.close_of(date(2026, 11, 30)) == datetime(2026, 11, 30, 15, 30, tzinfo=SEOUL)
    assert XKRX.tz.key == "Asia/Seoul"


def test_sessions_step_over_holidays():
    assert XKRX.sessions(date(2026, 12, 28), date(2027, 1, 5)) == [
        date(2026, 12, 28), date(2026, 12, 29), date(2026, 12, 30), date(2027, 1, 4),
        date(2027, 1, 5)]
    assert XKRX.sessions_after(date(2026, 12, 30), 2) == [date(2027, 1, 4), date(2027, 1, 5)]
    assert XKRX.sessions_between(date(2026, 12, 28), date(2027, 1, 4)) == 3
    assert XKRX.session_on_or_before(date(2027, 1, 1)) == date(2026, 12, 30)


def test_a_date_outside_the_calendar_says_its_range():
    with pytest.raises(UserError, match=r"1989-06-01 is outside the XKRX calendar \(1990-01-03 "
                                        r"\.\. 2028-12-28\); give a date in that range"):
        XKRX.is_session(date(1989, 6, 1))


def test_the_synthetic_calendar_is_the_demo_markets():
    cal = MarketCalendar.from_settings(MarketSettings(synthetic_seed=7), today=date(2026, 11, 30))
    market = SyntheticMarket(7, n_tickers=3, n_days=300)
    assert cal.name == "synthetic" and cal.tz.key == "Asia/Seoul"
    assert cal.sessions(market.dates[0], market.dates[-1]) == market.dates
    holiday = date(2027, 2, 3)                   # the 23rd weekday from 2027-01-04
    assert holiday not in market.dates
    with pytest.raises(NotASession, match=r"2027-02-03 is not a session of synthetic "
                                          r"\(Wednesday, a synthetic holiday\); the previous "
                                          r"session is 2027-02-02, the next is 2027-02-04"):
        cal.require_session(holiday)
    assert cal.default_night(datetime(2027, 2, 4, 6, 0, tzinfo=UTC)) == date(2027, 2, 2)
    assert cal.default_night(datetime(2027, 2, 4, 7, 0, tzinfo=UTC)) == date(2027, 2, 4)


def test_the_synthetic_pattern_runs_before_its_start():
    # a night before the market began is a session without prices, not a refused date
    cal = MarketCalendar.from_settings(MarketSettings(calendar="synthetic"))
    early = SyntheticMarket(7, start=date(2026, 1, 4), n_days=60).dates[-1]
    assert cal.is_session(early)


def _market(**kw):
    return parse_config({"experiment": {"universe": ["AAA"]},
                         "paths": {"p": {"engine": "sim", "model": "m"}}, "market": kw}).market


def test_settings_mistakes_say_how_to_fix_them():
    with pytest.raises(ConfigError, match=r"market.timezone = 'Asia/Seol': not an IANA time zone"):
        _market(timezone="Asia/Seol")
    with pytest.raises(ConfigError, match=r"synthetic_seed imports the synthetic market, whose "
                                          r"days are the 'synthetic' calendar's, not XKRX's"):
        _market(synthetic_seed=7, calendar="XKRX")
    assert _market(synthetic_seed=7).calendar == "synthetic"
    with pytest.raises(ConfigError, match=r"market: calendar 'XKRZ' is not an exchange "
                                          r"calendar; use an exchange_calendars code"):
        _market(calendar="XKRZ")
    with pytest.raises(ConfigError) as e:
        MarketCalendar.from_settings(_market(calendar="XNYS", timezone="Asia/Seoul"))
    assert str(e.value) == ("[market] timezone 'Asia/Seoul' disagrees with calendar XNYS, which "
                            "trades in America/New_York; remove 'timezone' (the exchange's own "
                            "zone is used) or set it to 'America/New_York'")


def test_another_exchange_uses_its_own_clock():
    assert _market(calendar="XNYS").timezone == "America/New_York"   # never Seoul by default
    assert _market().timezone == "Asia/Seoul"
    nyse = MarketCalendar.from_settings(_market(calendar="XNYS"), today=date(2026, 11, 30))
    # 2026-11-26 is Thanksgiving; the 27th closes early, at 13:00 New York (18:00 UTC)
    assert not nyse.is_session(date(2026, 11, 26))
    assert nyse.default_night(datetime(2026, 11, 27, 19, 0, tzinfo=UTC)) == date(2026, 11, 27)
    assert nyse.default_night(datetime(2026, 11, 27, 17, 0, tzinfo=UTC)) == date(2026, 11, 25)
