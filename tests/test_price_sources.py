"""Prices every night: the drop folder (only what is new), failing sources reported, the
freshness gate, and the online adapters on recorded responses (never the network)."""

import subprocess
import sys
import types
from datetime import date
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from typer.testing import CliRunner

from dualpath.calendar import MarketCalendar
from dualpath.cli import app
from dualpath.config import MarketSettings
from dualpath.errors import NotASession
from dualpath.warehouse.freshness import freshness
from dualpath.warehouse.migrations import migrate
from dualpath.warehouse.price_sources import PRICE_UPDATES_SQL, update_prices
from dualpath.warehouse.prices import PRICE_GAPS_SQL, load_prices

DATA = Path(__file__).parent / "data"
XKRX = MarketCalendar.from_settings(MarketSettings(), today=date(2026, 11, 30))
UNIVERSE = ["AAA", "BBB", "CCC"]
HEADER = "ticker,date,close,adj_close\n"
NIGHT = date(2026, 11, 27)


def con_():
    con = duckdb.connect()
    migrate(con)
    return con


def drop(name: str, body: str) -> None:
    Path("drop").mkdir(exist_ok=True)
    Path("drop", name).write_text(HEADER + body)


def update(con, night=NIGHT, tickers=UNIVERSE, **settings):
    s = MarketSettings(**({"prices_dir": Path("drop")} | settings))
    return update_prices(con, s, Path.cwd(), XKRX, tickers, night)


def test_drop_folder_imports_only_what_is_new_and_reports_freshness_per_ticker():
    con = con_()
    drop("2026-11-26.csv", "AAA,2026-11-25,10,10\nAAA,2026-11-26,11,11\n"
                           "BBB,2026-11-25,20,20\nBBB,2026-11-26,21,21\n")
    r = update(con)
    assert r.lines() == [
        f"drop folder {Path('drop').resolve()}: 1 file(s), 4 new row(s), 0 revised",
        "no ticker has a price for the night's session 2026-11-27: the newest are from "
        "2026-11-26, 1 session(s) before; update them (`dualpath prices update`)",
        "stale prices for 2026-11-27: 2 of 3 ticker(s) have no price for the night's session: "
        "AAA (last 2026-11-26, 1 session(s) behind), BBB (last 2026-11-26, 1 session(s) behind)",
        "no prices at all on or before 2026-11-27 for 1 of 3 ticker(s): CCC"]
    assert r.freshness.frame().to_dict("records") == [
        {"ticker": "AAA", "last_priced": date(2026, 11, 26), "sessions_behind": 1, "status": "stale"},
        {"ticker": "BBB", "last_priced": date(2026, 11, 26), "sessions_behind": 1, "status": "stale"},
        {"ticker": "CCC", "last_priced": None, "sessions_behind": None, "status": "missing"}]
    drop("2026-11-27.csv", "AAA,2026-11-27,11.5,11.5\nBBB,2026-11-27,21.5,21.5\n"
                           "CCC,2026-11-27,30,30\n")
    r = update(con)
    assert (r.new, r.sources[0].files, r.sources[0].warnings) == (3, 2, [])
    assert r.freshness.ok and r.freshness.messages == [
        "prices are fresh for 2026-11-27: 3 of 3 ticker(s) priced on the night's session"]
    again = update(con)                          # idempotent and quiet
    assert (again.new, again.sources[0].revised, again.sources[0].warnings) == (0, 0, [])
    assert len(load_prices(con)) == 7


def test_a_corrected_file_revises_once_and_never_flip_flops():
    con = con_()
    drop("a.csv", "AAA,2026-11-27,10,10\n")
    update(con)
    drop("a.csv", "AAA,2026-11-27,10.2,10.2\n")
    r = update(con)
    assert r.sources[0].revised == 1 and r.sources[0].warnings == [
        f"drop folder {Path('drop').resolve()}: 1 stored price(s) revised, e.g. AAA 2026-11-27 "
        "adj_close 10 -> 10.2 (forward returns of past nights change)"]
    assert update(con).sources[0].revised == 0
    assert load_prices(con)["adj_close"].tolist() == [10.2]


