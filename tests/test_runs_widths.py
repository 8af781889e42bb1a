"""`dualpath runs` read at 100 and 120 columns, whole, on the seeded warehouse with a starved
night and a partial one: nights never cut, a starved run's reason in a few words (in full under
--wide), the seconds' bases beneath. Lines are compared without rich's trailing padding."""

from __future__ import annotations

import pytest

from tests.test_glance import dualpath
from tests.test_starved import _seeded_with_a_starved_night

RUNS_100 = "runs (only 'complete' runs are results; seconds real-scale, complete one-segment runs only)\nnight       path    status    units  graded  unparsed  failed  runaway  s/ticker  s/unit  why\n2027-04-29  backup  complete     16      16         0       0        0       345     690\n2027-04-29  main    complete     16      16         0       0        0        60     240\n2027-04-30  backup  complete     16      16         0       0        0       347     694\n2027-04-30  main    complete     16      16         0       0        0        61     244\n2027-05-03  backup  complete     16      16         0       0        0       349     698\n2027-05-03  main    complete     16      16         0       0        0        62     248\n2027-05-04  backup  complete     16      16         0       0        0     1,053   2,106  starved,\n                                                                                          busy 32%\n2027-05-04  main    complete     16      16         0       0        0        60     240\n2027-05-05  backup  complete     16      16         0       0        0       345     690\n2027-05-05  main    complete     16      16         0       0        0        61     244\n2027-05-06  backup  complete     16      16         0       0        0       347     694\n2027-05-06  main    complete     16      16         0       0        0        62     248\n2027-05-07  backup  complete     16      16         0       0        1       349     698\n2027-05-07  main    complete     16      16         0       0        1        60     240\n2027-05-10  backup  complete     16      16         0       0        2       351     702\n2027-05-10  main    complete     16      16         0       0        2        61     244\n2027-05-12  backup  complete     16      16         0       0        2       345     690\n2027-05-12  main    complete     16      16         0       0        2        62     248\n2027-05-13  backup  partial      16       8         0       0        0         —       —  8 of 16\n                                                                                          units\n                                                                                          measured\n2027-05-13  main    complete     16      16         0       0        2        60     240\n  s/ticker: throughput basis (run wall clock ÷ tickers); s/unit: slot-latency basis (one\n    ticker-draw's first call to last call); real-scale, complete one-segment runs only\n  unparsed: measured, but the answer held no readable grade\n  why: what keeps a run out of the results (not complete) or out of the speed medians (disturbed),\n    in short; `dualpath runs --wide` gives it in full\n"

RUNS_120 = "runs (only 'complete' runs are results; seconds real-scale, complete one-segment runs only)\nnight       path    status    units  graded  unparsed  failed  runaway  s/ticker  s/unit  why\n2027-04-29  backup  complete     16      16         0       0        0       345     690\n2027-04-29  main    complete     16      16         0       0        0        60     240\n2027-04-30  backup  complete     16      16         0       0        0       347     694\n2027-04-30  main    complete     16      16         0       0        0        61     244\n2027-05-03  backup  complete     16      16         0       0        0       349     698\n2027-05-03  main    complete     16      16         0       0        0        62     248\n2027-05-04  backup  complete     16      16         0       0        0     1,053   2,106  starved, busy 32%\n2027-05-04  main    complete     16      16         0       0        0        60     240\n2027-05-05  backup  complete     16      16         0       0        0       345     690\n2027-05-05  main    complete     16      16         0       0        0        61     244\n2027-05-06  backup  complete     16      16         0       0        0       347     694\n2027-05-06  main    complete     16      16         0       0        0        62     248\n2027-05-07  backup  complete     16      16         0       0        1       349     698\n2027-05-07  main    complete     16      16         0       0        1        60     240\n2027-05-10  backup  complete     16      16         0       0        2       351     702\n2027-05-10  main    complete     16      16         0       0        2        61     244\n2027-05-12  backup  complete     16      16         0       0        2       345     690\n2027-05-12  main    complete     16      16         0       0        2        62     248\n2027-05-13  backup  partial      16       8         0       0        0         —       —  8 of 16 units measured\n2027-05-13  main    complete     16      16         0       0        2        60     240\n  s/ticker: throughput basis (run wall clock ÷ tickers); s/unit: slot-latency basis (one ticker-draw's first call to\n    last call); real-scale, complete one-segment runs only\n  unparsed: measured, but the answer held no readable grade\n  why: what keeps a run out of the results (not complete) or out of the speed medians (disturbed), in short; `dualpath\n    runs --wide` gives it in full\n"


@pytest.fixture(scope="module")
def starved(tmp_path_factory):
    return str(_seeded_with_a_starved_night(tmp_path_factory.mktemp("starved")))


@pytest.mark.parametrize("columns, expected", [(100, RUNS_100), (120, RUNS_120)])
def test_runs_fits_its_width_whole(starved, columns, expected):
    out = dualpath("runs", "-c", starved, columns=columns).stdout
    assert "\n".join(ln.rstrip() for ln in out.splitlines()) + "\n" == expected
    assert max(map(len, expected.splitlines())) <= columns


def test_runs_wide_gives_the_reason_in_full(starved):
    assert "starved: slots" in dualpath("runs", "-c", starved, "--wide", columns=320).stdout
    assert ("starved: slots busy 32% of the time units waited to start, while dualpath kept "
            "them full — the harness's machine, not the server, set the pace"
            ) in dualpath("runs", "-c", starved, "-f", "csv").stdout
