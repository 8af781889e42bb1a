"""Configs that passed `check` and could not work: a launch model file that is missing, and a
universe below RankIC's minimum (also refused by `prereg draft` and `freeze`)."""

from __future__ import annotations

import pytest

from dualpath.config import load_config
from dualpath.config_checks import launch_model_problems, unanalysable
from dualpath.errors import UserError
from dualpath.flows.prereg import freeze_plan
from tests.cli_run import run_cli
from tests.helpers import make_project


def _dualpath(*args):
    return run_cli(*args)     # in process, in the test's folder (the autouse fixture's)


def _error_line(r) -> str:
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    return " ".join(lines)


WANT = ("experiment: the universe has 4 ticker(s), and RankIC needs at least 5 priced "
        "tickers a night: no night could ever answer the quality question; give the universe "
        "5 or more tickers")


def test_check_and_prereg_draft_refuse_a_universe_below_rankics_minimum(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=4, draws=1, nights=1)
    assert unanalysable(cfg) == WANT
    draft = ["prereg", "draft", str(tmp_path / "plan.toml"), "--first-night",
             nights[0].isoformat()]
    for args in (["check"], draft):
        line = _error_line(_dualpath(*args, "-c", str(cfg_path)))
        assert line == f"error: {WANT}", args
    assert not (tmp_path / "plan.toml").exists()
    (tmp_path / "five").mkdir()
    assert unanalysable(make_project(tmp_path / "five", tickers=5, draws=1, nights=1)[1]) is None


def test_freeze_refuses_a_plan_that_can_never_be_analysed(tmp_path):
    (tmp_path / "five").mkdir()
    ok_path, ok_cfg, nights = make_project(tmp_path / "five", tickers=5, draws=1, nights=1)
    plan = tmp_path / "plan.toml"
    r = _dualpath("prereg", "draft", str(plan), "--first-night", nights[0].isoformat(),
                  "-c", str(ok_path))
    assert r.returncode == 0, r.stderr
    (tmp_path / "four").mkdir()
    four_path, _, _ = make_project(tmp_path / "four", tickers=4, draws=1, nights=1)
    four = load_config(four_path)
    with pytest.raises(UserError, match="RankIC needs at least 5 priced tickers"):
        freeze_plan(four, plan)


def test_check_fails_in_one_line_for_a_launch_model_file_that_is_missing(tmp_path):
    cfg_path, cfg, nights = make_project(tmp_path, tickers=5, draws=1, nights=1)
    missing = tmp_path / "models" / "Qwen3.6-35B-A3B-Q4_K_M.gguf"
    text = cfg_path.read_text().replace(
        "[paths.main]\n", f'[paths.main]\nlaunch = ["llama-server", "-m", "{missing}", '
        '"--port", "18975"]\nbase_url = "http://127.0.0.1:18975"\n')
    cfg_path.write_text(text)
    r = _dualpath("check", "-c", str(cfg_path))
    assert f"paths.main.launch: the model file {missing} does not exist; fix its -m/--model " \
           "argument, or download the model there" in _error_line(r)
    assert launch_model_problems("x", ["llama-server", "-m", "{gemma3_270m}"], tmp_path) == []
    assert launch_model_problems("x", ["vllm", "serve", "Qwen/Qwen3.6-27B"], tmp_path) == []
    assert launch_model_problems("x", ["vllm", "serve", "./weights"], tmp_path) == [
        f"paths.x.launch: the model file {tmp_path / 'weights'} does not exist; fix its "
        "-m/--model argument, or download the model there"]
