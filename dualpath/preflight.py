"""What can be known to be wrong before a night starts, said once and plainly.

A pipeline that cannot be imported or an API key variable that is not set would otherwise
surface inside the Prefect flow, as a failed path or a task traceback, minutes into the night.
`preflight` checks them first and raises one `ConfigError` naming every problem.
"""

from __future__ import annotations

from dualpath.config import Config
from dualpath.config_checks import launch_model_problems, write_places
from dualpath.errors import ConfigError, DataError


def _cut(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def preflight(cfg: Config) -> None:
    """Raise `ConfigError` listing every problem a night would meet before its first call:
    a warehouse or runs folder that cannot be created, the universe, the pipeline import, each path's API key
    variable, each `expect` pin its launch argv contradicts (with the value to write), a
    launch model file that is missing."""
    from dualpath.launch_args import pin_disagreements
    from dualpath.night import api_key
    from dualpath.pipeline import load_pipeline

    problems: list[str] = [f"{loc}: {msg}" for loc, msg in write_places(cfg)]
    try:
        cfg.tickers()
    except DataError as e:
        problems.append(_cut(str(e)))
    try:
        load_pipeline(cfg.pipeline.name)
    except ConfigError as e:
        problems.append(_cut(str(e)))
    except Exception as e:       # the user's module itself raised while being imported
        problems.append(_cut(f"pipeline.name = {cfg.pipeline.name!r}: importing it raised "
                             f"{type(e).__name__}: {e}"))
    for name, sp in cfg.paths.items():
        try:
            api_key(cfg, name)
        except ConfigError as e:
            problems.append(_cut(str(e)))
        # a pin the launch argv contradicts fails identity every night: name it now
        problems += [f"paths.{name}: {p}" for p in pin_disagreements(sp)]
        problems += launch_model_problems(name, None if sp.work_pool else sp.launch, cfg.base_dir)
    if problems:
        raise ConfigError("not ready to score:\n" + "\n".join(f"  - {p}" for p in problems))
