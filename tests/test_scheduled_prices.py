"""`check --deployed` (and `deploy`, `serve`) refuse, in one line with the fix, a config whose
schedule's next nights have no prices source: `deploy/local-llama.toml` as shipped scored a
night its synthetic market did not reach on its first trigger."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path

from dualpath.config import load_config
from dualpath.config_checks import scheduled_prices_problem
from tests.cli_run import run_cli

SHIPPED = Path(__file__).resolve().parents[1] / "deploy" / "local-llama.toml"
TODAY = date(2026, 12, 2)


def _copy(tmp_path: Path, market: dict[str, str]) -> Path:
    text = SHIPPED.read_text()
    for key, value in market.items():
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
        if not n:
            text = text.replace("[market]\n", f"[market]\n{key} = {value}\n")
    out = tmp_path / "deployed.toml"
    out.write_text(text)
    return out


def test_the_shipped_local_config_has_no_prices_for_nights_before_its_synthetic_market():
    why = scheduled_prices_problem(load_config(SHIPPED), TODAY)
    assert why == ("market: the synthetic market's prices run 2027-02-01 (after 20 sessions of "
                   "history) to 2028-08-09, so the schedule's next nights (2026-12-02 to "
                   "2026-12-09) have no prices; set [market] synthetic_start = 2026-10-17, or "
                   "point prices_file, prices_dir or source at real prices")


def test_the_fix_it_names_is_accepted(tmp_path):
    fixed = _copy(tmp_path, {"synthetic_start": "2026-10-17"})
    assert scheduled_prices_problem(load_config(fixed), TODAY) is None


def test_a_synthetic_market_that_ends_before_the_nights_is_refused(tmp_path):
    old = _copy(tmp_path, {"synthetic_start": "2020-01-06"})
    why = scheduled_prices_problem(load_config(old), TODAY)
    assert why is not None and "to 2021-" in why and "synthetic_start = 2026-10-17" in why


def test_no_source_at_all_is_refused_and_a_prices_file_is_a_source(tmp_path):
    path = _copy(tmp_path, {})
    text = re.sub(r"^synthetic_(seed|start) = .*\n", "", path.read_text(), flags=re.M)
    path.write_text(text.replace("[market]\n", '[market]\ncalendar = "XKRX"\n'))
    why = scheduled_prices_problem(load_config(path), TODAY)
    assert why is not None and why.startswith("market: a scheduled night from 2026-12-02 on "
                                              "has no prices source; set [market] prices_file")
    path.write_text(path.read_text().replace("[market]\n", '[market]\nprices_file = "p.csv"\n'))
    assert scheduled_prices_problem(load_config(path), TODAY) is None


def test_check_deployed_fails_in_one_line_and_plain_check_still_passes(tmp_path):
    future = _copy(tmp_path, {"synthetic_start": "2099-01-05"})
    ran = run_cli("check", "--deployed", "-c", str(future))
    assert ran.returncode == 2 and ran.stdout == ""
    lines = ran.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert re.fullmatch(r"error: market: the synthetic market's prices run 2099-\S+ \(after 20 "
                        r"sessions of history\) to \S+, so the schedule's next nights \(\S+ to "
                        r"\S+\) have no prices; set \[market\] synthetic_start = \S+, or point "
                        r"prices_file, prices_dir or source at real prices", lines[0]), lines[0]
    assert run_cli("check", "-c", str(future)).returncode == 0
