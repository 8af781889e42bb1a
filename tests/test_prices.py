"""Strict, explainable price import: hand-made files, each with the exact message."""

from datetime import date
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from typer.testing import CliRunner

from dualpath.calendar import MarketCalendar
from dualpath.cli import app
from dualpath.config import MarketSettings
from dualpath.errors import DataError, UserError
from dualpath.warehouse.migrations import migrate
from dualpath.warehouse.price_sources import import_file
from dualpath.warehouse.prices import (import_prices, load_prices, parse_map, read_prices_file,
                              validate_prices)

XKRX = MarketCalendar.from_settings(MarketSettings(), today=date(2026, 11, 30))
HEADER = "ticker,date,close,adj_close\n"


def write(name: str, body: str, header: str = HEADER) -> Path:
    p = Path(name)
    p.write_text(header + body)
    return p


def check(path: Path, universe=("AAA", "BBB"), **kw) -> tuple[pd.DataFrame, list[str]]:
    return validate_prices(read_prices_file(path), list(universe), path.name, calendar=XKRX, **kw)


def error(path: Path, **kw) -> str:
    with pytest.raises(DataError) as e:
        check(path, **kw)
    return str(e.value)


GOOD = """AAA,2026-11-25,10,10
AAA,2026-11-26,11,11
BBB,2026-11-25,20,20
BBB,2026-11-26,21,21
"""


def test_good_file_round_trips():
    df, warnings = check(write("p.csv", GOOD))
    assert warnings == [] and len(df) == 4 and df["adj_close"].dtype == float
    assert list(df.columns) == ["ticker", "date", "close", "adj_close"]


def test_a_jump_is_a_suspicious_move():
    _, w = check(write("jump.csv", "AAA,2026-11-25,100,100\nAAA,2026-11-26,50,50\n"))
    assert w == ["jump.csv: suspicious move in adj_close (|log return| > 0.3365): AAA on "
                 "2026-11-26 (100 -> 50, x0.50); if it is a split, adj_close is not adjusted "
                 "for it"]


def test_a_close_jump_not_in_adj_close_is_an_unadjusted_split():
    _, w = check(write("split.csv", "AAA,2026-11-25,100,100\nAAA,2026-11-26,50,100.5\n"))
    assert w == ["split.csv: unadjusted split in close, not mirrored in adj_close: AAA on "
                 "2026-11-26 (close 100 -> 50, x0.50; adj_close x1.00); returns use adj_close, "
                 "so this is only noted"]


def test_a_one_day_spike():
    _, w = check(write("spike.csv", "AAA,2026-11-24,10,10\nAAA,2026-11-25,1000,1000\n"
                                    "AAA,2026-11-26,10.1,10.1\n"))
    assert w == ["spike.csv: one-day spike in adj_close (up and back, each |log return| > "
                 "0.3365): AAA on 2026-11-25 (10 -> 1000 -> 10.1); a bad print? correct it in "
                 "the source"]


def test_the_threshold_is_a_setting():
    _, w = check(write("jump.csv", "AAA,2026-11-25,100,100\nAAA,2026-11-26,50,50\n"),
                 max_abs_log_return=1.0)
    assert w == []


@pytest.mark.parametrize("value", ["inf", "-Infinity", "NaN", "nan"])
def test_inf_and_nan_are_rejected_with_the_line(value):
    p = write("inf.csv", f"AAA,2026-11-25,100,100\nAAA,2026-11-26,50,{value}\n")
    assert error(p) == ("inf.csv: adj_close is not finite (inf or NaN) on line(s) 3; leave a "
                        "price blank for a day without one")


def test_an_ambiguous_date_is_refused_and_an_explicit_format_reads_it():
    p = write("dmy.csv", "AAA,03/04/2026,100,100\nAAA,13/04/2026,100,100\n")
    assert error(p) == ("dmy.csv: date '03/04/2026' on line(s) 2, 3 is not an ISO date "
                        "(YYYY-MM-DD); a date like 03/04/2026 could be 3 April or 4 March, so "
                        "dualpath does not guess: convert the file, or give the format, e.g. "
                        "--date-format %d/%m/%Y")
    df, _ = check(p, date_format="%d/%m/%Y")
    assert list(df["date"].dt.date) == [date(2026, 4, 3), date(2026, 4, 13)]
    assert error(p, date_format="%m/%d/%Y") == ("dmy.csv: date '13/04/2026' on line(s) 3 does "
                                                "not match '%m/%d/%Y'")