def test_two_files_that_disagree_are_refused_naming_both_and_the_rows():
    """Once the later name won without a word ('56 new, 0 revised, warnings []')."""
    con = con_()
    drop("a.csv", "AAA,2026-11-26,10,10\nAAA,2026-11-27,11,11\nBBB,2026-11-27,20,20\n")
    drop("b.csv", "AAA,2026-11-26,10,10\nAAA,2026-11-27,12,12\nBBB,2026-11-27,21,21\n")
    r = update(con)
    assert r.sources[0].error == (
        f"drop folder {Path('drop').resolve()}: files a.csv and b.csv give different prices "
        "for 2 (ticker, date) row(s): AAA 2026-11-27 adj_close 11 vs 12, BBB 2026-11-27 "
        "adj_close 20 vs 21; nothing from the folder was imported: remove or correct one of "
        "them (to revise a price, change the file that gave it)")
    assert r.sources[0].new == 0 and load_prices(con).empty
    drop("b.csv", "AAA,2026-11-26,10,10\n")                 # agreeing rows are fine
    assert update(con).sources[0].new == 3


def test_updates_are_logged_once_the_warehouse_has_the_table():
    con = con_()
    con.execute(PRICE_UPDATES_SQL)               # the migration the report asks for
    drop("a.csv", "AAA,2026-11-27,10,10\n")
    update(con)
    update(con)
    assert con.execute("SELECT night, files, new_rows, revised_rows, error FROM price_updates "
                       "ORDER BY updated_at").fetchall() == [(NIGHT, 1, 1, 0, None),
                                                             (NIGHT, 1, 0, 0, None)]


def test_a_bad_file_is_reported_and_the_others_still_import():
    con = con_()
    drop("a.csv", "AAA,2026-11-27,10,10\n")
    drop("b.csv", "BBB,27/11/2026,10,10\n")
    r = update(con)
    assert r.new == 1 and not r.failed
    assert r.sources[0].warnings[0].startswith("b.csv skipped: b.csv: date '27/11/2026' on "
                                               "line(s) 2 is not an ISO date")


def test_a_drop_folder_of_one_ticker_yahoo_exports():
    Path("drop").mkdir()
    Path("drop", "AAA.csv").write_text("Date,Open,High,Low,Close,Adj Close,Volume\n"
                                       "2026-11-26,1,1,1,10,9.9,5\n2026-11-27,1,1,1,10.5,10.4,5\n")
    r = update(con_(), tickers=["AAA"], ticker_from_filename=True,
               columns={"Adj Close": "adj_close"})
    assert (r.new, r.freshness.ok, r.sources[0].warnings) == (2, True, [])


def test_a_failing_source_is_reported_not_raised():
    r = update(con_(), prices_dir=Path("nowhere"), prices_file=Path("none.csv"))
    assert [s.line() for s in r.failed] == [
        f"prices_file {Path('none.csv').resolve()}: FAILED: every file was skipped (see the "
        "warnings)",
        f"drop folder {Path('nowhere').resolve()}: FAILED: drop folder "
        f"{Path('nowhere').resolve()} does not exist; create it or fix [market] prices_dir"]
    assert r.freshness.missing == UNIVERSE


def test_a_night_must_be_a_session():
    with pytest.raises(NotASession, match="2026-11-28 is not a session of XKRX"):
        update(con_(), night=date(2026, 11, 28))


