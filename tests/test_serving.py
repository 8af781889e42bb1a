"""The serving-benchmark block: percentiles against numpy and a hand-worked case, the
exclusion of runs that are not results, and each figure's clock."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dualpath.evals.serving import SERVING_COLUMNS, missing, percentiles, serving_benchmark


def test_percentiles_match_numpy_and_a_hand_computed_case():
    # 1..10 with linear interpolation: p50 at rank 0.5 x 9 = 4.5 -> 5 + 0.5 x (6 - 5) = 5.5;
    # p90 at rank 8.1 -> 9 + 0.1 x (10 - 9) = 9.1; p99 at rank 8.91 -> 9 + 0.91 = 9.91
    assert percentiles(pd.Series(range(1, 11))) == pytest.approx([5.5, 9.1, 9.91])
    rng = np.random.default_rng(7)
    x = pd.Series(rng.lognormal(0, 1, 501))
    assert percentiles(x) == pytest.approx(list(np.percentile(x, [50, 90, 99])))
    assert all(np.isnan(percentiles(pd.Series([np.nan, None], dtype=float))))


def _frames():
    # path a: one result run (time_scale 0.5: client seconds are half the real ones) and one
    # disturbed run whose calls must not count; path b: no result run
    runs = pd.DataFrame({"run_id": ["a1", "a2", "b1"], "path": ["a", "a", "b"],
                         "wall_s": [10.0, 1.0, 5.0], "time_scale": [0.5, 0.5, 1.0]})
    per_run = pd.DataFrame({"run_id": ["a1", "a2", "b1"], "path": ["a", "a", "b"],
                            "is_result": [True, False, False]})
    calls = pd.DataFrame({
        "run_id": ["a1", "a1", "a1", "a1", "a2", "b1"], "path": ["a"] * 5 + ["b"],
        "latency_s": [1.0, 2.0, 3.0, 0.5, 99.0, 1.0],
        "ttft_s": [0.1, 0.2, np.nan, 0.05, 9.0, 0.1],
        "completion_tokens": [11, 21, 31, 1, 5, 5],
        "predicted_n": [10, 20, 30, 0, 5, 5],
        "predicted_ms": [100.0, 300.0, 600.0, 0.0, 50.0, 50.0],
        "error_kind": [None] * 6})
    # a failed call of the result run: counted apart, in no figure
    failed = calls.iloc[[0]].assign(latency_s=50.0, ttft_s=40.0, error_kind="timeout")
    calls = pd.concat([calls, failed], ignore_index=True)
    return calls, runs, per_run


def test_the_block_from_result_runs_only_in_real_scale_time():
    out = serving_benchmark(*_frames())
    assert list(out.columns) == SERVING_COLUMNS
    assert list(out["path"]) == ["a"]       # b has no result run: no row of dashes
    a = out.iloc[0]
    # a1 only: 4 calls over 10 s ÷ 0.5 = 20 real s -> 0.2 req/s; 64 tokens -> 3.2 tokens/s
    assert (a["runs"], a["requests"], a["failed"]) == (1, 4, 1)
    assert a["req_per_s"] == pytest.approx(0.2) and a["out_tok_per_s"] == pytest.approx(3.2)
    # TTFT real ms of the streamed calls: 200, 400, 100 -> p50 200
    assert a["ttft_p50"] == pytest.approx(200.0)
    # TPOT: (2000 - 200) / 10 = 180 ms, (4000 - 400) / 20 = 180 ms; the 1-token call has none
    assert a["tpot_p50"] == pytest.approx(180.0)
    # ITL, server clock (not scaled): 10, 15, 20 ms per token
    assert [a["itl_p50"], a["itl_p90"]] == pytest.approx([15.0, 19.0])
    # goodput: both judged calls meet TTFT <= 5 s and TPOT <= 200 ms
    assert a["goodput"] == 1.0


def test_a_path_without_a_result_run_gets_a_line_saying_why():
    # the reasons the report's "Left out, and why" gives: the status of a run that is not
    # complete, resumed, else the first kind of its disturbance; the commonest first
    starved = "starved: slots busy 31% of the time units waited to start, while dualpath kept"
    per_run = pd.DataFrame({
        "run_id": [f"r{i}" for i in range(7)], "path": ["b"] * 5 + ["a", "a"],
        "status": ["complete", "complete", "partial", "complete", "complete", "complete",
                   "failed"],
        "resumed": [False, False, False, True, False, False, False],
        "disturbed": [starved, f"{starved}; gpu: changed", None, None,
                      "stalled: the server answered nothing for 40 s", None, None],
        "is_result": [False] * 5 + [True, False]})
    assert missing(per_run) == ["b: no complete, one-segment, undisturbed run — 2 starved, "
                                "1 partial, 1 resumed, 1 stalled; see `dualpath runs`"]
    assert missing(per_run[per_run["path"] == "a"]) == []


def _resumed_backup(tmp_path):
    """The seeded warehouse with every complete backup run resumed: no backup run's speed is
    a result (its last night is partial)."""
    from tests.seeded import seed_warehouse
    from dualpath.warehouse.db import writer

    cfg_path, cfg, _ = seed_warehouse(tmp_path)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("UPDATE runs SET segments = 2 WHERE path = 'backup' AND status = 'complete'")
    return cfg_path


WHY = ("backup: no complete, one-segment, undisturbed run — 9 resumed, 1 partial; see "
       "`dualpath runs`")
SERVING_WITHOUT_BACKUP = f"""\
Serving benchmark per path (as vllm bench serve): over complete one-segment undisturbed runs,
  real-scale; percentiles p50/p90/p99
