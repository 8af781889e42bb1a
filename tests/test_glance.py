"""Whole outputs on a small seeded warehouse (simonw/llm's way: `assert output == expected`).

The seeded warehouse (`tests.seeded`) fixes every number, so the headline, the tables and the
report's Markdown are compared whole; a renamed or dropped column fails here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli_run import run_cli
from tests.seeded import seed_warehouse

# Each question's first line: its answer and the label's word, within 100 columns; why the
# label is what it is, once (under the first question); the interchangeability limit's
# provenance on the limit's own line. RankIC's "false reassurance: unknown (2 non-overlapping
# nights, needs 4)" is not printed: its "insufficient nights" says the same. The details
# (`evals.wrap.Detail`) are in HEADLINE_FULL: `--verbose` and the report.
HEADLINE = """\
Quality — are backup's grades interchangeable with main's?  insufficient tickers  [exploratory]
  exploratory: no frozen plan
  disagreement backup–main ÷ main–main draws 0.99 (no interval); 8 tickers, 10 nights
  backup keeps 101% of main's draw-to-draw rank agreement (limit 50% by default, not preregistered)
  before it can decide: insufficient tickers (n=8, need 20)
RankIC — is backup's signal as good as main's?  insufficient nights  [exploratory]
  ΔIC = IC(backup) − IC(main) at h=5: not estimated yet; margin δ = 0.030
  before it can decide: insufficient nights (n=9, need 16)