def test_halts_are_known_once_the_warehouse_records_them():
    con = con_()
    con.execute(PRICE_GAPS_SQL)                  # the migration the issue asks for
    drop("a.csv", "AAA,2026-11-26,10,10\nAAA,2026-11-27,,\nBBB,2026-11-27,5,5\n"
                  "CCC,2026-11-27,5,5\n")
    r = update(con)
    assert r.sources[0].warnings == ["a.csv: blank adj_close on 1 row(s), read as no price that "
                                     "day (a halt?): AAA 2026-11-27; those days stay missing, "
                                     "never zero"]
    assert (r.freshness.halted, r.freshness.ok) == (["AAA"], True)
    assert r.freshness.messages == ["prices are fresh for 2026-11-27: 2 of 3 ticker(s) priced "
                                    "on the night's session, 1 halted"]
    drop("b.csv", "AAA,2026-11-27,10.1,10.1\n")  # the price arrives: the halt ends
    assert update(con).freshness.halted == []
    assert con.execute("SELECT count(*) FROM price_gaps").fetchall() == [(0,)]


def test_a_halt_without_the_gaps_table_is_reported_once_not_every_night():
    con = con_()
    drop("a.csv", "AAA,2026-11-26,10,10\nAAA,2026-11-27,,\n")
    assert any("blank adj_close" in w for w in update(con).sources[0].warnings)
    assert update(con).sources[0].warnings == []


def test_a_partly_filled_newest_day_before_the_night_is_named():
    con = con_()
    con.execute("INSERT INTO prices VALUES ('AAA', DATE '2026-11-25', 1, 1), "
                "('BBB', DATE '2026-11-25', 1, 1), ('AAA', DATE '2026-11-26', 1, 1)")
    f = freshness(con, ["AAA", "BBB"], NIGHT, XKRX)
    assert (f.newest, f.partial, f.stale, f.behind) == (date(2026, 11, 26), True,
                                                         ["AAA", "BBB"], {"AAA": 1, "BBB": 2})
    assert f.messages[-1] == ("the newest price day 2026-11-26 is partly filled: 1 ticker(s) "
                              "against 2 on 2026-11-25 (a file still arriving?)")


def test_forward_returns_that_can_never_mature_are_flagged():
    con = con_()
    con.execute("INSERT INTO prices VALUES ('AAA', DATE '2026-11-27', 1, 1)")
    f = freshness(con, ["AAA"], NIGHT, XKRX, market=MarketSettings(), max_horizon=20)
    assert f.never_matures and f.messages[-1] == (
        "no price source is configured ([market] prices_file, prices_dir or source), so the "
        "20-session forward return of 2026-11-27 (due 2026-12-28) will never mature unless "
        "prices are imported by hand")
    ok = freshness(con, ["AAA"], NIGHT, XKRX, market=MarketSettings(prices_dir=Path("d")),
                   max_horizon=20)
    assert not ok.never_matures


# -- online sources on recorded responses ---------------------------------------------------

def recorded(name: str) -> pd.DataFrame:
    return pd.read_csv(DATA / name, index_col=0, parse_dates=True)


def fake(monkeypatch, name: str, **attrs) -> list:
    calls: list = []
    parts = name.split(".")
    for i in range(len(parts)):
        monkeypatch.setitem(sys.modules, ".".join(parts[:i + 1]),
                            types.ModuleType(".".join(parts[:i + 1])))
    mod = sys.modules[name]

    def recording(fn):
        def call(*a, **kw):
            calls.append((a, kw))
            return fn(*a, **kw)
        return call

    for k, fn in attrs.items():
        setattr(mod, k, recording(fn))
    return calls


