import subprocess
import sys
from pathlib import Path

import pytest

from dualpath.config import load_config, parse_config
from dualpath.errors import ConfigError, DataError

EXAMPLE = Path(__file__).resolve().parents[1] / "deploy" / "dualpath.example.toml"
DEMO = Path(__file__).resolve().parents[1] / "dualpath" / "demo.toml"


def minimal(**over):
    data = {"experiment": {"universe": ["AAA", "BBB"]},
            "paths": {"main": {"engine": "vllm", "base_url": "http://127.0.0.1:8000",
                               "model": "m"}}}
    for k, v in over.items():
        data[k] = v
    return data


def test_defaults_are_the_users_pipeline():
    cfg = parse_config(minimal())
    s = cfg.sampling
    assert (s.temperature, s.top_p, s.top_k, s.presence_penalty, s.max_tokens) == (0.7, 0.8, 20, 1.5, 4096)
    assert cfg.experiment.horizons == [1, 5, 20]
    assert cfg.tickers() == ["AAA", "BBB"]


def test_init_writes_the_same_example_as_deploy():
    packaged = Path(__file__).resolve().parents[1] / "dualpath" / "example.toml"
    assert packaged.read_text() == EXAMPLE.read_text()   # one example, shipped twice


def test_shipped_configs_validate():
    local = Path(__file__).resolve().parents[1] / "deploy" / "local-llama.toml"
    for f in (EXAMPLE, DEMO, local):
        cfg = load_config(f)
        assert set(cfg.paths) == {"main", "backup"}
    real = load_config(EXAMPLE)
    assert real.paths["backup"].engine == "llama.cpp"
    assert real.paths["backup"].slots == 4
    assert real.paths["backup"].expect.speculative is False
    assert "-np" in real.paths["backup"].launch


@pytest.mark.parametrize("data,needle", [
    (minimal(experiment={"universe": ["AAA"], "draws": 0}), "experiment.draws = 0"),
    (minimal(experiment={"universe": ["AAA"], "drawz": 2}), "experiment.drawz: unknown setting"),
    (minimal(experiment={"universe": []}), "universe is empty"),
    (minimal(experiment={"universe": ["A", "A"]}), "duplicate ticker"),
    (minimal(experiment={}), "exactly one of 'universe'"),
    (minimal(sampling={"top_p": 1.5}), "sampling.top_p = 1.5"),
    (minimal(paths={"main": {"engine": "tgi", "base_url": "http://x", "model": "m"}}),
     "paths.main.engine = 'tgi'"),
    (minimal(paths={"main": {"engine": "vllm", "model": "m"}}), "needs base_url"),
    (minimal(paths={"main": {"engine": "vllm", "base_url": "localhost:8000", "model": "m"}}),
     "must start with http://"),
    (minimal(pipeline={"name": "nocolon"}), "'package.module:function'"),
])
def test_config_mistakes_name_field_value_and_rule(data, needle):
    with pytest.raises(ConfigError) as e:
        parse_config(data, "test.toml")
    assert needle in str(e.value)


def test_universe_file(tmp_path):
    (tmp_path / "u.txt").write_text("# my universe\nAAA\n\nBBB  # comment\n")
    (tmp_path / "c.toml").write_text(
        '[experiment]\nuniverse_file = "u.txt"\n[paths.m]\nengine="sim"\nmodel="x"\n')
    assert load_config(tmp_path / "c.toml").tickers() == ["AAA", "BBB"]
    (tmp_path / "u.txt").write_text("AAA\nAAA\n")
    with pytest.raises(DataError, match="duplicate"):
        load_config(tmp_path / "c.toml").tickers()


def test_bad_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml")
    (tmp_path / "bad.toml").write_text("[experiment\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "bad.toml")


def test_fingerprint_ignores_storage_location_only():
    a = parse_config(minimal())
    b = parse_config(minimal(warehouse={"path": "elsewhere.duckdb"}))
    c = parse_config(minimal(sampling={"temperature": 0.6}))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()


def test_cli_prints_config_error_without_traceback(tmp_path):
    (tmp_path / "c.toml").write_text('[experiment]\nuniverse=["A"]\ndraws=-1\n[paths.m]\n'
                                     'engine="sim"\nmodel="x"\n')
    r = subprocess.run([sys.executable, "-m", "dualpath", "check", "--config",
                        str(tmp_path / "c.toml")], capture_output=True, text=True)
    assert r.returncode == 2
    assert "experiment.draws = -1" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
