"""`dualpath doctor`: one line per check, ✓ or ✗ with its fix, exit 1 when one fails."""

import pytest
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
    # nightly needs no PREFECT_API_URL (a temporary server): a note, not a failure
    assert any(ln.startswith("– prefect: API: PREFECT_API_URL is not set") for ln in lines)


def test_the_demo_market_prices_pass_whatever_todays_date(tmp_path):
    """The synthetic market's dates are its own (2027): today's date found none of its
    prices, so `dualpath doctor` failed right after `make demo`."""
    from dualpath.flows.doctor import _price_and_parity_checks
    from tests.helpers import make_project

    _, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    assert cfg.market.synthetic_seed is not None
    fresh, _parity = _price_and_parity_checks(cfg, cfg.resolve(cfg.warehouse.path))
    assert fresh.ok and "synthetic market" in fresh.detail


def test_the_demos_config_passes_with_prefects_temporary_server_as_a_note(tmp_path, monkeypatch):
    """Every path simulated and started by the night, no PREFECT_API_URL: the demo's nights
    run on a temporary Prefect server, which is no failure (doctor exited 1 right after
    `make demo`); the line says what a schedule would need."""
    import re

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    r = CliRunner().invoke(app, ["doctor", "-c", str(cfg_path)], terminal_width=300)
    assert r.exit_code == 0, r.output
    out = re.sub(r"free space: .* free at .*", "free space: N GB free at DIR", r.output)
    assert out == """\
– main: GPU 0: simulated RTX 5090, driver sim, power limit 575 W, link Gen4 x16 (max Gen4 \
x16), VRAM 32768 MiB
✓ main: server: simulated, started by each night
– backup: GPU 0: simulated Radeon AI PRO R9700, driver sim, power limit 210 W, link Gen4 x16 \
(max Gen4 x16), VRAM 32768 MiB
✓ backup: server: simulated, started by each night
✓ disk: free space: N GB free at DIR
✓ prices: synthetic market: prices generated with the nights
✓ sampling parity: the paths applied the same sampling on their last nights
✓ warehouse: migrations: current
– prefect: API: PREFECT_API_URL is not set: each night runs on a temporary Prefect server, as \
the demo's do; a schedule (dualpath deploy or serve) needs a server: prefect server start; \
export PREFECT_API_URL=http://127.0.0.1:4200/api
6 of 6 checks passed; 3 notes
"""


async def test_an_attached_config_without_prefect_api_url_is_a_note_not_a_failure(tmp_path,
                                                                                   monkeypatch):
    """`dualpath nightly` runs without PREFECT_API_URL whatever the paths (a temporary
    server): doctor exited 1 for it on any config with a real server."""
    from dualpath.flows.doctor import _prefect_checks
    from tests.helpers import make_project

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cfg_path, cfg, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    attached = cfg.model_copy(update={"paths": {
        n: p.model_copy(update={"base_url": "http://127.0.0.1:18974"})
        for n, p in cfg.paths.items()}})
    check, = await _prefect_checks(attached)
    assert check.ok and check.note and "PREFECT_API_URL is not set" in check.detail
    pooled = cfg.model_copy(update={"paths": {
        n: p.model_copy(update={"work_pool": "gpu"}) for n, p in cfg.paths.items()}})
    check, = await _prefect_checks(pooled)
    assert not check.ok and "work pool(s) ['gpu'] are reached only through a Prefect " \
        "server" in check.detail


def _gpu_project(tmp_path, pin: str, power: str = ""):
    """The demo project, its backup path pinning a GPU (`pin`: the expect.gpu table's body)."""
    from dualpath.config import load_config

    cfg_path, _, _ = make_project(tmp_path, tickers=5, draws=1, nights=1)
    text = cfg_path.read_text()
    text += f"\n[paths.backup.expect.gpu]\n{pin}\n"
    if power:     # the simulated R9700's cap as it reads now
        text = text.replace("power_limit_w = 210.0", power)
    cfg_path.write_text(text)
    return cfg_path, load_config(cfg_path)


def test_a_pinned_power_cap_the_gpu_reads_otherwise_is_named_with_the_value_to_write(tmp_path):
    """A 210 W cap pinned, 250 W read (the simulated GPU): doctor fails the path's GPU
    identity and `check` warns, both naming the value to write."""
    from dualpath.flows.doctor import gpu_checks

    cfg_path, cfg = _gpu_project(tmp_path, 'power_limit_w = 210\npcie = "Gen4 x16"',
                                 "power_limit_w = 250")
    last = gpu_checks(cfg, "backup")[-1]
    assert (last.name, last.ok) == ("backup: GPU identity", False)
    assert last.detail == ("gpu.power_limit_w: expected 210, GPU 0 reads 250; if this GPU is "
                           "the one meant, write power_limit_w = 250 under "
                           "[paths.backup.expect.gpu]")
    r = CliRunner().invoke(app, ["check", "-c", str(cfg_path)], terminal_width=400)
    assert r.exit_code == 0, r.output
    assert ('    expect.gpu: power_limit_w = 210, pcie = "Gen4 x16"\n'
            "    warning: gpu.power_limit_w: expected 210, GPU 0 reads 250; if this GPU is the "
            "one meant, write power_limit_w = 250 under [paths.backup.expect.gpu]\n") in r.output
    r = CliRunner().invoke(app, ["doctor", "-c", str(cfg_path)], terminal_width=400)
    assert r.exit_code == 1
    assert ("✗ backup: GPU identity: gpu.power_limit_w: expected 210, GPU 0 reads 250; if this "
            "GPU is the one meant, write power_limit_w = 250 under [paths.backup.expect.gpu]"
            ) in r.output


def test_pins_that_hold_pass_and_check_says_so(tmp_path):
    from dualpath.flows.doctor import gpu_checks

    cfg_path, cfg = _gpu_project(tmp_path, 'power_limit_w = 210\npcie = "Gen4 x16"\n'
                                 'vram_total_mb = 32768')
    last = gpu_checks(cfg, "backup")[-1]
    assert (last.ok, last.detail) == (True, 'matches expect.gpu (power_limit_w = 210, pcie = '
                                      '"Gen4 x16", vram_total_mb = 32768)')
    r = CliRunner().invoke(app, ["check", "-c", str(cfg_path)], terminal_width=400)
    assert ('    expect.gpu: power_limit_w = 210, pcie = "Gen4 x16", vram_total_mb = 32768 '
            "(the GPUs read so now)\n") in r.output


def test_a_bad_pcie_pin_is_one_clear_line(tmp_path):
    from dualpath.config import load_config
    from dualpath.errors import DualpathError

    cfg_path, _, _ = make_project(tmp_path, tickers=2, draws=1, nights=1)
    cfg_path.write_text(cfg_path.read_text() + '\n[paths.backup.expect.gpu]\npcie = "x16"\n')
    with pytest.raises(DualpathError) as e:
        load_config(cfg_path)
    assert str(e.value).splitlines()[-1].strip() == (
        "- paths.backup.expect.gpu.pcie = 'x16': String should match pattern "
        "'^Gen[1-6] x(1|2|4|8|16|32)$'"), str(e.value)
