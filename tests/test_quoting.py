"""What reaches SQL as text is quoted by one helper (`warehouse.quoting`): a folder or file
whose path holds a quote, and a price file whose column names hold quotes, work."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from typer.testing import CliRunner

from dualpath.cli import app
from tests.helpers import make_project
from dualpath.warehouse.prices import read_prices_file
from dualpath.warehouse.quoting import ident, literal


def test_quotes_are_doubled_inside_their_own_kind():
    assert ident('adj "close"') == '"adj ""close"""'          # " doubled, wrapped in "
    assert literal("/tmp/it's") == "'/tmp/it''s'"              # ' doubled, wrapped in '
    assert literal('/tmp/say "x"') == "'/tmp/say \"x\"'"       # " needs nothing in a literal
    name, text = 'a"b', "'''"
    with duckdb.connect() as con:         # DuckDB reads them back as written
        got = con.execute(f"SELECT {literal(text)} AS {ident(name)}").df().to_dict()
    assert got == {name: {0: text}}


@pytest.mark.parametrize("folder", ["it's", 'say "x"', "two words"])
def test_export_into_a_folder_whose_name_holds_quotes_or_spaces(tmp_path, folder):
    cfg_path = make_project(tmp_path, tickers=2, draws=1, nights=1)[0]
    out = tmp_path / folder
    r = CliRunner().invoke(app, ["export", "-c", str(cfg_path), "--out", str(out), "-f", "csv"])
    assert r.exit_code == 0, r.output
    assert (out / "prices.csv").read_text().startswith("ticker,")
    r = CliRunner().invoke(app, ["export", "-c", str(cfg_path), "--out", str(out)])
    assert r.exit_code == 0, r.output
    with duckdb.connect() as con:
        assert con.execute("SELECT count(*) FROM read_parquet(?)",
                           [str(out / "prices.parquet")]).fetchone()[0] > 0


def test_a_parquet_price_file_whose_column_names_hold_quotes_imports(tmp_path):
    frame = pd.DataFrame({"ticker": ["AAA", "AAA"], "date": ["2026-11-25", "2026-11-26"],
                          'adj "close"': [10.0, 11.0], "it's close": [10.0, 11.0]})
    path = tmp_path / "it's prices.parquet"
    with duckdb.connect() as con:
        con.register("frame", frame)
        con.execute(f"COPY frame TO {literal(path)} (FORMAT parquet)")
    got = read_prices_file(path, {'adj "close"': "adj_close", "it's close": "close"})
    assert list(got["adj_close"]) == ["10.0", "11.0"] and list(got["close"]) == ["10.0", "11.0"]