def test_a_blank_price_is_a_halt_kept_missing():
    df, w = check(write("halt.csv", "AAA,2026-11-25,100,100\nAAA,2026-11-26,,\n"
                                    "AAA,2026-11-27,101,101\n"))
    assert w == ["halt.csv: blank adj_close on 1 row(s), read as no price that day (a halt?): "
                 "AAA 2026-11-26; those days stay missing, never zero"]
    assert list(df["date"].dt.date) == [date(2026, 11, 25), date(2026, 11, 27)]
    assert df.attrs["halts"] == [("AAA", date(2026, 11, 26))]


def test_a_stray_holiday_price_is_left_out():
    df, w = check(write("holiday.csv", "AAA,2026-12-30,100,100\nAAA,2027-01-01,100,100\n"
                                       "AAA,2027-01-04,101,101\nBBB,2027-01-04,50,50\n"))
    assert w == ["holiday.csv: 1 price row(s) on dates that are not XKRX sessions were left "
                 "out (a price there would shift the horizon calendar): AAA 2027-01-01 "
                 "(Friday, an exchange holiday)"]
    assert date(2027, 1, 1) not in set(df["date"].dt.date) and len(df) == 3


def test_gaps_are_judged_on_the_exchange_sessions():
    _, w = check(write("gap.csv", "AAA,2026-11-25,100,100\nAAA,2026-11-27,101,101\n"))
    assert w == ["gap.csv: gaps against XKRX sessions (missing days are missing returns, never "
                 "zero): AAA (1 day(s), e.g. 2026-11-26)"]


YAHOO = """Date,Open,High,Low,Close,Adj Close,Volume
2026-11-26,70100,71000,69900,70500,70100.5,1234567
2026-11-27,70500,72000,70400,71800,71390.2,2345678
"""


def test_an_unmapped_yahoo_export_says_how_to_map_it():
    p = Path("005930.KS.csv")
    p.write_text(YAHOO)
    assert error(p) == ("005930.KS.csv: missing column(s) ['ticker', 'adj_close']; need "
                        "['ticker', 'date', 'adj_close'] (and optionally close); the file has "
                        "['Date', 'Open', 'High', 'Low', 'Close', 'Adj Close', 'Volume']; map "
                        "them: --map \"'Adj Close'=adj_close\" and --ticker TICKER (a "
                        "one-ticker export)")
    raw = read_prices_file(p, parse_map("Date=date,'Adj Close'=adj_close"), ticker="005930")
    df, w = validate_prices(raw, ["005930"], p.name, calendar=XKRX)
    assert w == [] and list(df["ticker"]) == ["005930"] * 2
    assert list(df["adj_close"]) == [70100.5, 71390.2] and list(df["close"]) == [70500, 71800]


def test_map_mistakes():
    assert parse_map("Date=date, \"Adj Close\" = adj_close") == {"Date": "date",
                                                                 "Adj Close": "adj_close"}
    with pytest.raises(UserError, match=r"each item is FILE_COLUMN=TARGET"):
        parse_map("Date=day")
    p = Path("y.csv")
    p.write_text(YAHOO)
    with pytest.raises(DataError, match=r"y.csv: mapped column\(s\) \['Adj_Close'\] are not in "
                                        r"the file; its columns are \['Date', 'Open'"):
        read_prices_file(p, {"Adj_Close": "adj_close"}, ticker="X")
    with pytest.raises(DataError, match="has its own ticker column; leave out --ticker"):
        read_prices_file(write("p.csv", GOOD), ticker="X")


def test_parquet_written_by_duckdb_reads_like_the_csv():
    csv = write("p.csv", GOOD)
    duckdb.sql("COPY (SELECT ticker, CAST(date AS DATE) AS date, CAST(close AS DOUBLE) AS close,"
               " CAST(adj_close AS DOUBLE) AS adj_close FROM read_csv('p.csv')) "
               "TO 'p.parquet' (FORMAT parquet)")
    a, wa = check(csv)
    b, wb = check(Path("p.parquet"))
    pd.testing.assert_frame_equal(a, b)
    assert wa == wb == []


def test_inf_in_parquet_is_rejected_too():
    duckdb.sql("COPY (SELECT 'AAA' AS ticker, DATE '2026-11-26' AS date, "
               "'inf'::DOUBLE AS adj_close) TO 'inf.parquet' (FORMAT parquet)")
    assert error(Path("inf.parquet")) == ("inf.parquet: adj_close is not finite (inf or NaN) on "
                                          "row(s) 1; leave a price blank for a day without one")


