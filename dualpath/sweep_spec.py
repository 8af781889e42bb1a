"""A sweep of a path's engine settings, read from SPEC.toml, and its expansion into points.

A spec names the path it retunes, the frozen replay set, a base launch argv and the axes to
vary. An axis varies one flag of the argv (its value, or its presence: `true` adds the bare
flag, `false` removes it), or the binary itself (`flag = "binary"`: argv[0], e.g. a Vulkan and
a HIP build). Modes:

* `grid` — every combination of the axes' values;
* `one-at-a-time` — the base point, then each axis value alone with the others at the base
  (how the user swept: one knob at a time);
* `ablation` — the base point, then the base with each flag of `ablate` removed, so each
  flag's effect is measured against its noise band (use `repeats` >= 2).

Placeholders in the argv: `{port}` (a fresh port per point), `{host}`, `{python}` (this
interpreter: simulated servers run as `{python} -m dualpath.sim`), and the launcher's
`{llama_server}` and `{gemma3_270m}`.

    [sweep]
    name = "backup-slots"
    path = "backup"
    replay_set = "runs/replays/demo-2027-04-29-backup-3f2a9c.parquet"
    mode = "grid"
    base = ["{llama_server}", "-m", "{gemma3_270m}", "--host", "{host}", "--port", "{port}",
            "-np", "4", "-c", "8192", "--metrics", "--slots"]
    [[sweep.axes]]
    flag = "-np"
    values = [1, 2, 4, 6, 8]
"""

from __future__ import annotations

import hashlib
import itertools
import tomllib
from pathlib import Path
from typing import Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dualpath.config import ExpectedIdentity, format_validation_error
from dualpath.errors import SweepSpecError
from dualpath.strict import StrictModel

SLOT_FLAGS = ("-np", "--parallel")


AxisValue = str | int | float | bool


class Axis(StrictModel):
    """One setting to vary."""

    flag: str = Field(min_length=1, description="The flag to vary (e.g. '-np', '-ub', '-ts', "
                      "'--mlock'), or 'binary' for argv[0].")
    values: list[AxisValue] = Field(min_length=1, description="Values: a string or number "
                                    "sets `flag value`; true adds the bare flag; false removes "
                                    "it (with its value, if it had one).")


class SweepSpec(StrictModel):
    """What `dualpath sweep` measures."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$", description="Sweep name.")
    path: str = Field(min_length=1, description="The config path this sweep retunes.")
    replay_set: Path = Field(description="The frozen replay set (`dualpath freeze`), relative "
                             "to the spec file.")
    mode: Literal["grid", "one-at-a-time", "ablation"] = Field(
        "grid", description="How the axes are combined (see the module docstring).")
    base: list[str] = Field(min_length=1, description="Launch argv of the base point.")
    axes: list[Axis] = Field(default_factory=list, description="Settings to vary.")
    ablate: list[str] = Field(default_factory=list, description="Ablation mode: flags of "
                              "`base` removed one at a time.")
    slots_flag: str = Field("-np", description="The flag that sets parallel slots ('-np' for "
                            "llama-server, '--slots' for simulated servers).")
    host: str = Field("127.0.0.1", description="Host the launched servers listen on.")
    repeats: int = Field(2, ge=1, le=20, description="Replays per point, each on a fresh "
                         "launch: 2 or more give the noise band a knee and an ablation are "
                         "judged against (1: no band; a knee is then judged on knee_share "
                         "alone).")
    knee_share: float = Field(0.03, gt=0, lt=1, description="The knee: the fewest slots "
                              "within this share of the best aggregate decode throughput.")
    noise_sigmas: float = Field(2.0, gt=0, le=10, description="Ablation: a Δ within this many "
                                "standard errors is 'no measurable effect'.")
    ready_timeout_s: float = Field(600.0, gt=0, le=86400, description="Wait for /health.")
    point_timeout_s: float = Field(7200.0, gt=0, le=7 * 86400, description="A replay still "
                                   "running after this is stopped; the point is incomplete.")
    time_scale: float = Field(1.0, gt=0, le=1, description="Simulated servers: the profile's "
                              "time_scale (wall seconds are divided by it); 1 for real servers.")
    probe_long_tokens: int = Field(3000, ge=16, le=200_000, description="Length of the long "
                                   "verify probe prompt (approximate tokens).")
    expect: ExpectedIdentity = Field(default_factory=ExpectedIdentity, description="Identity "
                                     "every launched server must show (slots are checked "
                                     "against each point's own count).")
    env: dict[str, str] = Field(default_factory=dict, description="Environment overrides for "
                                "the launched servers.")

    @model_validator(mode="after")
    def _check(self) -> "SweepSpec":
        if "{port}" not in " ".join(self.base):
            raise ValueError("base must contain '{port}' (each point gets a fresh port, so a "
                             "client can never reach another sweep's server)")
        if self.mode == "ablation":
            if not self.ablate:
                raise ValueError("mode 'ablation' needs ablate = [flags of base to remove]")
            missing = [f for f in self.ablate if f not in self.base]
            if missing:
                raise ValueError(f"ablate names flags not in base: {missing}")
        elif not self.axes:
            raise ValueError(f"mode '{self.mode}' needs at least one [[sweep.axes]]")
        return self


class Point(BaseModel):
    """One configuration to launch: its argv (placeholders unexpanded) and what differs."""

    model_config = ConfigDict(frozen=True)

    key: str
    label: str
    argv: list[str]
    slots: int
    settings: dict[str, AxisValue]


def load_spec(path: Path | str) -> tuple[SweepSpec, Path]:
    """Read and validate SPEC.toml; returns the spec and the replay set's resolved path."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SweepSpecError(f"sweep spec {path} not found; write one (see `dualpath sweep "
                             "--help` and docs/retuning.md)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SweepSpecError(f"cannot read sweep spec {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SweepSpecError(f"{path} is not valid TOML: {e}") from None
    if not isinstance(data.get("sweep"), dict):
        raise SweepSpecError(f"{path}: put the sweep's settings under a [sweep] table")
    extra = sorted(set(data) - {"sweep"})
    if extra:
        raise SweepSpecError(f"{path}: unknown table(s) {extra}; only [sweep] is read")
    try:
        spec = SweepSpec.model_validate(data["sweep"])
    except ValidationError as e:
        raise SweepSpecError(_problems(e, path)) from None
    replay = spec.replay_set if spec.replay_set.is_absolute() else \
        (path.resolve().parent / spec.replay_set)
    points(spec)     # every point must be launchable: refuse a spec whose points are not
    return spec, replay


def _problems(err: ValidationError, path: Path) -> str:
    """One line per problem; an unknown key names the nearest valid one."""
    import difflib

    text = format_validation_error(err, str(path)).replace("  - ", "  - sweep.")
    for e in err.errors(include_url=False):
        if e["type"] == "extra_forbidden":
            model = Axis if "axes" in e["loc"] else SweepSpec
            near = difflib.get_close_matches(str(e["loc"][-1]), list(model.model_fields), 1, 0.6)
            if near:
                text += f"\n    ({e['loc'][-1]}: did you mean '{near[0]}'?)"
    return text


def set_flag(argv: list[str], flag: str, value: AxisValue) -> list[str]:
    """`argv` with `flag` set to `value` (true: bare flag; false: removed; 'binary': argv[0])."""
    if flag == "binary":
        return [str(value), *argv[1:]]
    if value is False:
        return _remove(argv, flag)
    if flag in argv:    # in place, so a value equal to the base's is the base point itself
        i = argv.index(flag)
        has_value = i + 1 < len(argv) and not _is_flag(argv[i + 1])
        rest = argv[i + 2:] if has_value else argv[i + 1:]
        return argv[:i] + ([flag] if value is True else [flag, _text(value)]) + rest
    return argv + ([flag] if value is True else [flag, _text(value)])


def _remove(argv: list[str], flag: str) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] == flag:
            has_value = i + 1 < len(argv) and not _is_flag(argv[i + 1])
            i += 2 if has_value else 1
            continue
        out.append(argv[i])
        i += 1
    return out


