"""Settings: one `Config` read from `dualpath.toml`, validated strictly.

Every model forbids unknown keys, so a typo is an error naming the key instead of a setting
silently ignored. `load_config` turns any problem into a `ConfigError` whose message names the
field, the bad value and what is allowed.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections import Counter
from pathlib import Path
from typing import Annotated, Literal

import orjson
from pydantic import (BaseModel, Field, PrivateAttr, ValidationError, field_validator,
                      model_validator)

from dualpath.config_checks import places, plain_path
# the text files a config reads and writes live in config_files; every name stays importable
from dualpath.config_files import (MAX_TEXT_BYTES, MAX_TICKER_LEN, MAX_UNIVERSE,  # noqa: F401
                                   _check_tickers, _cut, _read_text, _short, _some,
                                   _toml_value, dump_toml, read_universe)
from dualpath.config_market import MarketSettings
# a path's settings live in config_paths; every name stays importable from here
from dualpath.config_paths import (Draws, Engine, ExpectedIdentity,  # noqa: F401
                                   MeasuredSpeed, ServingPath, SimProfile,
                                   unreportable_pins)
from dualpath.errors import ConfigError
from dualpath.strict import StrictModel
from dualpath.telemetry.settings import CostSettings, TelemetrySettings
from dualpath.places import real_path


class Experiment(StrictModel):
    """What is scored each night, and how often."""

    name: str = Field("dualpath",
                      description="Experiment name (1-64 letters, digits, '_', '.', '-', "
                      "starting with a letter or digit); runs, warehouse rows, run folders "
                      "and deployments are keyed by it.")
    universe: list[str] | None = Field(None, description="Tickers scored every night (inline).")
    universe_file: Path | None = Field(
        None, description="A text file with one ticker per line ('#' comments allowed); "
        "relative paths are relative to the config file.")
    draws: Draws = Field(3, ge=1, le=50, description="Independent scorings of each ticker per "
                       "night (each path's default; paths.<name>.draws overrides).")
    prefix_affinity: bool = Field(True, description="Send a unit's calls to the slot whose "
                                  "prompt cache holds their shared prefix (llama-server "
                                  "id_slot; call order for vLLM's prefix cache).")
    horizons: list[Annotated[int, Field(ge=1, le=260)]] = Field(
        default_factory=lambda: [1, 5, 20],
        description="Forward-return horizons in trading days (1-20 distinct values).")

    _plain = field_validator("universe_file")(lambda v: plain_path(v))

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", v):
            raise ValueError("use 1-64 ASCII letters, digits, '_', '.' and '-', starting "
                             "with a letter or digit (it names run folders and "
                             "deployments), e.g. 'dualpath-2027'")
        return v

    @field_validator("horizons")
    @classmethod
    def _distinct(cls, v: list[int]) -> list[int]:
        if not 1 <= len(v) <= 20:
            raise ValueError(f"{len(v)} horizons; list 1 to 20 horizons in trading days, "
                             "e.g. [1, 5, 20]")
        dupes = sorted(h for h, n in Counter(v).items() if n > 1)
        if dupes:
            raise ValueError(f"horizon(s) {dupes} listed twice; list each once")
        return v

    @model_validator(mode="after")
    def _one_universe(self) -> "Experiment":
        if (self.universe is None) == (self.universe_file is None):
            raise ValueError("give exactly one of 'universe' (a list) or 'universe_file' (a path)")
        if self.universe is not None:
            _check_tickers(self.universe, "universe")
        return self


class Sampling(StrictModel):
    """Sampling parameters; every one is sent explicitly to every engine.

    Defaults are the user's pipeline. llama-server and vLLM fill unsent parameters with
    different defaults (top_k 40 / min_p 0.05 vs. the model's generation_config), so leaving
    any out would make the two paths sample differently.
    """

    temperature: float = Field(0.7, ge=0.0, le=2.0, description="Softmax temperature.")
    top_p: float = Field(0.8, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    top_k: int = Field(20, ge=0, description="Top-k cut-off (0 = off).")
    min_p: float = Field(0.0, ge=0.0, le=1.0, description="Min-p cut-off (0 = off).")
    presence_penalty: float = Field(1.5, ge=-2.0, le=2.0,
                                    description="Presence penalty over the whole output.")
    max_tokens: int = Field(4096, ge=1, le=131072,
                            description="Generation cap per call; a call that hits it is a runaway.")
    seed_policy: Literal["per-draw", "none"] = Field(
        "per-draw", description="'per-draw': each call's seed is derived from (base_seed, night, "
        "ticker, draw, agent), so draws differ and a rerun repeats them; 'none': no seed sent.")
    base_seed: int = Field(20260101, ge=0, description="Root of the derived seeds.")
    thinking: Literal["off", "on"] = Field(
        "off", description="'off': the chat template's enable_thinking = false on every path; "
        "'on': the model thinks, and its thinking is stored apart from the answer (never "
        "quoted into later prompts, never read for a grade). The same on both paths.")


class WarehouseSettings(StrictModel):
    """Where results live."""

    path: Path = Field(Path(".dualpath/warehouse.duckdb"), description="DuckDB file.")
    runs_dir: Path = Field(Path(".dualpath/runs"), description="Run folders (journals, logs).")
    journal_store: str | None = Field(None, description="Where workers on other hosts ship "
                                      "their journals: a folder or an fsspec URL.")

    _plain = field_validator("path", "runs_dir")(lambda v: plain_path(v))


class PipelineSettings(StrictModel):
    """Which scoring pipeline runs per unit."""

    name: str = Field("builtin", description="'builtin' or 'package.module:function'.")
    history_days: int = Field(60, ge=5, le=2000, description="Trading days of history in prompts.")
    documents_dir: Path | None = Field(
        None, description="Optional folder of TICKER.md documents added to analyst prompts.")

    _plain = field_validator("documents_dir")(lambda v: plain_path(v))

    @field_validator("name")
    @classmethod
    def _ref(cls, v: str) -> str:
        if v != "builtin" and (":" not in v or v.startswith(":") or v.endswith(":")):
            raise ValueError("must be 'builtin' or 'package.module:function'")
        return v


class ComparisonSettings(StrictModel):
    """The path comparison: which path is the candidate, and the non-inferiority question."""

    baseline: str | None = Field(None, description="The reference path (default: 'main' if "
                                 "present, else the first path).")
    candidate: str | None = Field(None, description="The cheaper path whose signal is judged "
                                  "against the baseline (default: 'backup', else the second).")
    margin: float = Field(0.03, gt=0, le=1, description="Non-inferiority margin δ on RankIC: "
                          "the candidate may be worse than the baseline by at most this much.")
    alpha: float = Field(0.05, gt=0, lt=0.5, description="One-sided significance level.")
    primary_horizon: int | None = Field(None, ge=1, description="The horizon of the primary "
                                        "test (default: the experiment's shortest horizon > 1, "
                                        "else its first); the others are exploratory.")


class ScheduleSettings(StrictModel):
    """The night window: when a night must be done, and what to do when it cannot be."""

    deadline: str | None = Field(
        None, pattern=r"^([01]\d|2[0-3]):[0-5]\d$",
        description="HH:MM in the market's time zone by which the night must end (the next "
        "morning when earlier than the close), e.g. '07:00'; unset: no deadline.")
    over_deadline: Literal["stop", "fewer-draws"] = Field(
        "stop", description="When the measured speed says the night cannot fit: 'stop' scores "
        "until the deadline (the run is partial, never complete); 'fewer-draws' starts only "
        "the draws that fit (draw-major order keeps them whole; the run is still partial).")


class UiSettings(StrictModel):
    """The read-only web viewer (`dualpath ui`) and the links other outputs make to it."""

    host: str = Field("127.0.0.1", description="Address `dualpath ui` listens on (127.0.0.1: "
                      "this machine only; 0.0.0.0 to share it on your own network).")
    port: int = Field(8765, ge=0, le=65535, description="Port `dualpath ui` listens on (0: any "
                      "free port).")
    base_url: str | None = Field(None, pattern=r"^https?://[^\s]+$", description="The viewer's "
                                 "address as others reach it, e.g. 'http://host:8765': the weekly "
                                 "report and `dualpath runs` link each night to its page there.")


class Config(StrictModel):
    """A whole dualpath.toml."""

    experiment: Experiment
    sampling: Sampling = Field(default_factory=Sampling, description="Sampling parameters.")
    paths: dict[str, ServingPath] = Field(description="Serving paths by name, e.g. main, backup.")
    warehouse: WarehouseSettings = Field(default_factory=WarehouseSettings, description="Storage.")
    pipeline: PipelineSettings = Field(default_factory=PipelineSettings, description="Pipeline.")
    market: MarketSettings = Field(default_factory=MarketSettings, description="Prices.")
    comparison: ComparisonSettings = Field(default_factory=ComparisonSettings,
                                           description="How the paths are compared.")
    schedule: ScheduleSettings = Field(default_factory=ScheduleSettings,
                                       description="The night window.")
    ui: UiSettings = Field(default_factory=UiSettings, description="The web viewer.")
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings,
                                         description="GPU energy and state per run.")
    cost: CostSettings = Field(default_factory=CostSettings, description="Energy price.")
    base_dir: Path = Field(Path("."), description="Folder relative paths are resolved against.")
    _universe_read: tuple[Path, list[str]] | None = PrivateAttr(None)   # see tickers()

    @field_validator("paths")
    @classmethod
    def _names(cls, v: dict[str, ServingPath]) -> dict[str, ServingPath]:
        if not v:
            raise ValueError("define at least one path, e.g. [paths.main]")
        seen: dict[str, str] = {}
        for name in v:
            if not (0 < len(name) <= 64 and name.isascii()
                    and name.replace("-", "").replace("_", "").isalnum()):
                raise ValueError(f"path name {_short(name)} may hold only 1-64 ASCII letters, "
                                 "digits, '-' and '_'")
            # run folders and endpoint locks live on file systems that may ignore case
            other = seen.setdefault(name.lower(), name)
            if other != name:
                raise ValueError(f"path names '{other}' and '{name}' differ only in case; "
                                 "rename one")
        return v

    @model_validator(mode="after")
    def _pooled_paths_need_a_store(self) -> "Config":
        pooled = [n for n, p in self.paths.items() if p.work_pool]
        if pooled and not self.warehouse.journal_store:
            raise ValueError(f"paths {', '.join(pooled)} name a work_pool, so their journals "
                             "are written on another host: set [warehouse] journal_store to a "
                             "folder every host mounts or an fsspec URL (e.g. "
                             "\"s3://bucket/dualpath\")")
        return self

    def draws_for(self, path: str) -> int:
        """Draws of each ticker per night on `path`: its own `draws`, else experiment.draws."""
        own = self.paths[path].draws
        return self.experiment.draws if own is None else own

    def path_draws(self) -> dict[str, int]:
        """Each path's draws of a ticker per night."""
        return {n: self.draws_for(n) for n in self.paths}

    def draws_text(self, paths: list[str] | None = None) -> str:
        """'2 draws', or each path's where they differ: '3 draws on main, 2 on backup'."""
        names = list(self.paths) if paths is None else paths
        counts = {n: self.draws_for(n) for n in names}
        if len(set(counts.values())) <= 1:
            return f"{next(iter(counts.values()), self.experiment.draws)} draws"
        first, *rest = counts.items()
        return ", ".join([f"{first[1]} draws on {first[0]}", *(f"{d} on {n}" for n, d in rest)])

    def resolve(self, p: Path) -> Path:
        """A config-relative path made absolute and real (`dualpath.places.real_path`)."""
        return real_path(p if p.is_absolute() else self.base_dir / p)

    def tickers(self) -> list[str]:
        """The universe, from the inline list or the universe file.

        The file is read once per loaded config (and per file): a night asks ~20 times,
        and a universe file edited while a night runs must not give its plan, its price
        check and its ingest different tickers."""
        if self.experiment.universe is not None:
            return list(self.experiment.universe)
        where = self.resolve(self.experiment.universe_file)
        if self._universe_read is None or self._universe_read[0] != where:
            self._universe_read = (where, read_universe(where))
        return list(self._universe_read[1])

    def fingerprint(self) -> str:
        """Hash of everything that changes what a night measures (not where files live).

        "The same config", defined once: the resume guard, each run's `config_hash` and the
        preregistration all compare this. The universe counts by its tickers
        (`universe_sha256`), never by the path of the file that lists them: a universe file
        edited between two segments of a night is another config."""
        # How results are analysed (comparison) and where files live do not change a night.
        # Nor do where prices come from and how files are read: only which market it is.
        price_io = {"prices_file", "prices_dir", "columns", "ticker_from_filename",
                    "date_format", "encoding", "thousands", "source", "symbol_suffix", "backfill_sessions",
                    "refetch_sessions", "max_abs_log_return"}
        # Nor does which worker scores a path, or a sweep's note of its measured speed.
        data = self.model_dump(mode="json", exclude={"warehouse": True, "base_dir": True,
                                                     "comparison": True, "schedule": True,
                                                     "ui": True,     # the viewer's address
                                                     # reading the GPUs and pricing energy
                                                     "telemetry": True, "cost": True,
                                                     "market": price_io,
                                                     "experiment": {"universe",
                                                                    "universe_file"},
                                                     "paths": {"__all__": {"work_pool",
                                                                           "measured", "gpus",
                                                                           "power"}}})
        for p in data["paths"].values():
            # a path's own count, hashed only where it differs from the experiment's (so
            # nights scored before the field existed keep their hash)
            if p.get("draws") in (None, data["experiment"]["draws"]):
                p.pop("draws", None)
        data["experiment"]["universe_sha256"] = universe_sha256(self.tickers())
        return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def universe_sha256(tickers: list[str]) -> str:
    """The universe's identity: SHA-256 of its tickers, one per line, in order."""
    return hashlib.sha256("\n".join(tickers).encode()).hexdigest()


# Where a config can hold a secret: the launched server's environment (under a
# secret-looking name) and its argv (`--api-key sk-...`). dualpath's own settings never do
# (`max_tokens`, `api_key_env` name a number and a variable), so their values are shown.
_SECRET_NAME = re.compile(r"key|token|secret|passw|auth|credential", re.IGNORECASE)
_MAX_PROBLEMS = 15


def _is_secret(loc: tuple, value: object) -> bool:
    parts = [str(p) for p in loc]
    if "launch_env" in parts:
        i = parts.index("launch_env")
        return i + 1 >= len(parts) or bool(_SECRET_NAME.search(parts[i + 1]))
    return "launch" in parts and isinstance(value, str)


def _value_shown(loc: tuple, value: object) -> str:
    """The offending value for a message: never a secret, never a whole table or list."""
    if isinstance(value, (dict, list, tuple)):
        return ""          # a table's problem is in the message; its contents could be huge
    if _is_secret(loc, value):
        return " = <redacted>"
    if isinstance(value, str):
        value = re.sub(r"//[^/@\s]*@", "//<redacted>@", value)   # credentials in a URL
    return f" = {_short(value, 80)}"


def _closest(loc: tuple) -> str | None:
    """The valid key nearest to an unknown one (`tempreature` -> `temperature`)."""
    import difflib

    model: type[BaseModel] = Config
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        if field is None:
            if model is Config or not hasattr(model, "model_fields"):
                model = ServingPath if loc and loc[0] == "paths" else model
            continue
        ann = field.annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else model
    if not isinstance(loc[-1], str) or not hasattr(model, "model_fields"):
        return None
    near = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1, cutoff=0.6)
    return near[0] if near else None


