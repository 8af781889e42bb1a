"""The preregistered comparison: what must be fixed before night 1, and its canonical hash.

A plan file (TOML, see deploy/prereg.example.toml) names the primary hypothesis as one
explicit test, the exploratory secondaries, the universe (its hash), the draws, the config
fingerprint of each path, the window, the exclusion rules, the inference method and the
interim rule. Its hash is SHA-256 over the canonical JSON of the *validated* plan, so
reformatting the file does not change it and any change of content does.

`dualpath prereg draft` writes a plan from a config (fingerprints and universe hash filled in);
`dualpath prereg freeze` records the hash in the warehouse; every night and every report then
compares the running config with the frozen plan.
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Literal

import orjson
from pydantic import Field, ValidationError, model_validator

from dualpath.config import Config, dump_toml, format_validation_error, universe_sha256
from dualpath.errors import ConfigError
from dualpath.strict import StrictModel
from dualpath.evals import power as pw



class Hypothesis(StrictModel):
    """One test of candidate vs baseline RankIC at one horizon."""

    horizon: int = Field(ge=1, le=260, description="Forward-return horizon in sessions.")
    test: Literal["non-inferiority", "equivalence", "difference"] = Field(
        "non-inferiority", description="non-inferiority: the one-sided lower confidence bound "
        "of ΔIC = IC(candidate) − IC(baseline) lies above −margin; equivalence: TOST within "
        "±margin; difference: ΔIC ≠ 0 (two-sided).")
    margin: float = Field(0.03, gt=0, le=1, description="δ on the RankIC scale.")
    alpha: float = Field(0.05, gt=0, lt=0.5, description="One-sided level (two-sided for "
                         "'difference').")
    preserve: float | None = Field(None, gt=0, lt=1, description="The margin as a share of "
                                   "the baseline's IC the candidate must keep: margin = (1 − "
                                   "preserve) × baseline_ic_low (the fixed-margin 95–95 "
                                   "method); none: the margin is given on the RankIC scale.")
    baseline_ic_low: float | None = Field(None, gt=0, le=1, description="The lower 95% "
                                          "confidence bound of the baseline's IC at this "
                                          "horizon over the pilot nights the margin was set "
                                          "from.")


class InterchangeTest(StrictModel):
    """The primary question: are the candidate's grades interchangeable with the baseline's?
    (`evals.interchange`; RankIC's primary hypothesis is then the confirmatory follow-up.)"""

    limit: float = Field(0.5, gt=0, lt=1, description="Share of the baseline's draw-to-draw "
                         "rank agreement the candidate's draws must keep with the baseline's "
                         "(interchangeable when the one-sided lower bound of ρ_TR − limit·ρ_RR "
                         "is > 0).")
    alpha: float = Field(0.05, gt=0, lt=0.5, description="One-sided level of each decision.")
    nights_for_power: int | None = Field(None, description="Nights the draft computed for the "
                                         "design's power in both decisions (interchangeable "
                                         "when equal, not interchangeable when noise).")
    nights_basis: str | None = Field(None, description="Where nights_for_power came from "
                                     "and how sure it is: resampled from the pilot's grades "
                                     "(power there, the range over resamples) or assumed.")
    looks: list[int] | None = Field(None, description="The planned looks (window nights) of "
                                    "the group-sequential design (`evals.sequential`, "
                                    "O'Brien-Fleming alpha spending); none: one look at the "
                                    "window's end.")


class Window(StrictModel):
    """When the comparison runs."""

    first_night: date = Field(description="The first session of the window.")
    nights: int = Field(ge=2, le=500, description="Trading nights in the window.")


class PathFingerprint(StrictModel):
    """What must not change on a path during the window."""

    engine: str
    model: str
    slots: int
    build: str | None = None
    sha256: str = Field(description="Hash of the path's engine, model, expected identity, "
                        "slots, launch argv and the sampling parameters.")
    draws: int | None = Field(None, ge=1, le=50, description="Draws per ticker per night on "
                              "this path, where it has its own (none: the plan's draws).")


class Exclusions(StrictModel):
    """What is left out of the primary analysis (fixed before night 1)."""

    incomplete_runs: Literal["exclude"] = "exclude"
    contaminated_calls: Literal["exclude"] = "exclude"
    parse_failures: Literal["failed draw"] = Field(
        "failed draw", description="A unit without a grade counts as a failed draw: it is "
        "left out of the ticker's mean score and counted in the failed share.")
    runaways: Literal["keep, flagged"] = "keep, flagged"


INFERENCE_METHODS = {
    "t-nonoverlapping": "Student's t on the nights whose h-session return windows do not "
                        "overlap (evals.inference), ΔIC paired on the tickers graded on both "
                        "paths each night",
}


class Design(StrictModel):
    """What the window was sized by: the power wanted and the noise assumed, per horizon."""

    power: float = Field(0.8, gt=0, lt=1, description="Power the window is sized for.")
    sd_delta: dict[str, float] = Field(description="Assumed sd of one night's ΔIC, per "
                                       "horizon (keys: sessions).")
    sd_source: str = Field(description="Where the sd came from: pilot nights or an assumption.")
    sd_df: dict[str, float] = Field(default_factory=dict, description="Degrees of freedom of "
                                    "each pilot-estimated sd (keys: sessions); power at "
                                    "those horizons is predictive, averaged over the sd's "
                                    "sampling distribution. Absent: the sd is assumed or "
                                    "given, and power is at that sd.")
    false_reassurance: float | None = Field(None, ge=0, le=1, description="P(a candidate "
                                            "with no signal passes the RankIC primary), given "
                                            "the baseline's IC (`main_ic_source`).")
    main_ic_source: str | None = Field(None, description="The baseline's IC the false-"
                                       "reassurance rate is computed at: pilot or assumed.")

    def sd(self, horizon: int) -> float | None:
        return self.sd_delta.get(str(horizon))


class Plan(StrictModel):
    """A preregistered comparison."""

    experiment: str = Field(description="The experiment name the plan governs.")
    title: str = Field("", description="One line saying what is compared.")
    baseline: str = Field(description="The reference path.")
    candidate: str = Field(description="The cheaper path judged against the baseline.")
    primary: Hypothesis = Field(description="The one confirmatory test.")
    secondary: list[Hypothesis] = Field(default_factory=list,
                                        description="Exploratory tests (Holm-adjusted).")
    universe_sha256: str = Field(description="SHA-256 of the universe, one ticker per line.")
    tickers: int = Field(ge=2, description="Tickers in the universe.")
    draws: int = Field(ge=1, le=50, description="Draws per ticker per night (each path's, "
                       "unless its fingerprint has its own).")
    window: Window
    paths: dict[str, PathFingerprint] = Field(description="Fingerprint per path.")
    exclusions: Exclusions = Field(default_factory=Exclusions)
    inference: str = Field(
        "t-nonoverlapping", description="The inference method: one of INFERENCE_METHODS "
        "(freezing refuses any other).")
    design: Design | None = Field(None, description="Power and the assumed noise the "
                                  "window was sized by (`dualpath prereg draft`).")
    interchange: InterchangeTest | None = Field(None, description="The primary question, "
                                                "interchangeability of grades; the RankIC "
                                                "primary is its confirmatory follow-up.")
    interim: Literal["descriptive"] = Field(
        "descriptive", description="Weekly looks are descriptive: no early decision.")
    on_deviation: Literal["record", "refuse"] = Field(
        "record", description="A night whose config differs from the plan: recorded as a "
        "deviation (and left out of the confirmatory result), or refused.")

    @model_validator(mode="after")
    def _paths(self) -> "Plan":
        for name in (self.baseline, self.candidate):
            if name not in self.paths:
                raise ValueError(f"path '{name}' has no fingerprint under [paths.{name}]")
        if self.baseline == self.candidate:
            raise ValueError("baseline and candidate must be different paths")
        return self

    def draws_for(self, path: str) -> int:
        """The draws per night the plan freezes for `path`."""
        fp = self.paths.get(path)
        return self.draws if fp is None or fp.draws is None else fp.draws

    def hypotheses(self) -> list[Hypothesis]:
        return [self.primary, *self.secondary]

    def sha256(self) -> str:
        """The canonical hash: the validated plan as sorted JSON."""
        data = self.model_dump(mode="json")
        # plans frozen before a field existed hash as they did
        if data.get("design") is None:
            data.pop("design", None)
        else:
            for k in ("false_reassurance", "main_ic_source", "sd_df"):
                if data["design"].get(k) in (None, {}):
                    data["design"].pop(k, None)
        for h in (data["primary"], *data["secondary"]):
            for k in ("preserve", "baseline_ic_low"):
                if h.get(k) is None:
                    h.pop(k, None)
        if data.get("interchange") is None:
            data.pop("interchange", None)
        for fp in data["paths"].values():
            if fp.get("draws") is None:
                fp.pop("draws", None)
        return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


def path_fingerprint(cfg: Config, name: str) -> PathFingerprint:
    """What a night on this path measures, as a hash (sampling included: it changes grades)."""
    sp = cfg.paths[name]
    data = {"engine": sp.engine, "model": sp.model, "slots": sp.slots,
            "expect": sp.expect.model_dump(mode="json"), "launch": sp.launch,
            "grade_format": sp.grade_format, "sim": sp.sim.model_dump(mode="json")
            if sp.engine == "sim" else None,
            "sampling": cfg.sampling.model_dump(mode="json"), "pipeline": cfg.pipeline.name}
    digest = hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return PathFingerprint(engine=sp.engine, model=sp.model, slots=sp.slots,
                           build=sp.expect.build, sha256=digest, draws=sp.draws)


def load_plan(path: Path) -> Plan:
    """Read and validate a plan file; problems are `ConfigError`s naming the field."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"plan file {path} not found; write one with `dualpath prereg draft`")
    except (UnicodeDecodeError, IsADirectoryError):
        raise ConfigError(f"plan file {path} is not a UTF-8 text file")
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}")
    try:
        return Plan.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, str(path))) from None


@dataclass(frozen=True)
class Sizing:
    """A window sized by its power: the table per horizon and what it proposes."""

    rows: list[dict]                  # evals.power.power_table rows
    design: Design
    primary: int                      # proposed primary horizon
    margin: float                     # proposed margin δ
    test: str = "non-inferiority"


def size_window(cfg: Config, nights: int, sd: dict[int, float] | None = None,
                sd_source: str | None = None, power: float = 0.8,
                margin: float | None = None, test: str = "non-inferiority",
                sd_df: dict[int, float] | None = None) -> Sizing:
    """Power per horizon for a window of `nights` nights, from pilot or assumed sds; proposes
    the primary (the horizon with the smallest detectable ΔIC) and a margin it can show.
    `sd_df`: degrees of freedom of the sds a pilot estimated (their power is predictive)."""
    horizons = cfg.experiment.horizons
    if not sd:
        n = len(cfg.tickers())
        sd = {h: pw.null_sd_delta(n) for h in horizons}
        sd_source = (f"assumed, no pilot: sd of one night's RankIC 1/√(N−1) for N={n} "
                     "tickers, the two paths' ICs correlated 0.5")
    chosen = margin if margin is not None else cfg.comparison.margin
    alpha = cfg.comparison.alpha
    sd_df = {h: v for h, v in (sd_df or {}).items() if h in sd}
    rows = pw.power_table({h: sd[h] for h in horizons if h in sd}, nights, chosen, alpha,
                          power, test, sd_df)
    primary, proposed = pw.propose(rows, chosen, power)
    if margin is not None or proposed > 1:
        proposed = chosen                 # the user's margin, or none this window can show
    design = Design(power=power, sd_delta={str(h): round(float(v), 6) for h, v in sd.items()
                                           if h in horizons}, sd_source=sd_source or "given",
                    sd_df={str(h): round(float(v), 3) for h, v in sd_df.items()
                           if h in horizons})
    return Sizing(rows, design, primary, proposed, test)


def draft_plan(cfg: Config, first_night: date, nights: int, sizing: Sizing | None = None,
               primary: int | None = None, margin: float | None = None,
               pilot=None, preserved=None) -> Plan:
    """A plan from the config as it is now, sized by `sizing` (default: the assumed noise):
    interchangeability of grades as the primary question, the proposed RankIC primary and
    margin unless given as its follow-up, and the RankIC plan's false-reassurance rate; the
    user edits, then freezes. ``pilot``: a `dualpath.prereg_design.Pilot`; ``preserved``: a
    `dualpath.prereg_design.PreservedMargin`, the primary's margin as a share of the
    baseline's IC kept (it sets δ)."""
    c = cfg.comparison
    names = list(cfg.paths)
    baseline = c.baseline or ("main" if "main" in names else names[0])
    candidate = c.candidate or ("backup" if "backup" in names else names[-1])
    sizing = sizing or size_window(cfg, nights, margin=margin)
    horizons = cfg.experiment.horizons
    primary_h = primary or sizing.primary
    delta = margin if margin is not None else sizing.margin
    keep = {}
    if preserved is not None:
        delta = preserved.margin
        keep = {"preserve": preserved.preserve, "baseline_ic_low": round(preserved.low, 6)}
    from dualpath.prereg_design import false_reassurance, interchange_design

    tickers = cfg.tickers()
    rate, source = false_reassurance(sizing.test, primary_h, nights, delta, c.alpha,
                                     len(tickers), pilot.main_ic.get(primary_h) if pilot
                                     else None)
    design = sizing.design.model_copy(update={
        "false_reassurance": round(rate, 4) if math.isfinite(rate) else None,
        "main_ic_source": source if math.isfinite(rate) else None})
    return Plan(
        experiment=cfg.experiment.name, title=f"Is {candidate} as good as {baseline}?",
        baseline=baseline, candidate=candidate,
        primary=Hypothesis(horizon=primary_h, test=sizing.test, margin=delta, alpha=c.alpha,
                           **keep),
        secondary=[Hypothesis(horizon=h, margin=delta, alpha=c.alpha)
                   for h in horizons if h != primary_h],
        universe_sha256=universe_key(tickers), tickers=len(tickers),
        draws=cfg.experiment.draws, window=Window(first_night=first_night, nights=nights),
        paths={n: path_fingerprint(cfg, n) for n in names}, design=design,
        interchange=interchange_design(len(tickers), nights, sizing.design.power, pilot,
                                       alpha=c.alpha, draws=tuple(
                                           cfg.draws_for(n) if n in cfg.paths
                                           else cfg.experiment.draws
                                           for n in (baseline, candidate))))


def testability(plan: Plan) -> list[str]:
    """Why the window cannot test the primary (empty: it can): too few non-overlapping
    nights for any test. Freezing such a plan needs --force and a reason."""
    h = plan.primary.horizon
    m = pw.independent_count(plan.window.nights, h)
    if m >= pw.MIN_INDEPENDENT:
        return []
    need = (pw.MIN_INDEPENDENT - 1) * h + 1
    return [f"the window's {plan.window.nights} nights give {m} non-overlapping night(s) at "
            f"the primary horizon h={h}; its test needs {pw.MIN_INDEPENDENT} ({need} nights)"]


def min_complete_nights(plan: Plan) -> tuple[int, str]:
    """(nights, why): the fewest complete, conforming window nights a confirmatory verdict
    needs once the window has closed, from the plan's own fields. Nights that are not results
    are left out (the plan's exclusions) while the nights left can still run the planned
    test: its primary's test needs `MIN_INDEPENDENT` non-overlapping nights (the rule a
    freeze checks), and the window was sized for `design.power` (or, where the whole window
    gives less, for the whole window's power), which the nights left must still give."""
    p = plan.primary
    need = (pw.MIN_INDEPENDENT - 1) * p.horizon + 1
    why = f"its test's {pw.MIN_INDEPENDENT} non-overlapping nights at h={p.horizon}"
    sd = plan.design.sd(p.horizon) if plan.design else None
    if not sd:
        return need, why
    df = plan.design.sd_df.get(str(p.horizon))
    power = lambda m: pw.planned_power(p.test, sd, m, p.margin, p.alpha, df)  # noqa: E731
    full = pw.independent_count(plan.window.nights, p.horizon)
    target = min(plan.design.power, power(full)) if full >= 2 else plan.design.power
    for m in range(pw.MIN_INDEPENDENT, full + 1):
        if power(m) >= target - 1e-9:
            if m > pw.MIN_INDEPENDENT:
                need, why = (m - 1) * p.horizon + 1, (f"the power {target:.2f} at h={p.horizon} "
                                                     "the window was sized for")
            break
    return need, why


def planned_power(plan: Plan) -> float:
    """The primary's power at its margin over the whole window, from the plan's design
    (predictive where its sd is a pilot's estimate)."""
    sd = plan.design.sd(plan.primary.horizon) if plan.design else None
    p = plan.primary
    m = pw.independent_count(plan.window.nights, p.horizon)
    df = plan.design.sd_df.get(str(p.horizon)) if plan.design else None
    return pw.planned_power(p.test, sd, m, p.margin, p.alpha, df) if sd else math.nan


def executable_problems(plan: Plan, horizons: list[int]) -> list[str]:
    """Fields the analysis could not honour (freezing refuses them, even with --force)."""
    out = []
    if plan.inference not in INFERENCE_METHODS:
        out.append(f"inference {plan.inference!r} is not a method dualpath implements; use "
                   + ", ".join(f"{k!r} ({v})" for k, v in INFERENCE_METHODS.items()))
    seen = [h.horizon for h in plan.hypotheses()]
    for h in sorted(set(seen)):
        if seen.count(h) > 1:
            out.append(f"horizon {h} is tested twice (primary and secondaries must differ)")
        if h not in horizons:
            out.append(f"horizon {h} is not one of the experiment's horizons {horizons}")
    if plan.design is not None:
        missing = [h for h in seen if plan.design.sd(h) is None]
        if missing:
            out.append(f"[design.sd_delta] has no sd for horizon(s) {missing}")
    return out


def plan_toml(plan: Plan, declared: list[str] | tuple = ()) -> str:
    """A plan as a TOML file a person can read and edit; `declared`: what the engines cannot
    do alike with this config (`dualpath.sampling.config_differences`), written as comments
    for the reviewer (the plan's hash does not change)."""
    data = plan.model_dump(mode="json", exclude_none=True)
    data["window"]["first_night"] = plan.window.first_night
    secondary = data.pop("secondary")
    text = dump_toml(data)
    for h in secondary:
        text += "\n\n[[secondary]]\n" + dump_toml(h)
    notes = "".join(f"# declared difference: {d}\n" for d in declared)
    return ("# dualpath preregistration: fix this before night 1, then "
            "`dualpath prereg freeze` it.\n" + notes + text + "\n")


def universe_key(tickers: list[str]) -> str:
    """The universe's hash as a plan holds it: of the sorted tickers, so reordering the
    universe file is no deviation (the same tickers are scored; RankIC has no order)."""
    return universe_sha256(sorted(tickers))


def deviations(plan: Plan, cfg: Config) -> list[str]:
    """Each way the running config differs from the plan (empty: it is the planned one)."""
    out = []
    if cfg.experiment.name != plan.experiment:
        out.append(f"experiment {cfg.experiment.name!r} is not the plan's {plan.experiment!r}")
    tickers = cfg.tickers()
    # plans drafted before universe_key hashed the file's order: either hash is the plan's
    if plan.universe_sha256 not in (universe_key(tickers), universe_sha256(tickers)):
        out.append(f"universe changed ({len(tickers)} tickers; the plan's hash differs)")
    planned = sorted({h.horizon for h in plan.hypotheses()})
    if sorted(set(cfg.experiment.horizons)) != planned:
        # else the label waits on a horizon no longer scored, or another becomes primary
        out.append(f"horizons {sorted(set(cfg.experiment.horizons))} (plan: {planned})")
    own = any(fp.draws is not None for fp in plan.paths.values()) or any(
        cfg.paths[n].draws is not None for n in plan.paths if n in cfg.paths)
    if not own and cfg.experiment.draws != plan.draws:
        out.append(f"draws {cfg.experiment.draws} (plan: {plan.draws})")
    for name in plan.paths if own else ():
        if name in cfg.paths and cfg.draws_for(name) != plan.draws_for(name):
            out.append(f"path {name} draws {cfg.draws_for(name)} (plan: "
                       f"{plan.draws_for(name)})")
    for name, fp in plan.paths.items():
        if name not in cfg.paths:
            out.append(f"path {name} is missing from the config")
            continue
        now = path_fingerprint(cfg, name)
        if now.sha256 != fp.sha256:
            what = [k for k in ("engine", "model", "slots", "build")
                    if getattr(now, k) != getattr(fp, k)]
            out.append(f"path {name} config changed" + (f" ({', '.join(what)})" if what else
                                                        " (sampling, launch or expectations)"))
    return out
