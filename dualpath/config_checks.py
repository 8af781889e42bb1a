"""Checks of a config against the places it names, so that a config `dualpath check` accepts
is one `dualpath nightly` can run.

The models in `dualpath.config` validate each value alone; these look at what a value means
on this machine: a warehouse path that is a folder, a runs folder that is a file, a file name
with a NUL in it (TOML's "\\u0000" escape), and a config or universe file that is a FIFO or
a device (reading one blocks `check` forever). Each raises `ValueError` with what was wrong
and how to fix it; pydantic turns that into one line of the config error.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from datetime import date
from pathlib import Path


def plain_path(value: Path | None) -> Path | None:
    """A file name without NUL or other control characters (no file system accepts NUL)."""
    if value is None:
        return value
    text = str(value)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError("contains a control character (NUL, newline, ...); give a plain "
                         "file name")
    if len(text) > 4096:
        raise ValueError("is longer than 4096 characters; give a shorter path")
    return value


def date_format_problem(fmt: str) -> str | None:
    """Why `fmt` is no strptime date format ('%Q' and a stray '%' raise only when a file is
    read), or None."""
    from datetime import datetime

    try:
        sample = datetime(2027, 1, 4, 15, 30).strftime(fmt)
        datetime.strptime(sample, fmt)
    except ValueError as e:
        return f"{e}; use strptime directives, e.g. '%d/%m/%Y'"
    if not any(d in fmt for d in ("%Y", "%y", "%d", "%j", "%x", "%F", "%D")):
        return "names no year or day (%Y, %y, %d ...); e.g. '%d/%m/%Y'"
    return None


def _file_above(path: Path) -> Path | None:
    """The first existing ancestor of `path` that is not a folder, if any."""
    for p in path.parents:
        if p.exists():
            return None if p.is_dir() else p
    return None


def write_places(cfg) -> list[tuple[str, str]]:
    """(setting, problem) for the warehouse or runs folder a night cannot create (checked by
    `dualpath check` and before a night, not when a config is read: reading a read-only
    warehouse must still work)."""
    r = cfg.resolve
    return (_cannot_create("warehouse.path", r(cfg.warehouse.path))
            + _cannot_create("warehouse.runs_dir", r(cfg.warehouse.runs_dir)))


def _cannot_create(loc: str, p: Path) -> list[tuple[str, str]]:
    """A missing file or folder whose first existing folder above takes no new file (a
    read-only mount, /proc): `check` once passed `/proc/wh.duckdb` and `nightly` then ended in
    an internal error. Tried by creating (and removing) a file there; an existing place is
    left to its reader, so a read-only warehouse can still be read."""
    if p.exists():
        return []
    above = next((a for a in p.parents if a.exists()), None)
    if above is None or not above.is_dir():
        return []
    try:
        fd, probe = tempfile.mkstemp(dir=above, prefix=".dualpath-probe-")
    except OSError as e:
        if e.errno == errno.EROFS:      # said at the top, with what dualpath writes there
            return []
        return [(loc, f"{p} cannot be created: {above} takes no new file "
                      f"({e.strerror or e}); give a place in a folder you can write")]
    os.close(fd)
    os.unlink(probe)
    return []


def _kind(p: Path) -> str:
    return "a folder" if p.is_dir() else ("a file" if p.is_file() else
                                          "a FIFO, socket or device")


def _file(loc: str, p: Path | None, what: str) -> list[tuple[str, str]]:
    if p is None:
        return []
    if p.exists() and not p.is_file():
        return [(loc, f"{p} is {_kind(p)}; give {what}")]
    above = _file_above(p)
    return [(loc, f"{above} is a file, not a folder; move it or give another place")] \
        if above is not None else []


def _folder(loc: str, p: Path | None) -> list[tuple[str, str]]:
    if p is None:
        return []
    if p.exists() and not p.is_dir():
        return [(loc, f"{p} is {_kind(p)}; give a folder (it is created if missing)")]
    above = _file_above(p)
    return [(loc, f"{above} is a file, not a folder; move it or give another place")] \
        if above is not None else []


def places(cfg) -> list[tuple[str, str]]:
    """(setting, problem) for each file or folder of `cfg` that exists as the wrong kind: a
    warehouse that is a folder, a runs folder that is a file, a universe file that is a FIFO.
    A missing one is left to its reader, which says how to create it."""
    r, m = cfg.resolve, cfg.market
    opt = lambda p: r(p) if p is not None else None
    out = (_file("warehouse.path", r(cfg.warehouse.path), "a file name for the DuckDB "
                 "warehouse, e.g. warehouse.duckdb inside it")
           + _folder("warehouse.runs_dir", r(cfg.warehouse.runs_dir))
           + _file("experiment.universe_file", opt(cfg.experiment.universe_file),
                   "a text file with one ticker per line")
           + _file("market.prices_file", opt(m.prices_file), "a CSV or Parquet file")
           + _folder("market.prices_dir", opt(m.prices_dir))
           + _folder("pipeline.documents_dir", opt(cfg.pipeline.documents_dir)))
    if r(cfg.warehouse.path) == r(cfg.warehouse.runs_dir):
        out.append(("warehouse.runs_dir", "is the warehouse file's own name; give each "
                    "its own place"))
    return out


def open_regular(path: Path):
    """Open a file for reading without blocking: a FIFO's open() waits for a writer forever,
    so the file is opened non-blocking and refused unless it is a regular file. Raises
    `IsADirectoryError` / `ValueError` (not a regular file) / `OSError`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(str(path))
        if not stat.S_ISREG(mode):
            raise ValueError("not a regular file (a FIFO, socket or device)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


# launch arguments that name the model file the server loads (llama-server -m/--model;
# vLLM `serve MODEL` / --model take a local folder or a hub id: only a local-looking one)
_MODEL_FLAGS = ("-m", "--model")


def _model_args(argv: list[str]) -> list[str]:
    out = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in _MODEL_FLAGS]
    out += [a.split("=", 1)[1] for a in argv if a.startswith("--model=")]
    if len(argv) > 2 and argv[1] == "serve" and not argv[2].startswith("-"):
        out.append(argv[2])
    return out


