import pytest

from dualpath.errors import ConfigError
from dualpath.pipeline import builtin, load_pipeline


def test_builtin_and_user_pipelines_load(tmp_path, monkeypatch):
    assert load_pipeline("builtin") is builtin
    (tmp_path / "mypipe.py").write_text(
        "async def score(unit, llm):\n    return await llm('solo', [])\n"
        "def not_async(unit, llm):\n    return ''\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_pipeline("mypipe:score").__name__ == "score"
    with pytest.raises(ConfigError, match="must be an async function"):
        load_pipeline("mypipe:not_async")
    with pytest.raises(ConfigError, match="has no 'missing'"):
        load_pipeline("mypipe:missing")
    with pytest.raises(ConfigError, match="cannot import module 'nopipe_xyz'"):
        load_pipeline("nopipe_xyz:f")