@pytest.mark.parametrize("body,message", [
    (GOOD + "AAA,2026-11-26,11,12\n", "p.csv: 2 rows give different prices for the same "
                                      "ticker and date"),
    ("AAA,2026-11-25,10,0\n", "p.csv: adj_close must be > 0; line(s) 2 are not"),
    ("AAA,2026-11-25,-3,10\n", "p.csv: close must be > 0; line(s) 2 are not"),
    ("AAA,2026-11-25,10,\"71,000\"\n", "p.csv: adj_close '71,000' on line(s) 2 is not a number "
                                       "(write plain numbers like 71000.5, no currency; a "
                                       "file with thousands separators needs [market] "
                                       "thousands = ',' or --thousands ,)"),
    (",2026-11-25,10,10\n", "p.csv: empty ticker on line(s) 2"),
    ("AAA,2026-11-25 15:30:00,10,10\n", "p.csv: date '2026-11-25 15:30:00' on line(s) 2 "
                                        "carries a time of day; give one row per trading day "
                                        "(its date only)"),
])
def test_bad_prices_are_errors_with_lines(body, message):
    assert error(write("p.csv", body)).startswith(message)


def test_duplicates_and_unknown_tickers_are_warned():
    _, w = check(write("p.csv", GOOD + "AAA,2026-11-25,10,10\nZZZ,2026-11-25,5,5\n"))
    assert w == ["p.csv: dropped 1 exact duplicate row(s)",
                 "p.csv: 1 ticker(s) not in the universe, kept: ZZZ"]


def test_missing_file():
    with pytest.raises(DataError, match="price file none.csv does not exist"):
        read_prices_file(Path("none.csv"))


def test_typed_frames_still_validate_without_a_calendar():
    # flows/demo.py and flows/inputs.py pass the synthetic market's typed frame
    raw = pd.DataFrame({"ticker": ["AAA", "AAA"], "date": pd.to_datetime(["2027-01-04",
                                                                          "2027-01-05"]),
                        "close": [1.0, 1.1], "adj_close": [1.0, 1.1]})
    df, w = validate_prices(raw, ["AAA"], "synthetic market")
    assert w == [] and len(df) == 2


def _con():
    con = duckdb.connect()
    migrate(con)
    return con


def test_coverage_is_judged_on_the_warehouse_after_an_incremental_file():
    con = _con()
    settings = MarketSettings()
    first = import_file(con, write("full.csv", GOOD), settings, XKRX, ["AAA", "BBB"])
    assert (first.new, first.revised, first.coverage.ok) == (4, 0, True)
    r = import_file(con, write("inc.csv", "AAA,2026-11-27,11.5,11.5\n"), settings, XKRX,
                    ["AAA", "BBB"])
    assert (r.rows, r.new, r.warnings) == (1, 1, [])       # not "no prices for BBB"
    assert r.coverage.messages == [
        "stale prices for 2026-11-27: 1 of 2 ticker(s) have no price for the night's session: "
        "BBB (last 2026-11-26, 1 session(s) behind)",
        "the newest price day 2026-11-27 is partly filled: 1 ticker(s) against 2 on "
        "2026-11-26 (a file still arriving?)"]


def test_an_incremental_files_first_day_is_checked_against_the_warehouse():
    con = _con()
    import_file(con, write("full.csv", GOOD), MarketSettings(), XKRX, ["AAA", "BBB"])
    r = import_file(con, write("inc.csv", "AAA,2026-11-27,5.5,5.5\n"), MarketSettings(), XKRX,
                    ["AAA", "BBB"])
    assert r.warnings == ["inc.csv: suspicious move in adj_close (|log return| > 0.3365): AAA "
                          "on 2026-11-27 (11 -> 5.5, x0.50); if it is a split, adj_close is not "
                          "adjusted for it"]
    with pytest.raises(DataError, match=r"inc2.csv: --strict and 1 warning\(s\), nothing "
                                        r"imported:\n  - inc2.csv: suspicious move"):
        import_file(con, write("inc2.csv", "BBB,2026-11-27,5.5,5.5\n"), MarketSettings(), XKRX,
                    ["AAA", "BBB"], strict=True)
    assert len(load_prices(con)) == 5


def test_import_prices_keeps_its_signature():
    con = _con()
    df, _ = validate_prices(read_prices_file(write("p.csv", GOOD)), ["AAA", "BBB"], "p.csv")
    assert import_prices(con, df) == 4 and import_prices(con, df) == 4
    assert len(load_prices(con)) == 4


CONFIG = """[experiment]
universe = ["005930", "000660"]
[paths.p]
engine = "sim"
model = "m"
[warehouse]
path = "w.duckdb"
"""


