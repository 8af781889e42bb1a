"""`dualpath metrics` read at 100 and 120 columns, whole, on the seeded warehouse: no header
or cell cut ('horiz…', 'non-i…' at 100 before), every line within the width, a column that
cannot fit beneath its row, footnotes and notes under their own indent. The expected text is
in tests/data/metrics_{100,120}.txt (read line by line when it was written)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dualpath.cli.metrics_table import layout, widths
from tests.cli_run import run_cli
from tests.seeded import seed_warehouse

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    return str(seed_warehouse(tmp_path_factory.mktemp("seeded"))[0])


@pytest.mark.parametrize("columns", [100, 120])
def test_metrics_fits_its_width_whole(seeded, columns):
    r = run_cli("metrics", "-c", seeded, columns=columns)
    assert r.returncode == 0, r.stderr
    expected = (DATA / f"metrics_{columns}.txt").read_text()
    assert r.stdout == expected
    assert max(map(len, expected.splitlines())) <= columns
    assert "…" not in expected                       # nothing cut
    assert not any(ln[:1].islower() and not ln.startswith(("path", "horizon", "baseline",
                                                           "backup", "main", "note:"))
                   for ln in expected.splitlines())  # no footnote back at column 0


def test_at_100_columns_the_note_goes_beneath_its_row():
    out = (DATA / "metrics_100.txt").read_text().splitlines()
    row = next(i for i, ln in enumerate(out) if ln.lstrip().startswith("5  primary"))
    assert out[row + 1].strip() == "nights"                # verdict wrapped between words
    assert out[row + 2] == "  note: insufficient nights (n=9, need 16)"


def test_widths_are_natural_when_they_fit_and_never_below_the_longest_word():
    # natural 6 + 13 = 19 plus a gap of 2 fits 21; at 15 each keeps its longest word
    # ('mean_' / 'ic' break after the underscore: 5; 'insufficient': 12) and the 1 left over
    # goes to the column that lacks least
    assert widths([6, 13], [5, 12], 21) == [6, 13]
    assert widths([6, 19], [5, 12], 20) == [6, 12]
    # mean_ic: natural 7, least 5; note: natural 19, least 12; 20 - 2 = 18 of room, 17 taken,
    # the 1 left to mean_ic (lacks 2, note lacks 7): 6 columns, so its header breaks
    frame = pd.DataFrame({"mean_ic": [0.05], "note": ["insufficient nights"]})
    lines = layout(frame, [["0.050", "insufficient nights"]], 20)
    assert lines == [" mean_  note", "    ic", "──────  ────────────", " 0.050  insufficient",
                     "        nights"]


@pytest.mark.parametrize("columns", [100, 120])
def test_metrics_wide_is_plain_and_fits_its_width_whole(seeded, columns):
    """--wide drew rich's boxes (600 columns wide for the comparison); now the plain layout,
    and a table whose numbers cannot sit side by side prints one record per row."""
    r = run_cli("metrics", "-c", seeded, "--wide", columns=columns)
    assert r.returncode == 0, r.stderr
    expected = (DATA / f"metrics_wide_{columns}.txt").read_text()
    assert r.stdout == expected
    assert max(map(len, expected.splitlines())) <= columns
    assert not set("┏┃│┡└━") & set(expected) and "…" not in expected
    assert "── row 1 of 3 " in expected                    # the comparison, as records


@pytest.mark.parametrize("columns", [100, 120])
def test_prereg_draft_sizing_table_is_plain_at_its_width(seeded, tmp_path, columns):
    r = run_cli("prereg", "draft", str(tmp_path / "p.toml"), "-c", seeded, "--nights", "25",
                "--first-night", "2027-03-01", columns=columns)
    assert r.returncode == 0, r.stderr
    table = r.stdout[:r.stdout.index("noise:")]
    assert table == (DATA / f"prereg_sizing_{columns}.txt").read_text()
    assert max(map(len, table.splitlines())) <= columns and not set("┏┃│┡└━") & set(table)