Speed — how much slower is backup?  5.7× slower than main (95% CI 5.6×–5.8×, 9 paired nights)
  throughput basis (run wall clock ÷ tickers): backup 347 s/ticker, main 61 s/ticker (medians)
  a night of 8 tickers × 2 draws (this experiment's): backup 46 min, main 8 min
  projected to 100 tickers × 2 draws: backup 9.6 h, main 1.7 h
Energy — how much energy per ticker?  backup 2.08× main (95% CI 2.06×–2.11×, 9 paired nights)
  board energy, scoring only, idle floor included: backup 65.9 kJ, main 31.7 kJ per ticker (medians)
  a night of 100 tickers × 2 draws: backup 1.83 kWh, main 0.88 kWh
  idle floor: backup 30 W, main 70 W; above it: backup 55.5 kJ/ticker, main 27.4 kJ/ticker
  measured: backup by the GPU's energy counter; main by the GPU's energy counter
"""

DETAILS = """\
  apart: shift +0.10 grade, spread ×1.03 (not disagreement); ticker × path -0.015
  draws without a grade (counted, never imputed): backup 0, main 0
"""
_AT = "  before it can decide: insufficient tickers"
HEADLINE_FULL = HEADLINE.replace(_AT, DETAILS + _AT, 1)

RUNS = """\
runs (only 'complete' runs are results; seconds real-scale, complete one-segment runs only)                     
night       path    status    units  graded  unparsed  failed  runaway  s/ticker  s/unit  why                   
2027-04-29  backup  complete     16      16         0       0        0       345     690                        
2027-04-29  main    complete     16      16         0       0        0        60     240                        
2027-04-30  backup  complete     16      16         0       0        0       347     694                        
2027-04-30  main    complete     16      16         0       0        0        61     244                        
2027-05-03  backup  complete     16      16         0       0        0       349     698                        
2027-05-03  main    complete     16      16         0       0        0        62     248                        
2027-05-04  backup  complete     16      16         0       0        0       351     702                        
2027-05-04  main    complete     16      16         0       0        0        60     240                        
2027-05-05  backup  complete     16      16         0       0        0       345     690                        
2027-05-05  main    complete     16      16         0       0        0        61     244                        
2027-05-06  backup  complete     16      16         0       0        0       347     694                        
2027-05-06  main    complete     16      16         0       0        0        62     248                        
2027-05-07  backup  complete     16      16         0       0        1       349     698                        
2027-05-07  main    complete     16      16         0       0        1        60     240                        
2027-05-10  backup  complete     16      16         0       0        2       351     702                        
2027-05-10  main    complete     16      16         0       0        2        61     244                        
2027-05-12  backup  complete     16      16         0       0        2       345     690                        
2027-05-12  main    complete     16      16         0       0        2        62     248                        
2027-05-13  backup  partial      16       8         0       0        0         —       —  8 of 16 units measured
2027-05-13  main    complete     16      16         0       0        2        60     240                        
  s/ticker: throughput basis (run wall clock ÷ tickers); s/unit: slot-latency basis (one ticker-draw's first call to last call); real-scale, complete
    one-segment runs only
  unparsed: measured, but the answer held no readable grade
  why: what keeps a run out of the results (not complete) or out of the speed medians (disturbed), in short; `dualpath runs --wide` gives it in full
"""

SPEED_TABLE = """\
Speed per path, median over complete one-segment undisturbed runs (real-scale; s/ticker labelled by basis)
path    runs  not_complete_excluded  resumed_excluded  disturbed_excluded  throughput_s_per_ticker  throughput_s_per_unit     slot_latency_s_per_  runaway_share
                                                                                                                                             unit
──────  ────  ─────────────────────  ────────────────  ──────────────────  ───────────────────────  ─────────────────────  ──────────────────────  ─────────────
backup     9                      1                 0                   0                      347                  173.5                     694          0.000
main      10                      0                 0                   0                       61                   30.5                     244          0.000
  throughput_s_per_ticker: s/ticker, throughput basis: run wall clock ÷ tickers (all draws of a ticker)
  throughput_s_per_unit: s/unit, throughput basis: run wall clock ÷ units (one ticker × one draw: the basis of a single-pass replay)
  slot_latency_s_per_unit: s/unit, slot-latency basis: one ticker-draw's first call start to last call end (≈ throughput per unit × slots)
  not_complete_excluded: runs left out: partial, failed or contaminated
  resumed_excluded: complete runs left out: resumed, so no trustworthy clock
  disturbed_excluded: complete runs left out: the server restarted, stalled or served someone else too, or the harness starved it
  runaway_share: share of calls that stopped at max_tokens
"""

SPEED_CSV = """\
# speed
path,runs,not_complete_excluded,resumed_excluded,disturbed_excluded,throughput_s_per_ticker,throughput_s_per_unit,slot_latency_s_per_unit,calls_per_unit,prompt_tokens_per_unit,completion_tokens_per_unit,per_call_prefill_tps,per_call_decode_tps,client_prompt_tps,client_decode_tps,client_stream_decode_tps,runaway_share,runaway_time_share,runaway_s,retries,cached_prompt_share
backup,9,1,0,0,347.0,173.5,694.0,2.0,8000.0,1000.0,17.29106628242075,2.881844380403458,46.10951008645533,5.763688760806916,1.9212295869356388,0.0,0.0,0.0,0.0,0.25
main,10,0,0,0,61.0,30.5,244.0,2.0,8000.0,1000.0,49.18032786885246,8.196721311475411,262.2950819672131,32.78688524590164,5.464480874316938,0.0,0.0,0.0,0.0,0.25
"""


@pytest.fixture
def seeded(tmp_path):
    cfg_path, cfg, nights = seed_warehouse(tmp_path)
    return cfg_path


def dualpath(*args, columns: int | None = None):
    r = run_cli(*args, columns=columns)          # in process: the same output, no spawn
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_metrics_opens_with_the_headline_whole_at_100_columns(seeded):
    out = dualpath("metrics", "-c", str(seeded), columns=100).stdout
    assert out.startswith(HEADLINE + "\n")
    assert all(len(line) <= 100 for line in HEADLINE_FULL.splitlines())
    verbose = dualpath("metrics", "-c", str(seeded), "--verbose", columns=100).stdout
    assert verbose.startswith(HEADLINE_FULL + "\n")


UNPAIRED_SPEED = """\
Speed — how much slower is backup?  unknown: no night with a complete one-segment run on both paths
  (backup's 4 such run(s) and main's 5 are on different nights: the medians below are not a ratio)
  throughput basis (run wall clock ÷ tickers): backup 349 s/ticker, main 61 s/ticker (medians)
  a night of 8 tickers × 2 draws (this experiment's): backup 47 min, main 8 min
  projected to 100 tickers × 2 draws: backup 9.7 h, main 1.7 h
Energy — how much energy per ticker?  unknown ratio: no night with both paths' energy
  board energy, scoring only, idle floor included: backup 66.3 kJ, main 31.7 kJ per ticker (medians)
  a night of 100 tickers × 2 draws: backup 1.84 kWh, main 0.88 kWh
  idle floor: backup 30 W, main 70 W; above it: backup 55.8 kJ/ticker, main 27.4 kJ/ticker
  measured: backup by the GPU's energy counter; main by the GPU's energy counter

"""


def test_a_slowdown_without_a_paired_night_is_unknown_not_a_ratio_of_medians(tmp_path):
    """The trial's `demo --nights 6 --tickers 10` printed `5.6× slower than main (no interval:
    0 paired night(s))`: the quotient of two medians from different nights. Here backup's
    results are on nights 1, 3, 5, 7 (347, 351, 347, 351: 349) and main's on 0, 2, 4, 6, 8
    (60, 62, 61, 60, 62: 61), the other runs resumed: 349 / 61 = 5.7 would be that figure."""
    from dualpath.warehouse.db import writer

    cfg_path, cfg, nights = seed_warehouse(tmp_path)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        for i, night in enumerate(nights):
            con.execute("UPDATE runs SET segments = 2 WHERE run_id = ?",
                        [f"demo/{night}/{'backup' if i % 2 == 0 else 'main'}"])
    out = dualpath("metrics", "-c", str(cfg_path), columns=100).stdout
    head = out[:out.index("\n\n") + 2]
    assert head[head.index("Speed"):] == UNPAIRED_SPEED
    assert "×" not in UNPAIRED_SPEED.split("\n")[0]
    assert all(len(line) <= 100 for line in UNPAIRED_SPEED.splitlines())
    doc = json.loads(dualpath("metrics", "-c", str(cfg_path), "-f", "json").stdout)
    speed = doc["tables"]["headline"][2]
    assert speed["question"] == "speed"
    assert speed["answer"] == ("unknown: no night with a complete one-segment run on both "
                               "paths")
    assert speed["estimate"] is None and speed["detail"] == "0 paired nights"
    assert doc["result"]["speed"]["ratio"] is None
    assert doc["result"]["speed"]["medians"] == {"backup": 349.0, "main": 61.0}


def test_a_night_of_the_study_size_is_one_line_and_an_unrecorded_size_says_so():
    """The projection's 100 is the nightly study's size (`TICKERS`): an experiment of that
    size gets one line; runs without a ticker count say the night is a projection."""
    from dualpath.evals.headline import Slowdown, night_lines

    s = Slowdown("main", "backup", "throughput", "", 5.7, 5.6, 5.8, 0.95, 9, 61.0, 347.0, 2,
                 {"backup": 347 * 100 / 3600, "main": 61 * 100 / 3600}, 100, 100,
                 {"backup": 347 * 100 / 3600, "main": 61 * 100 / 3600})
    assert night_lines(s) == ["  a night of 100 tickers × 2 draws: backup 9.6 h, main 1.7 h"]
    from dataclasses import replace

    assert night_lines(replace(s, own_tickers=None, own_hours_at={})) == [
        "  a night of 100 tickers × 2 draws (projected; the runs do not record their ticker "
        "count): backup 9.6 h, main 1.7 h"]


def test_metrics_speed_table_shows_both_bases_and_the_excluded_runs(seeded):
    out = dualpath("metrics", "-c", str(seeded)).stdout
    start = out.rindex("\n", 0, out.index("Speed per path")) + 1
    assert out[start:start + len(SPEED_TABLE)] == SPEED_TABLE


def test_metrics_csv_carries_every_speed_column(seeded):
    out = dualpath("metrics", "-c", str(seeded), "-f", "csv").stdout
    assert out[out.index("# speed"):out.index("# serving")] == SPEED_CSV


def test_metrics_json_is_one_document_with_the_headline(seeded):
    doc = json.loads(dualpath("metrics", "-c", str(seeded), "-f", "json").stdout)
    assert doc["headline"] == HEADLINE_FULL.splitlines()
    assert [r["question"] for r in doc["tables"]["headline"]] == [
        "interchangeability", "rankic", "speed", "energy"]
    assert list(doc["tables"]) == ["headline", "comparison", "rank_ic", "cross_path",
                                   "self_agreement", "draws", "signal_shape", "by_grade",
                                   "grades", "speed", "serving"]
    speed = {r["path"]: r for r in doc["tables"]["speed"]}
    assert speed["backup"]["not_complete_excluded"] == 1
    assert speed["backup"]["slot_latency_s_per_unit"] == 694.0
    assert doc["tables"]["headline"][2]["estimate"] == pytest.approx(5.69, abs=0.01)
    assert doc["result"]["speed"]["ratio"] == pytest.approx(doc["tables"]["headline"][2]["estimate"])


def test_runs_table_whole(seeded):
    assert dualpath("runs", "-c", str(seeded)).stdout == RUNS


def test_runs_table_counts_the_units_measured_without_a_grade(seeded):
    """graded + parse_failed + failed add up to units_planned: two units of a night whose
    answers held no readable grade are counted where a reader looks, not only in -f json."""
    from dualpath.config import load_config
    from dualpath.warehouse.db import writer

    cfg = load_config(seeded)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("UPDATE units SET outcome = 'parse_failed', grade = NULL "
                    "WHERE run_id = 'demo/2027-04-30/backup' AND draw = 2 AND ticker IN "
                    f"({', '.join(repr(t) for t in cfg.tickers()[:2])})")
    row = "2027-04-30  backup  complete     16      {}         {}       0"
    assert row.format(16, 0) in RUNS
    assert dualpath("runs", "-c", str(seeded)).stdout == RUNS.replace(row.format(16, 0),
                                                                     row.format(14, 2))


def test_runs_evidence_json_is_one_valid_document(seeded):
    out = dualpath("runs", "-c", str(seeded), "--evidence", "-f", "json").stdout
    subprocess.run([sys.executable, "-m", "json.tool"], input=out, text=True, check=True,
                   capture_output=True)
    doc = json.loads(out)
    assert list(doc) == ["runs", "evidence", "hosts", "gpu", "warnings", "declared_differences"]
    assert len(doc["runs"]) == 20 and doc["runs"][-2]["status"] == "partial"


def test_report_markdown_opens_with_the_same_headline(seeded, tmp_path):
    dualpath("report", "-c", str(seeded), "--out", str(tmp_path / "rep"))
    md = next((tmp_path / "rep").glob("*.md")).read_text()
    title = "# dualpath weekly comparison — demo, 2027-04-29 – 2027-05-13\n\n"
    assert md.startswith(title + "```text\n" + HEADLINE_FULL + "```\n")
    html = next((tmp_path / "rep").glob("*.html")).read_text()
    first_screen = html[:html.index("1. Plan integrity")]
    assert "5.7× slower than main (95% CI 5.6×–5.8×, 9 paired nights)" in first_screen
    assert "max-width:1200px" not in html


def test_a_rerun_shows_a_finished_path_as_finished_and_counts_earlier_units():
    from rich.progress import Progress

    from dualpath.cli._common import PathBars

    bars = PathBars(Progress(disable=True))
    bars.reset("2027-05-03", ["main", "backup"], {"main": 10, "backup": 10},
               {"main": 10, "backup": 6})
    bars("backup", 2, 4, 34)          # this segment: 2 of its 4 units
    task = {t.description.split()[0]: t for t in bars.bars.tasks}
    assert (task["main"].completed, task["main"].total) == (10, 10)
    assert task["main"].fields["what"] == "done earlier"
    assert (task["backup"].completed, task["backup"].total) == (8, 10)


def test_help_texts_keep_their_brackets():
    out = dualpath("verify", "--help").stdout
    assert "[paths.X.measured]" in " ".join(out.split())


PLAN = """\
 100 tickers × 2 draws per night (throughput basis: seconds per unit = run wall clock ÷ ticker-draws;  
                             complete one-segment runs at the same slots)                              
┏━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━┓
┃ path   ┃ slots ┃ source                      ┃ s_per_unit (range)  ┃ hours (range) ┃ draws_that_fit ┃
┡━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━┩
│ main   │     8 │ measured (10 runs, p10–p90) │ 30.5 (30–31)        │ 1.7 (1.7–1.7) │ 5              │
│ backup │     4 │ measured (9 runs, p10–p90)  │ 173.5 (172.5–175.5) │ 9.6 (9.6–9.8) │ 1              │
└────────┴───────┴─────────────────────────────┴─────────────────────┴───────────────┴────────────────┘
a night of 100 tickers × 2 draws takes main 1.7 h (fits), backup 9.6 h (does not fit); the window given, 5 h
"""

SCHEMA = """\
                                           warehouse schema                                           
┏━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓
┃ table  ┃ kind  ┃ column    ┃ type    ┃ unit and meaning                                            ┃
┡━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩
│ prices │ table │ ticker    │ VARCHAR │ symbol                                                      │
│ prices │ table │ date      │ DATE    │ date — session                                              │
│ prices │ table │ close     │ DOUBLE  │ currency — raw close                                        │
│ prices │ table │ adj_close │ DOUBLE  │ currency — split/dividend-adjusted close (returns use this) │
└────────┴───────┴───────────┴─────────┴─────────────────────────────────────────────────────────────┘
"""


def test_plan_whole_against_a_window(seeded):
    out = dualpath("plan", "-c", str(seeded), "--tickers", "100", "--window-hours", "5").stdout
    assert out == PLAN


def test_plan_says_unknown_where_nothing_is_measured(tmp_path):
    from tests.helpers import make_project

    cfg_path = make_project(tmp_path, tickers=2, draws=1, nights=1)[0]
    text = cfg_path.read_text().replace(
        'engine = "sim"', 'engine = "llama.cpp"\nbase_url = "http://127.0.0.1:9"', 1)
    cfg_path.write_text(text + '\n[schedule]\ndeadline = "07:00"\n')
    out = " ".join(dualpath("plan", "-c", str(cfg_path)).stdout.split())
    assert "unknown (nothing measured yet)" in out and "draws_that_fit" in out
    assert "the configured window, 18:30 to 07:00 market time (12.5 h)" in out


def test_schema_and_prereg_status_whole(seeded):
    assert dualpath("schema", "-c", str(seeded), "--table", "prices").stdout == SCHEMA
    assert dualpath("prereg", "status", "-c", str(seeded)).stdout == (
        "no frozen plan: results are exploratory (`dualpath prereg draft`, then `dualpath "
        "prereg freeze`)\n")


def test_report_projects_a_night_in_hours_to_three_significant_figures(seeded, tmp_path):
    """backup 347 s/ticker × 100 / 3600 = 9.64 h beside main 61 × 100 / 3600 = 1.69 h (it
    printed 9.6 beside 1.694: one and three decimals by each value's size)."""
    dualpath("report", "-c", str(seeded), "--out", str(tmp_path / "rep"))
    md = next((tmp_path / "rep").glob("*.md")).read_text()
    assert ("### Projected duration of a 100-ticker night\n\n\n"
            "| path | hours_for_100_tickers |\n|---|---|\n"
            "| backup | 9.64 h |\n| main | 1.69 h |\n\n") in md
    html = next((tmp_path / "rep").glob("*.html")).read_text()
    assert "<td>backup</td><td>9.64 h</td>" in html and "<td>main</td><td>1.69 h</td>" in html