def launch_model_problems(name: str, launch: list[str] | None, base_dir: Path) -> list[str]:
    """A launch argv whose model file is missing: `check` once passed it, and `doctor
    --launch` then printed 25 lines per path ending "run `dualpath check` first"."""
    out = []
    for arg in _model_args(launch or []):
        if "{" in arg:                 # a placeholder dualpath fills ({gemma3_270m})
            continue
        local = arg.startswith(("/", "./", "../", "~")) or arg.endswith(".gguf")
        path = Path(arg).expanduser()
        path = path if path.is_absolute() else Path(base_dir) / path
        if local and not path.exists():
            out.append(f"paths.{name}.launch: the model file {path} does not exist; fix "
                       "its -m/--model argument, or download the model there")
    return out


def universe_problem(n_tickers: int) -> str | None:
    """A universe too small for the quality question ever to be answered."""
    from dualpath.evals.rankic import MIN_TICKERS

    if n_tickers >= MIN_TICKERS:
        return None
    return (f"experiment: the universe has {n_tickers} ticker(s), and RankIC needs at least "
            f"{MIN_TICKERS} priced tickers a night: no night could ever answer the quality "
            f"question; give the universe {MIN_TICKERS} or more tickers")


def unanalysable(cfg) -> str | None:
    """Why no night of `cfg` could ever be analysed for quality (a universe below RankIC's
    minimum: a plan with δ = 0.27 was frozen on one, and two matured nights later `metrics`
    still said "insufficient nights (n=0, need 4)"), else None."""
    return universe_problem(len(cfg.tickers()))


def baseline_draws_problem(cfg) -> str | None:
    """Why the interchangeability question cannot be answered at the baseline's draws (it
    compares backup-main disagreement with main-main: main needs two draws), else None."""
    names = list(cfg.paths)
    if len(names) < 2:
        return None
    base = cfg.comparison.baseline or ("main" if "main" in names else names[0])
    if base not in cfg.paths or cfg.draws_for(base) >= 2:
        return None
    return (f"paths.{base} scores 1 draw a night: interchangeability compares the other "
            f"path's disagreement with {base} against {base}'s own draw-to-draw "
            f"disagreement, which needs >= 2 draws on {base} (set paths.{base}.draws = 2 or "
            "more; the other path may keep 1)")


def refuse_unanalysable(cfg) -> None:
    """Raise `ConfigError` (one line) when `unanalysable` says why."""
    from dualpath.errors import ConfigError

    if (why := unanalysable(cfg)) is not None:
        raise ConfigError(why)


SYNTHETIC_IMPORT_DAYS = 400   # sessions of the synthetic market a first night imports


def scheduled_prices_problem(cfg, today: date) -> str | None:
    """Why the nights a schedule would score from `today` on (the next week's sessions) have
    no prices source, else None: no `[market]` prices_file, prices_dir or online `source`,
    or a synthetic market that starts too late for `history_days` before them or ends
    before them. `deploy/local-llama.toml` as shipped scored a night the synthetic market
    did not reach on its first trigger."""
    from datetime import timedelta

    from dualpath.market import trading_calendar

    m, week = cfg.market, today + timedelta(days=7)
    if m.source != "files" or m.prices_file is not None or m.prices_dir is not None:
        return None
    if m.synthetic_seed is None:
        return (f"market: a scheduled night from {today} on has no prices source; set "
                "[market] prices_file, prices_dir or source (or import them nightly with "
                "`dualpath prices import FILE` before the schedule fires)")
    days = trading_calendar(m.synthetic_start, SYNTHETIC_IMPORT_DAYS)
    history = cfg.pipeline.history_days
    usable = days[min(history, len(days) - 1)]
    if usable <= today and week <= days[-1]:
        return None
    start = today - timedelta(days=history * 8 // 5 + 14)
    return (f"market: the synthetic market's prices run {usable} (after {history} sessions of "
            f"history) to {days[-1]}, so the schedule's next nights ({today} to {week}) have "
            f"no prices; set [market] synthetic_start = {start}, or point prices_file, "
            "prices_dir or source at real prices")


def deployed_now(cfg) -> date:
    """Today in the market's time zone: the first night a schedule made now could score."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    return datetime.now(ZoneInfo(cfg.market.timezone)).date()


def refuse_unscheduled_prices(cfg, today: date | None = None) -> None:
    """Raise `ConfigError` (one line) when `scheduled_prices_problem` says why."""
    from dualpath.errors import ConfigError

    if (why := scheduled_prices_problem(cfg, today or deployed_now(cfg))) is not None:
        raise ConfigError(why)
