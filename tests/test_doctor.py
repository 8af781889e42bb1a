"""`dualpath doctor`: one line per check, ✓ or ✗ with its fix, exit 1 when one fails."""

from typer.testing import CliRunner

from dualpath.cli import app
from tests.helpers import make_project


def test_doctor_names_each_failing_check_and_its_fix(tmp_path, sim_server):
    srv = sim_server(slots=4, model_alias="qwen3.6-35b-a3b")
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    text = cfg_path.read_text().replace(
        '[paths.backup]\nengine = "sim"', f'[paths.backup]\nengine = "sim"\nbase_url = "{srv.url}"')
    text = text.replace('[paths.backup.sim]', '[paths.backup.expect]\nslots = 6\n\n[paths.backup.sim]')
    cfg_path.write_text(text)
    r = CliRunner().invoke(app, ["doctor", "-c", str(cfg_path)], terminal_width=300)
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert any(ln.startswith("✓ backup: reachable") for ln in lines)
    assert any(ln.startswith("✗ backup: identity: slots: expected 6, server reports 4")
               and "fix the server or [paths.backup.expect]" in ln for ln in lines)
    assert any(ln.startswith("✓ warehouse: migrations: current") for ln in lines)
    assert any(ln.startswith("✗ prefect: API") for ln in lines)


def test_the_demo_market_prices_pass_whatever_todays_date(tmp_path):
    """The synthetic market's dates are its own (2027): today's date found none of its
    prices, so `dualpath doctor` failed right after `make demo`."""
    from flows.doctor import _price_and_parity_checks
    from tests.helpers import make_project

    _, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    assert cfg.market.synthetic_seed is not None
    fresh, _parity = _price_and_parity_checks(cfg, cfg.resolve(cfg.warehouse.path))
    assert fresh.ok and "synthetic market" in fresh.detail