def test_cli_import_maps_a_one_ticker_yahoo_export():
    Path("dualpath.toml").write_text(CONFIG)
    Path("y.csv").write_text(YAHOO)
    runner = CliRunner()
    bad = runner.invoke(app, ["prices", "import", "y.csv"])
    assert bad.exit_code != 0 and "--map \"'Adj Close'=adj_close\"" in str(bad.exception)
    ok = runner.invoke(app, ["prices", "import", "y.csv", "--map", "'Adj Close'=adj_close",
                             "--ticker", "005930"])
    assert ok.exit_code == 0, ok.output
    assert "imported 2 price rows for 1 tickers (2026-11-26 .. 2026-11-27): 2 new, 0 revised" \
        in ok.output
    assert "no prices at all on or before 2026-11-27 for 1 of 2 ticker(s): 000660" in ok.output


CP949_FIX = ("price file hts.csv is not UTF-8 text (bad byte at offset 0); Korean Excel/HTS "
             "exports are often CP949: set [market] encoding = 'cp949' (or --encoding cp949), "
             "save it as 'CSV UTF-8' or convert it (iconv -f cp949 -t utf-8)")


def test_a_cp949_export_is_named_not_garbled_and_read_on_for_its_other_problems():
    Path("hts.csv").write_bytes("종목코드,일자,종가\n005930,2026-11-27,72300\n".encode("cp949"))
    assert error(Path("hts.csv")) == (
        "hts.csv: 2 problems, nothing imported; fix them all, then import again:\n"
        f"  - {CP949_FIX}\n"
        "  - missing column(s) ['ticker', 'date', 'adj_close']; need ['ticker', 'date', "
        "'adj_close'] (and optionally close); the file has ['종목코드', '일자', '종가']; map "
        "them: --map \"종목코드=ticker,일자=date,종가=adj_close\" (only if 종가 is adjusted for "
        "splits and dividends)")
    Path("hts.csv").write_bytes("ticker,date,adj_close\n005930,2026-11-27,72300\n"
                                "005930,2026-11-26,한국\n".encode("cp949"))
    assert error(Path("hts.csv")) == (
        "hts.csv: 2 problems, nothing imported; fix them all, then import again:\n"
        f"  - {CP949_FIX.replace('offset 0', 'offset 64')}\n"
        "  - adj_close '한국' on line(s) 3 is not a number (write plain numbers like 71000.5, "
        "no currency; a file with thousands separators needs [market] thousands = ',' or "
        "--thousands ,)")


def test_every_problem_of_an_hts_export_is_named_at_once_with_its_fix():
    """CP949, Korean headers (an adjusted close with its unit), dotted dates, thousands
    separators and two rows of one day that disagree: one error names them all."""
    Path("hts.csv").write_bytes('종목코드,일자,종가,수정종가(원)\n005930,2026.11.26,"72,000",'
                                '"71,000"\n005930,2026.11.27,"72,300","71,300"\n'
                                '005930,2026.11.27,"72,300","71,900"\n'.encode("cp949"))
    assert error(Path("hts.csv"), universe=["005930"]) == (
        "hts.csv: 5 problems, nothing imported; fix them all, then import again:\n"
        f"  - {CP949_FIX}\n"
        "  - missing column(s) ['ticker', 'date', 'adj_close']; need ['ticker', 'date', "
        "'adj_close'] (and optionally close); the file has ['종목코드', '일자', '종가', "
        "'수정종가(원)']; map them: --map \"종목코드=ticker,일자=date,수정종가(원)=adj_close\"\n"
        "  - date '2026.11.26' on line(s) 2, 3, 4 is not an ISO date (YYYY-MM-DD); every date "
        "of the file reads as --date-format %Y.%m.%d (or [market] date_format = '%Y.%m.%d')\n"
        "  - adj_close '71,000' on line(s) 2, 3, 4 is not a number (write plain numbers like "
        "71000.5, no currency; a file with thousands separators needs [market] thousands = ',' "
        "or --thousands ,)\n"
        "  - 2 rows give different prices for the same ticker and date, e.g.\n"
        "ticker       date  close adj_close\n"
        "005930 2026.11.27    NaN    71,300\n"
        "005930 2026.11.27    NaN    71,900")
    # every fix the error gave, at once: the one problem left is the file's own conflict
    raw = read_prices_file(Path("hts.csv"), parse_map("종목코드=ticker,일자=date,"
                                                     "수정종가(원)=adj_close"), encoding="cp949")
    with pytest.raises(DataError) as e:
        validate_prices(raw, ["005930"], "hts.csv", date_format="%Y.%m.%d", thousands=",")
    assert str(e.value) == ("hts.csv: 2 rows give different prices for the same ticker and "
                            "date, e.g.\nticker       date  close  adj_close\n"
                            "005930 2026-11-27    NaN    71300.0\n"
                            "005930 2026-11-27    NaN    71900.0")


