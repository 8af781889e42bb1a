"""`dualpath doctor --launch` on simulated paths: the rehearsal passes when both would score,
and a path whose answers carry no grade is named and fails it."""

from __future__ import annotations

import re

from tests.cli_run import run_cli


def dualpath(*args):
    return run_cli(*args)      # in process: the CLI's imports paid once, not per call


def test_rehearsal_of_the_demo_passes_and_shows_the_vllm_fingerprint(tmp_path):
    cfg = tmp_path / "dualpath.toml"
    assert dualpath("init", "--demo", str(cfg)).returncode == 0
    r = dualpath("doctor", "--launch", "-c", str(cfg))
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"✓ main: short call: .* fingerprint vllm-0\.11\.0-[0-9a-f]{8}", r.stdout)
    # float32, as llama-server prints it (the simulated one too, from its source)
    assert "✓ backup: sampling applied: as sent: temperature=0.699999988079071" in r.stdout
    assert "✓ main: grade call: grade" in r.stdout and "✓ backup: grade call: grade" in r.stdout
    assert "10 of 10 checks passed" in r.stdout
    # each path's GPU, read through its telemetry source (the simulated R9700's)
    assert ("– backup: GPU 0: simulated Radeon AI PRO R9700, driver sim, power limit 210 W, "
            "link Gen4 x16 (max Gen4 x16), VRAM 32768 MiB") in r.stdout.replace("\n", " ")


def test_a_path_that_cannot_grade_fails_the_rehearsal(tmp_path):
    cfg = tmp_path / "dualpath.toml"
    dualpath("init", "--demo", str(cfg))
    text = cfg.read_text().replace('[paths.backup.sim]\n',
                                   '[paths.backup.sim]\nmalformed_share = 1.0\n')
    cfg.write_text(text)
    r = dualpath("doctor", "--launch", "-c", str(cfg))
    assert r.returncode == 1 and "Traceback" not in r.stdout + r.stderr
    assert "✗ backup: grade call: no readable grade (no 'FINAL GRADE:' line)" in r.stdout
    assert "✓ main: grade call" in r.stdout


def test_identity_line_names_a_field_the_engine_does_not_report(tmp_path):
    """vLLM reports no slot count: the rehearsal said 'slots None' (a Python repr)."""
    from dualpath.config import load_config
    from dualpath.records import ServerIdentity
    from dualpath.flows.dryrun import _identity_checks
    cfg_path = tmp_path / "dualpath.toml"
    assert dualpath("init", "--demo", str(cfg_path)).returncode == 0
    cfg = load_config(cfg_path)
    seen = ServerIdentity(base_url="http://127.0.0.1:1", engine="vllm",
                          model=cfg.paths["main"].model, build="vllm-0.11.0", slots=None,
                          n_ctx_per_slot=16384)
    (check,) = _identity_checks(cfg, "main", seen)
    assert "None" not in check.detail, check.detail
    assert "slots not reported" in check.detail and "n_ctx_per_slot 16384" in check.detail