def _is_flag(arg: str) -> bool:
    return arg.startswith("-") and not arg.lstrip("-").replace(".", "").isdigit()


def _text(v: AxisValue) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def slots_of(argv: list[str], slots_flag: str) -> int | None:
    """The slot count an argv asks for (None: it does not say)."""
    flags = (slots_flag, *SLOT_FLAGS) if slots_flag in SLOT_FLAGS else (slots_flag,)
    for i, a in enumerate(argv[:-1]):
        if a in flags:
            try:
                return int(argv[i + 1])
            except ValueError:
                return None
    return None


def _combos(spec: SweepSpec) -> list[dict[str, AxisValue]]:
    if spec.mode == "grid":
        names = [a.flag for a in spec.axes]
        return [dict(zip(names, vals)) for vals in
                itertools.product(*(a.values for a in spec.axes))]
    if spec.mode == "one-at-a-time":
        return [{}] + [{a.flag: v} for a in spec.axes for v in a.values]
    return [{}] + [{f: False} for f in spec.ablate]


def points(spec: SweepSpec) -> list[Point]:
    """The distinct points of the sweep, in order (a value equal to the base is one point)."""
    out: dict[str, Point] = {}
    for settings in _combos(spec):
        argv = list(spec.base)
        for flag, value in settings.items():
            argv = set_flag(argv, flag, value)
        slots = slots_of(argv, spec.slots_flag)
        if slots is None or slots < 1:
            raise SweepSpecError(f"point {settings or 'base'} has no slot count: put "
                                 f"'{spec.slots_flag} N' in base (dualpath keeps exactly the "
                                 "server's slots in flight)")
        key = hashlib.sha256(orjson.dumps(argv)).hexdigest()[:12]
        label = ", ".join(f"{k}={_text(v)}" if not isinstance(v, bool) else
                          (k if v else f"no {k}") for k, v in settings.items()) or "base"
        out.setdefault(key, Point(key=key, label=label, argv=argv, slots=slots,
                                  settings=settings))
    return list(out.values())


def spec_hash(spec: SweepSpec, replay_hash: str) -> str:
    """A sweep's id: what it measures (spec and replay set), so a rerun resumes it."""
    data = spec.model_dump(mode="json", exclude={"replay_set"})
    return hashlib.sha256(orjson.dumps({"spec": data, "replay": replay_hash},
                                       option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