def test_pykrx_adapter_reads_korean_columns(monkeypatch):
    def ohlcv(fromdate, todate, ticker, adjusted=True):
        df = recorded(f"pykrx_get_market_ohlcv_{ticker}.csv")
        return df[(df.index >= pd.Timestamp(fromdate)) & (df.index <= pd.Timestamp(todate))]
    calls = fake(monkeypatch, "pykrx.stock", get_market_ohlcv=ohlcv)
    con = con_()
    r = update(con, tickers=["005930", "000660"], prices_dir=None, source="pykrx",
               backfill_sessions=5)
    assert r.lines() == ["pykrx: 10 new row(s), 0 revised", "prices are fresh for 2026-11-27: "
                         "2 of 2 ticker(s) priced on the night's session"]
    assert calls[0] == (("20261123", "20261127", "005930"), {"adjusted": True})  # 5 sessions
    px = load_prices(con)
    assert px[px["ticker"] == "005930"]["adj_close"].tolist() == [70500, 71200, 70800, 71900,
                                                                  72300]
    calls.clear()
    update(con, tickers=["005930", "000660"], prices_dir=None, source="pykrx",
           refetch_sessions=2)
    assert calls[0][0][:2] == ("20261125", "20261127")     # the last price, 2 sessions back


def test_fdr_adapter(monkeypatch):
    fake(monkeypatch, "FinanceDataReader",
         DataReader=lambda sym, start, end: recorded(f"fdr_datareader_{sym}.csv").loc[start:end])
    con = con_()
    r = update(con, tickers=["005930"], prices_dir=None, source="fdr", backfill_sessions=3)
    assert r.lines()[0] == "fdr: 3 new row(s), 0 revised"
    assert load_prices(con)["close"].tolist() == [70800, 71900, 72300]


def test_yfinance_adapter_reads_the_multiindex_download(monkeypatch):
    def download(symbols, start, end, **kw):
        df = pd.read_csv(DATA / "yfinance_download_005930.KS_000660.KS.csv", header=[0, 1],
                         index_col=0, parse_dates=True)
        df.columns.names = ["Price", "Ticker"]
        assert end == "2026-11-28" and kw["auto_adjust"] is False   # end is exclusive
        return df.loc[start:][[c for c in df.columns if c[1] in symbols]]
    fake(monkeypatch, "yfinance", download=download)
    con = con_()
    r = update(con, tickers=["005930", "000660"], prices_dir=None, source="yfinance",
               symbol_suffix=".KS")
    assert r.new == 10 and r.freshness.ok
    px = load_prices(con).set_index(["ticker", "date"])
    row = px.loc[("005930", pd.Timestamp("2026-11-27"))]
    assert (row["close"], row["adj_close"]) == (72300, 71215.5)


def test_a_source_not_installed_is_reported_and_files_still_import(monkeypatch):
    monkeypatch.setitem(sys.modules, "pykrx", None)          # import pykrx -> ImportError
    monkeypatch.setitem(sys.modules, "pykrx.stock", None)
    con = con_()
    drop("a.csv", "AAA,2026-11-27,10,10\n")
    r = update(con, source="pykrx")
    assert [s.line() for s in r.failed] == [
        "pykrx: FAILED: pykrx is not installed; `pip install pykrx` or set [market] "
        "source = \"files\""]
    assert r.new == 1


def test_a_network_error_is_reported(monkeypatch):
    def boom(*a, **kw):
        raise ConnectionError("Max retries exceeded with url: /v8/finance/chart")
    fake(monkeypatch, "yfinance", download=boom)
    r = update(con_(), prices_dir=None, source="yfinance")
    assert r.failed[0].line() == ("yfinance: FAILED: ConnectionError: Max retries exceeded with "
                                  "url: /v8/finance/chart")