def test_a_header_not_found_names_the_closest_ones():
    p = Path("y.csv")
    p.write_text("Dt,Adj_Clse\n2026-11-27,5\n")
    assert error(p, universe=["Y"]) == (
        "y.csv: missing column(s) ['ticker', 'date', 'adj_close']; need ['ticker', 'date', "
        "'adj_close'] (and optionally close); the file has ['Dt', 'Adj_Clse']; map them: "
        "--ticker TICKER (a one-ticker export) (closest to date: Dt; closest to adj_close: "
        "Adj_Clse)")


def test_prices_import_reads_a_cp949_file_with_thousands_separators(tmp_path):
    Path("hts.csv").write_bytes('종목코드,일자,수정종가\n005930,2026-11-27,"72,300"\n'
                                .encode("cp949"))
    p = read_prices_file(Path("hts.csv"), {"종목코드": "ticker", "일자": "date",
                                           "수정종가": "adj_close"}, encoding="cp949")
    frame, _ = validate_prices(p, thousands=",")
    assert frame[["ticker", "adj_close"]].values.tolist() == [["005930", 72300.0]]
    with pytest.raises(DataError, match="not a known codec"):
        read_prices_file(Path("hts.csv"), encoding="klingon")


def test_korean_headers_get_a_map_and_a_caveat_for_an_unadjusted_close():
    p = Path("krx.csv")
    p.write_text("종목코드,일자,종가\n005930,2026-11-27,72300\n")
    assert error(p) == ("krx.csv: missing column(s) ['ticker', 'date', 'adj_close']; need "
                        "['ticker', 'date', 'adj_close'] (and optionally close); the file has "
                        "['종목코드', '일자', '종가']; map them: --map \"종목코드=ticker,일자=date,"
                        "종가=adj_close\" (only if 종가 is adjusted for splits and dividends)")
    raw = read_prices_file(p, parse_map("종목코드=ticker,일자=date,종가=adj_close"))
    assert validate_prices(raw, ["005930"], "krx.csv", calendar=XKRX)[0]["adj_close"].tolist() \
        == [72300]


def test_empty_and_header_only_files():
    Path("z.csv").write_text("")
    assert error(Path("z.csv")) == ("price file z.csv is empty; it needs a header line and "
                                    "price rows")
    df, w = check(write("h.csv", ""))
    assert df.empty and w == ["h.csv: no price rows (only a header)"]


def test_the_configs_column_map_is_skipped_for_a_file_without_those_headers():
    con = _con()
    settings = MarketSettings(columns={"Adj Close": "adj_close"})
    assert import_file(con, write("p.csv", GOOD), settings, XKRX, ["AAA", "BBB"]).new == 4


def test_a_cp949_hts_export_imports_in_one_attempt_from_the_docs():
    """The documentation's command for a Korean HTS export (docs/operations.md), word for
    word (its file and ticker), on a CP949 file with thousands separators and both closes:
    one attempt, imported."""
    import re
    import shlex

    page = (Path(__file__).parents[1] / "docs" / "operations.md").read_text()
    block = re.search(r"```sh\n(dualpath prices import 삼성전자\.csv[^`]*)```", page).group(1)
    argv = shlex.split(block.replace("\\\n", " "))[1:]
    Path("dualpath.toml").write_text(CONFIG)
    Path("삼성전자.csv").write_bytes('일자,시가,종가,수정종가,거래량\n2026-11-26,"71,500","72,000",'
                                  '"71,000","12,345,678"\n2026-11-27,"72,000","72,300","71,300",'
                                  '"9,876,543"\n'.encode("cp949"))
    ok = CliRunner().invoke(app, argv)
    assert ok.exit_code == 0, ok.output
    assert "imported 2 price rows for 1 tickers (2026-11-26 .. 2026-11-27): 2 new" in ok.output
    with duckdb.connect("w.duckdb", read_only=True) as con:
        assert con.execute("SELECT adj_close, close FROM prices ORDER BY date").fetchall() == [
            (71000.0, 72000.0), (71300.0, 72300.0)]


def test_an_adjusted_close_header_is_mapped_first():
    p = Path("krx.csv")
    p.write_text("일자,종가,수정종가\n2026-11-27,72300,71300\n")
    assert "map them: --map \"일자=date,수정종가=adj_close\"" in error(p)
    p.write_text("Date,Close,Adj. Close (KRW)\n2026-11-27,72300,71300\n")
    assert "map them: --map \"'Adj. Close (KRW)'=adj_close\"" in error(p)
