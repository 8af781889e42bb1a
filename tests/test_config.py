from pathlib import Path

import pytest

from dualpath.config import load_config, parse_config
from dualpath.errors import ConfigError, DataError
from tests.cli_run import run_cli

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
    # a bool is an int to Python: `draws = true` once read as 1 draw
    (minimal(experiment={"universe": ["AAA"], "draws": True}),
     "experiment.draws = True: draws is a whole number of scorings from 1 to 50 (e.g. "
     "draws = 2), not true or false"),
    (minimal(experiment={"universe": ["AAA"], "draws": "2"}),
     "experiment.draws = '2': Input should be a valid integer"),
    (minimal(paths={"main": {"engine": "sim", "model": "m", "draws": False}}),
     "paths.main.draws = False: draws is a whole number of scorings from 1 to 50"),
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
    r = run_cli("check", "--config", tmp_path / "c.toml")
    assert r.returncode == 2
    assert "experiment.draws = -1" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


@pytest.mark.parametrize("data,needle", [
    (minimal(experiment={"universe": ["AAA"], "horizons": []}),
     "experiment.horizons: 0 horizons; list 1 to 20 horizons"),
    (minimal(experiment={"universe": ["AAA"], "horizons": [5, 1, 5]}),
     "horizon(s) [5] listed twice"),
    (minimal(experiment={"universe": ["AAA"], "name": "x" * 250}),
     "use 1-64 ASCII letters, digits"),
    (minimal(experiment={"universe": ["AAA"], "name": ".."}), "starting with a letter or digit"),
    (minimal(experiment={"universe": ["AAA"], "name": "-rf"}), "starting with a letter or digit"),
    (minimal(warehouse={"path": "wh\x00.duckdb"}), "warehouse.path = 'wh\\x00.duckdb': contains "
     "a control character"),
    (minimal(warehouse={"runs_dir": "runs\n"}), "warehouse.runs_dir = 'runs\\n': contains"),
    (minimal(market={"prices_file": "p\x00.csv"}), "market.prices_file"),
    (minimal(market={"date_format": "%d/%m/%"}), "market.date_format = '%d/%m/%': stray %"),
    (minimal(market={"date_format": "%H:%M"}), "names no year or day"),
])
def test_a_config_check_accepts_is_one_a_night_can_run(data, needle):
    with pytest.raises(ConfigError) as e:
        parse_config(data, "test.toml")
    assert needle in str(e.value)


def test_the_longest_name_allowed_still_makes_file_names(tmp_path):
    cfg = parse_config(minimal(experiment={"universe": ["AAA"], "name": "x" * 64}))
    (tmp_path / cfg.experiment.name / "2027-04-29" / "main").mkdir(parents=True)


def test_files_and_folders_of_the_wrong_kind_are_refused_by_name(tmp_path):
    import os

    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "fifo")
    data = minimal(experiment={"universe_file": "fifo"},
                   warehouse={"path": "adir", "runs_dir": "afile"},
                   market={"prices_file": "adir", "prices_dir": "afile"},
                   pipeline={"documents_dir": "afile/docs"})
    with pytest.raises(ConfigError) as e:
        parse_config(data, "c.toml", base_dir=tmp_path)
    lines = str(e.value).splitlines()
    assert lines[0] == "c.toml: 6 problem(s):"
    assert lines[1:] == [
        f"  - warehouse.path: {tmp_path}/adir is a folder; give a file name for the DuckDB "
        "warehouse, e.g. warehouse.duckdb inside it",
        f"  - warehouse.runs_dir: {tmp_path}/afile is a file; give a folder (it is created "
        "if missing)",
        f"  - experiment.universe_file: {tmp_path}/fifo is a FIFO, socket or device; give a "
        "text file with one ticker per line",
        f"  - market.prices_file: {tmp_path}/adir is a folder; give a CSV or Parquet file",
        f"  - market.prices_dir: {tmp_path}/afile is a file; give a folder (it is created if "
        "missing)",
        f"  - pipeline.documents_dir: {tmp_path}/afile is a file, not a folder; move it or "
        "give another place",
    ]


def test_a_fifo_as_config_or_universe_file_is_refused_without_waiting(tmp_path):
    """open() of a FIFO waits for a writer forever; `check` hung on one."""
    import os

    os.mkfifo(tmp_path / "c.toml")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(tmp_path / "c.toml")
    from dualpath.config import read_universe
    os.mkfifo(tmp_path / "u.txt")
    with pytest.raises(DataError, match="not a regular file"):
        read_universe(tmp_path / "u.txt")


def test_only_secrets_are_redacted_in_config_errors():
    path = {"engine": "llama.cpp", "base_url": "http://127.0.0.1:8080", "model": "m",
            "launch_env": {"HF_TOKEN": 5, "CUDA_VISIBLE_DEVICES": 7},
            "launch": ["llama-server", 8080]}
    with pytest.raises(ConfigError) as e:
        parse_config(minimal(sampling={"max_tokens": 0}, paths={"main": path},
                             warehouse={"journal_store": 3}), "c.toml")
    text = str(e.value)
    assert "sampling.max_tokens = 0:" in text                      # not a secret: shown
    assert "paths.main.launch_env.HF_TOKEN = <redacted>:" in text
    assert "paths.main.launch_env.CUDA_VISIBLE_DEVICES = 7:" in text
    assert "paths.main.launch.1 = 8080:" in text                    # a number, not a key
    with pytest.raises(ConfigError) as e:
        parse_config(minimal(paths={"main": {**path, "launch_env": {}, "launch": ["x"],
                                             "base_url": "http://u:sk-secret@h:8080/?q=1"}}))
    assert "sk-secret" not in str(e.value) and "//<redacted>@h:8080" in str(e.value)


def test_a_warehouse_in_a_folder_that_takes_no_file_is_refused_by_check(tmp_path):
    """`/proc` exists and is a folder, but no file can be created there: `check` passed
    `[warehouse] path = "/proc/wh.duckdb"` and `nightly` ended in an internal error. Refused
    before a night (`preflight`, which `check` runs), not when the config is read."""
    from dualpath.preflight import preflight

    data = minimal(warehouse={"path": "/proc/wh.duckdb", "runs_dir": "/proc/dualpath-runs"})
    cfg = parse_config(data, "c.toml", base_dir=tmp_path)
    with pytest.raises(ConfigError) as e:
        preflight(cfg)
    lines = str(e.value).splitlines()
    assert lines[0] == "not ready to score:"
    assert lines[1].startswith("  - warehouse.path: /proc/wh.duckdb cannot be created: /proc "
                               "takes no new file (")
    assert lines[1].endswith("); give a place in a folder you can write")
    assert lines[2].startswith("  - warehouse.runs_dir: /proc/dualpath-runs cannot be created")
    # a folder that does take files: no such problem, and the probe leaves nothing behind
    from dualpath.config_checks import write_places
    ok = parse_config(minimal(warehouse={"path": "sub/wh.duckdb"}), "c.toml", base_dir=tmp_path)
    assert write_places(ok) == []
    assert [p.name for p in tmp_path.iterdir()] == []
