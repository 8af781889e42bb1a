import pandas as pd
import pytest

from dualpath.errors import DataError
from warehouse.prices import read_prices_file, validate_prices


def frame(rows):
    return pd.DataFrame(rows, columns=["ticker", "date", "close", "adj_close"]).astype(str)


GOOD = [["AAA", "2027-01-04", "10", "10"], ["AAA", "2027-01-05", "11", "11"],
        ["BBB", "2027-01-04", "20", "20"], ["BBB", "2027-01-05", "21", "21"]]


def test_good_file_round_trips(tmp_path):
    frame(GOOD).to_csv(tmp_path / "p.csv", index=False)
    df, warnings = validate_prices(read_prices_file(tmp_path / "p.csv"), ["AAA", "BBB"])
    assert warnings == [] and len(df) == 4 and df["adj_close"].dtype == float


@pytest.mark.parametrize("rows,needle", [
    (GOOD + [["AAA", "2027-01-05", "11", "12"]], "different prices for the same ticker and date"),
    (GOOD[:3] + [["BBB", "2027-01-05", "21", "0"]], "adj_close must be > 0; row(s) 5"),
    (GOOD[:3] + [["BBB", "2027-01-05", "21", "-3"]], "must be > 0"),
    (GOOD[:3] + [["BBB", "05/01/2027x", "21", "21"]], "unreadable date on row(s) 5"),
    (GOOD[:3] + [["BBB", "2027-01-05", "21", "abc"]], "not a number"),
])
def test_bad_prices_are_errors_with_row_numbers(rows, needle):
    with pytest.raises(DataError) as e:
        validate_prices(frame(rows), ["AAA", "BBB"])
    assert needle in str(e.value)


def test_missing_column():
    with pytest.raises(DataError, match=r"missing column\(s\) \['adj_close'\]"):
        validate_prices(frame(GOOD).drop(columns=["adj_close"]))


def test_warnings_are_never_silent():
    rows = GOOD + [GOOD[0]] + [["ZZZ", "2027-01-04", "5", "5"]] + [["AAA", "2027-01-06", "1", "1"]]
    rows += [["BBB", "2027-01-07", "1", "1"]]   # BBB lacks 2027-01-06 that the calendar has
    df, warnings = validate_prices(frame(rows), ["AAA", "BBB", "CCC"])
    text = "\n".join(warnings)
    assert "dropped 1 exact duplicate" in text
    assert "not in the universe" in text and "ZZZ" in text
    assert "no prices for 1 universe ticker" in text and "CCC" in text
    assert "gaps" in text and "BBB (1 day(s))" in text
    assert len(df) == len(rows) - 1


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_prices_file(tmp_path / "none.csv")