def format_validation_error(err: ValidationError, source: str) -> str:
    """One line per problem: field, bad value, what is allowed (bounded in length: at most
    15 problems, each cut to about 300 characters)."""
    errors = err.errors(include_url=False)
    lines = [f"{_cut(source)}: {len(errors)} problem(s):"]
    for e in errors[:_MAX_PROBLEMS]:
        loc = ".".join(_short(p, 40) if not isinstance(p, str) or len(p) > 40 else p
                       for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        msg = msg if len(msg) <= 300 else msg[:297] + "..."
        if e["type"] == "extra_forbidden":
            near = _closest(e["loc"])
            lines.append(f"  - {loc}: unknown setting; "
                         + (f"did you mean '{near}'?" if near else
                            "remove it or check its spelling"))
        elif e["type"] == "missing":
            lines.append(f"  - {loc}: required but missing")
        else:
            lines.append(f"  - {loc}{_value_shown(e['loc'], e.get('input'))}: {msg}")
    if len(errors) > _MAX_PROBLEMS:
        lines.append(f"  ... and {len(errors) - _MAX_PROBLEMS} more")
    return "\n".join(lines)


def parse_config(data: dict, source: str = "config", base_dir: Path | None = None) -> Config:
    """Validate a config dict; errors become `ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{_cut(source)}: expected a table of settings, got "
                          f"{type(data).__name__}")
    if base_dir is not None:
        data = {**data, "base_dir": base_dir}
    try:
        cfg = Config.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, source)) from None
    except RecursionError:
        raise ConfigError(f"{_cut(source)}: settings nested too deeply") from None
    problems = places(cfg)      # files and folders that exist as the wrong kind
    if problems:
        raise ConfigError("\n".join([f"{_cut(source)}: {len(problems)} problem(s):"]
                                    + [f"  - {loc}: {_cut(msg, 300)}" for loc, msg in problems]))
    return cfg


def load_config(path: Path | str) -> Config:
    """Read and validate a dualpath.toml."""
    path = Path(path)
    text = _read_text(path, f"config file {_cut(str(path))}", ConfigError)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{_cut(str(path))} is not valid TOML: {_cut(str(e))}") from None
    except RecursionError:     # tomllib recurses into nested arrays and inline tables
        raise ConfigError(f"{_cut(str(path))} is not valid TOML: nested too deeply") from None
    if "base_dir" in data:
        raise ConfigError(f"{path}: 'base_dir' is set by dualpath, not in the file; remove it")
    return parse_config(data, str(path), base_dir=path.resolve().parent)