def test_the_adapters_libraries_are_not_imported_with_the_module():
    code = ("import sys, warehouse.price_sources; "
            "print([m for m in ('pykrx', 'FinanceDataReader', 'yfinance') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).parents[1], check=True)
    assert out.stdout.strip() == "[]"


# -- the command line -----------------------------------------------------------------------

CONFIG = """[experiment]
universe = ["AAA", "BBB"]
horizons = [1]
[paths.p]
engine = "sim"
model = "m"
[warehouse]
path = "w.duckdb"
[market]
prices_dir = "drop"
"""


def test_cli_prices_update_then_status():
    Path("dualpath.toml").write_text(CONFIG)
    drop("a.csv", "AAA,2026-11-26,10,10\nBBB,2026-11-26,20,20\nAAA,2026-11-27,10,10\n")
    runner = CliRunner()
    r = runner.invoke(app, ["prices", "update", "--date", "2026-11-27", "-f", "csv"])
    assert r.exit_code == 0, r.output
    assert "1 file(s), 3 new row(s), 0 revised" in r.output
    assert "ticker,last_priced,sessions_behind,status\nBBB,2026-11-26,1,stale\n" \
           "AAA,2026-11-27,0,fresh\n" in r.output
    s = runner.invoke(app, ["prices", "status", "--date", "2026-11-27"])
    assert s.exit_code == 1 and "stale prices for 2026-11-27: 1 of 2 ticker(s)" in s.output
    h = runner.invoke(app, ["prices", "status", "--date", "2027-01-01"])
    assert isinstance(h.exception, NotASession)


def test_cli_through_the_real_entry_point_exits_2_on_a_holiday():
    Path("dualpath.toml").write_text(CONFIG)
    exe = Path(sys.executable).with_name("dualpath")
    out = subprocess.run([str(exe), "prices", "update", "--date", "2027-01-01"],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "2027-01-01 is not a session of XKRX (Friday, an exchange holiday); the previous " \
           "session is 2026-12-30, the next is 2027-01-04" in out.stderr


def test_a_korean_hts_export_drops_in_as_exported_cp949_with_thousands_separators():
    """A raw HTS export: CP949 text, Korean headers, '71,000'-style prices, dotted dates."""
    Path("drop").mkdir()
    body = ("종목코드,일자,종가,수정종가\n"
            'AAA,2026.11.26,"71,000","71,000"\n'
            'AAA,2026.11.27,"72,500","72,500"\n'
            'BBB,2026.11.27,"1,234,567.5","1,234,567.5"\n'
            "CCC,2026.11.27,950,950\n")
    Path("drop", "hts.csv").write_bytes(body.encode("cp949"))
    cols = {"종목코드": "ticker", "일자": "date", "종가": "close", "수정종가": "adj_close"}
    con = con_()
    plain = update(con, columns=cols, date_format="%Y.%m.%d")
    assert "not UTF-8" in plain.sources[0].warnings[0] and "encoding" in plain.sources[0].warnings[0]
    r = update(con, columns=cols, date_format="%Y.%m.%d", encoding="cp949", thousands=",")
    assert (r.new, r.sources[0].warnings) == (4, [])
    got = load_prices(con).sort_values(["ticker", "date"])
    assert got["adj_close"].tolist() == [71000.0, 72500.0, 1234567.5, 950.0]
    assert r.freshness.ok


def test_a_thousands_separator_is_read_only_between_digit_groups():
    from dualpath.warehouse.prices import DataError, validate_prices

    raw = pd.DataFrame({"ticker": ["AAA"], "date": ["2026-11-27"], "adj_close": ["7,10,00"]})
    with pytest.raises(DataError, match="is not a number"):
        validate_prices(raw, thousands=",")


def test_a_freshness_message_is_prefixed_prices_only_where_it_does_not_say_so():
    """The report's footer read 'prices: prices are fresh …': each message names prices in
    its first words, but one that does not ('2 ticker(s) halted …') still says what it is of."""
    from dualpath.warehouse.freshness import as_line

    assert as_line("prices are fresh for 2027-05-13: 8 of 8 ticker(s)") == (
        "prices are fresh for 2027-05-13: 8 of 8 ticker(s)")
    assert as_line("stale prices for 2027-05-13: 1 of 3 ticker(s) have no price") == (
        "stale prices for 2027-05-13: 1 of 3 ticker(s) have no price")
    assert as_line("the newest price day 2027-05-13 is partly filled") == (
        "the newest price day 2027-05-13 is partly filled")
    assert as_line("2 ticker(s) halted on 2027-05-13: AAA, BBB") == (
        "prices: 2 ticker(s) halted on 2027-05-13: AAA, BBB")