path  runs  req_per_s  out_tok_per_s  ttft_p50  ttft_p99  tpot_p50  tpot_p99  goodput
────  ────  ─────────  ─────────────  ────────  ────────  ────────  ────────  ───────
main    10      0.066           32.8    30,500    31,000     183.4     186.4    0.000
{WHY}
  req_per_s: requests/s, client clock, real-scale: calls ÷ the runs' summed wall clock
"""


def test_metrics_says_why_a_path_has_no_serving_row_in_place_of_a_row_of_dashes(tmp_path):
    from tests.cli_run import run_cli

    cfg_path = _resumed_backup(tmp_path)
    r = run_cli("metrics", "-c", str(cfg_path), columns=100)
    assert r.returncode == 0, r.stderr
    start = r.stdout.index("Serving benchmark")
    assert r.stdout[start:start + len(SERVING_WITHOUT_BACKUP)] == SERVING_WITHOUT_BACKUP
    r = run_cli("metrics", "-c", str(cfg_path), "--wide", columns=100)
    block = r.stdout[r.stdout.index("Serving benchmark"):r.stdout.index("  req_per_s:")]
    assert block.endswith(f"goodput        0.000\n{WHY}\n")     # main as a record, then why
    assert "backup " not in block


def test_the_report_and_the_viewer_say_why_a_path_has_no_serving_row(tmp_path):
    from starlette.testclient import TestClient

    from dualpath.config import load_config
    from tests.cli_run import run_cli
    from dualpath.viewer.app import create_app

    cfg_path = _resumed_backup(tmp_path)
    r = run_cli("report", "-c", str(cfg_path), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    md = next((tmp_path / "rep").glob("*.md")).read_text()
    section = md[md.index("### Serving benchmark"):md.index("### Projected duration")]
    assert "| backup |" not in section and section.count(f"_{WHY}_") == 2   # serving, latency
    html = next((tmp_path / "rep").glob("*.html")).read_text()
    block = html[html.index("<h3>Serving benchmark"):html.index("Projected duration")]
    assert "<td>backup</td>" not in block
    assert block.count(f'<p class="empty">{WHY}</p>') == 2
    page = TestClient(create_app(load_config(cfg_path)), base_url="http://127.0.0.1").get("/")
    block = page.text[page.text.index("<h2>Serving benchmark</h2>"):page.text.index("<h2>Nights")]
    assert "<td>backup</td>" not in block and "<td>main</td>" in block
    assert f'<p class="empty serving-missing">{WHY}</p>' in block.replace("&#96;", "`")


def test_the_latency_percentiles_count_only_result_runs_calls(tmp_path):
    """They counted every call, the backup's partial last night's too, under a title that
    did not say so: now the calls of the runs whose speed is a result (9 backup nights × 16
    units × 2 calls = 288, as the serving block's requests), and the title says what."""
    from tests.cli_run import run_cli
    from tests.seeded import seed_warehouse

    cfg_path, _, _ = seed_warehouse(tmp_path)
    assert run_cli("report", "-c", str(cfg_path), "--out", str(tmp_path / "rep")).returncode == 0
    md = next((tmp_path / "rep").glob("*.md")).read_text()
    section = md[md.index("### Per-call latency percentiles"):]
    assert section.startswith("### Per-call latency percentiles over complete one-segment "
                              "undisturbed runs (real-scale; a starved, resumed or partial "
                              "run's calls are left out)\n")
    assert "| backup | latency_s | client: request start to last byte, s | 288 |" in section
    assert "| main | latency_s | client: request start to last byte, s | 320 |" in section
    html = next((tmp_path / "rep").glob("*.html")).read_text()
    assert "<p>prices are fresh for 2027-05-13: 8 of 8 ticker(s) priced" in html
    assert "prices: prices" not in html


SERVING_TABLE = """\
Serving benchmark per path (as vllm bench serve): over complete one-segment undisturbed runs,
  real-scale; percentiles p50/p90/p99
path    runs  req_per_s  out_tok_per_s  ttft_p50  ttft_p99  tpot_p50  tpot_p99  goodput
──────  ────  ─────────  ─────────────  ────────  ────────  ────────  ────────  ───────
backup     9      0.012          5.753    86,750    87,750     521.5     527.6    0.000
main      10      0.066           32.8    30,500    31,000     183.4     186.4    0.000
  req_per_s: requests/s, client clock, real-scale: calls ÷ the runs' summed wall clock
  out_tok_per_s: tokens/s, client clock, real-scale: completion tokens ÷ the runs' summed wall clock
  ttft_p50: ms, client clock, real-scale: time to first token (streamed calls)
  ttft_p99: ms, client clock, real-scale: time to first token (streamed calls)
  tpot_p50: ms, client clock, real-scale: (latency − TTFT) ÷ (tokens − 1)
  tpot_p99: ms, client clock, real-scale: (latency − TTFT) ÷ (tokens − 1)
  goodput: share of streamed calls with TTFT ≤ 5000 ms and TPOT ≤ 200 ms (client clock, real-scale)
"""


def test_metrics_prints_the_serving_block_whole_at_100_columns(tmp_path):
    # the seeded main path: 32 calls a night over 8 × (60 + i % 3) real s, 10 nights summing
    # to 8 × 609 = 4,872 s -> 320 / 4,872 = 0.066 req/s and 500 tokens each -> 32.8 tokens/s;
    # TTFT = (60 + i % 3) / 2 s -> p50 30,500 ms; the backup's partial last night is left out
    from tests.cli_run import run_cli
    from tests.seeded import seed_warehouse

    cfg_path, _, _ = seed_warehouse(tmp_path)
    r = run_cli("metrics", "-c", str(cfg_path), columns=100)
    assert r.returncode == 0, r.stderr
    start = r.stdout.rindex("\n", 0, r.stdout.index("Serving benchmark")) + 1
    assert r.stdout[start:start + len(SERVING_TABLE)] == SERVING_TABLE
    assert max(len(line) for line in SERVING_TABLE.splitlines()) <= 100


def test_the_report_shows_the_serving_block_in_markdown_and_html(tmp_path):
    from tests.cli_run import run_cli
    from tests.seeded import seed_warehouse

    cfg_path, _, _ = seed_warehouse(tmp_path)
    r = run_cli("report", "-c", str(cfg_path), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    md = next((tmp_path / "rep").glob("*.md")).read_text()
    section = md[md.index("### Serving benchmark"):]
    assert ("| path | runs | req_per_s | out_tok_per_s | ttft_p50 | ttft_p99 | tpot_p50 | "
            "tpot_p99 | goodput |") in section
    assert "| main | 10 | 0.066 | 32.8 | 30,500 | 31,000 | 183.4 | 186.4 | 0.000 |" in section
    html = next((tmp_path / "rep").glob("*.html")).read_text()
    block = html[html.index("<h3>Serving benchmark"):html.index("Projected duration")]
    block = block.replace("<wbr>", "")          # a header may break after an underscore
    assert "itl_p99" in block and "TTFT ≤ 5000 ms and TPOT ≤ 200 ms" in block


def test_the_viewer_overview_shows_the_serving_block(tmp_path):
    from starlette.testclient import TestClient

    from dualpath.config import load_config
    from tests.seeded import seed_warehouse
    from dualpath.viewer.app import create_app

    cfg_path, _, _ = seed_warehouse(tmp_path)
    html = TestClient(create_app(load_config(cfg_path)), base_url="http://127.0.0.1").get("/").text
    block = html[html.index("<h2>Serving benchmark</h2>"):html.index("<h2>Nights</h2>")]
    assert ('<tr><td>main</td><td class="num">10</td><td class="num">0.066</td>'
            '<td class="num">32.8</td><td class="num">30,500</td>') in block
    assert "goodput: share of streamed calls with TTFT ≤ 5000 ms and TPOT ≤ 200 ms" in block


def test_with_no_result_run_on_any_path_metrics_prints_only_the_lines(tmp_path):
    from tests.cli_run import run_cli
    from tests.seeded import seed_warehouse
    from dualpath.warehouse.db import writer

    cfg_path, cfg, _ = seed_warehouse(tmp_path)
    with writer(cfg.resolve(cfg.warehouse.path)) as con:
        con.execute("UPDATE runs SET segments = 2 WHERE status = 'complete'")
    r = run_cli("metrics", "-c", str(cfg_path), columns=100)
    assert r.returncode == 0, r.stderr
    start = r.stdout.index("Serving benchmark")
    end = r.stdout.index("\n(brief columns", start)
    assert r.stdout[start:end] == (
        "Serving benchmark per path (as vllm bench serve): over complete one-segment "
        "undisturbed runs,\n  real-scale; percentiles p50/p90/p99\n"
        f"{WHY}\n"
        "main: no complete, one-segment, undisturbed run — 10 resumed; see `dualpath runs`")


def test_a_figure_no_path_has_leaves_its_columns_out_and_says_why():
    from dualpath.evals.registry import registered
    from dualpath.evals.serving import unmeasured

    calls, runs, per_run = _frames()
    out = serving_benchmark(calls.assign(ttft_s=np.nan, predicted_ms=np.nan), runs, per_run)
    assert list(out.columns) == SERVING_COLUMNS     # csv and json still carry every column
    assert unmeasured(out) == [
        "ttft, tpot, goodput: not measured on any path — no call of these runs was streamed "
        "(a first token's time needs a streamed reply: stream = true in the path's config)",
        "itl: not measured on any path — no server reported its own decode timings (vLLM's "
        "replies carry none; llama-server's do)"]
    spec = registered()["serving"]
    assert list(spec.select(out, wide=True, drop_empty=True).columns) == \
        ["path", "runs", "requests", "failed", "req_per_s", "out_tok_per_s"]
    assert list(spec.select(out, wide=True).columns) == SERVING_COLUMNS
    assert unmeasured(serving_benchmark(*_frames())) == []      # measured: no line
