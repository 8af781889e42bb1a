"""The two ends of retuning a path: freezing a night's requests, and verifying a path's speed.

`freeze` writes N tickers' recorded requests as a content-hashed replay set (one Parquet
file) and notes it in the warehouse. `verify` is the user's reproducible check: the probe's
short and long prompt through the path's server (attached, launched or simulated as the
path says; after its identity check), repeated, the median decode and prefill tok/s compared
with the `[paths.X.measured]` block within a tolerance and beyond the repeats' noise.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import httpx

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.identity import auth_headers
from dualpath.night import api_key
from dualpath.replay import PROBE_MAX_TOKENS, ProbeResult, probe
from dualpath.flows.runner import check_identity
from dualpath.warehouse import sweeps as store
from dualpath.warehouse.db import reader, writer


@dataclass(frozen=True)
class Frozen:
    """A written replay set."""

    file: Path
    replay_hash: str
    tickers: int
    calls: int
    prompt_tokens: int


def freeze(cfg: Config, night: date, tickers: int, path: str, out: Path | None = None) -> Frozen:
    """Write `tickers` tickers' recorded requests of `path` on `night` as a replay set."""
    if path not in cfg.paths:
        raise UserError(f"no path named '{path}' in the config; paths: {list(cfg.paths)}")
    db = cfg.resolve(cfg.warehouse.path)
    with reader(db) as con:
        frame = store.freeze_frame(con, cfg.experiment.name, night, path, tickers)
    tmp = (out or cfg.resolve(cfg.warehouse.runs_dir) / "replays" / "pending.parquet")
    h = store.write_replay_set(frame, tmp)
    if out is None:
        target = tmp.with_name(f"{cfg.experiment.name}-{night}-{path}-{h}.parquet")
        tmp.replace(target)
    else:
        target = out
    with writer(db) as con:
        store.record_replay_set(con, frame, h, cfg.experiment.name, night, path, target)
    return Frozen(target, h, int(frame["ticker"].nunique()), len(frame),
                  int(frame["recorded_prompt_tokens"].fillna(0).sum()))


@dataclass(frozen=True)
class Verdict:
    """One figure of `verify`: what the measured block says, what the server does now.

    `samples` are the repeats' figures; `now` is their median and `lo`–`hi` their spread.
    A single probe once read 48.2, 63.5 and 81.8 tok/s on three runs against a measured 59.4,
    so a regression is flagged only beyond that noise: when the median AND every repeat fall
    short of measured × (1 − tolerance)."""

    what: str
    measured: float
    now: float | None
    regressed: bool
    samples: tuple[float, ...] = ()
    lo: float | None = None
    hi: float | None = None


def judge(what: str, measured: float, samples: list[float | None], tolerance: float) -> Verdict:
    """The verdict of one figure over its repeats (see `Verdict`)."""
    got = sorted(x for x in samples if x is not None)
    if not got:
        return Verdict(what, measured, None, True)
    floor = measured * (1 - tolerance)
    median = float(statistics.median(got))
    return Verdict(what, measured, median, median < floor and got[-1] < floor, tuple(got),
                   got[0], got[-1])


async def verify(cfg: Config, path: str, tolerance: float, long_tokens: int | None = None,
                 repeats: int = 3) -> tuple[list[Verdict], list[ProbeResult]]:
    """Probe the path's server `repeats` times and compare the medians with its measured
    block (single-request basis). The server is the one the path names: attached at its
    base_url, launched when the path has a `launch`, simulated for an engine 'sim' path
    without one; it is stopped afterwards when verify started it."""
    if path not in cfg.paths:
        raise UserError(f"no path named '{path}' in the config; paths: {list(cfg.paths)}")
    sp = cfg.paths[path]
    m = sp.measured
    if m is None or m.probe_prefill_tps is None or m.probe_decode_tps is None:
        raise UserError(f"path '{path}' has no [paths.{path}.measured] block with "
                        "probe_prefill_tps and probe_decode_tps; run `dualpath sweep` and "
                        "merge its proposal.toml (or add the block by hand)")
    if not sp.base_url and not (sp.engine == "sim" or sp.launch):
        raise UserError(f"path '{path}' has no base_url: verify checks a running server; set "
                        "base_url to where it listens")
    n = long_tokens or m.probe_long_tokens or 3000
    scale = sp.sim.time_scale if sp.engine == "sim" else 1.0
    results = await _probe_repeats(cfg, path, n, scale, repeats)
    errors = [r.error for r in results if r.error]
    out = [judge("decode tok/s (single request, short prompt)", m.probe_decode_tps,
                 [r.decode_tps for r in results], tolerance),
           judge(f"prefill tok/s (single request, ~{n}-token prompt)", m.probe_prefill_tps,
                 [r.prefill_tps for r in results], tolerance)]
    if errors and len(errors) == len(results):
        raise UserError(f"path '{path}': every probe failed: {errors[0]}")
    return out, results


async def _probe_repeats(cfg: Config, path: str, n: int, scale: float,
                         repeats: int) -> list[ProbeResult]:
    from dualpath.flows.connect import connect

    sp = cfg.paths[path]
    log_dir = cfg.resolve(cfg.warehouse.runs_dir) / "verify" / path
    log_dir.mkdir(parents=True, exist_ok=True)
    async with connect(cfg, path, f"verify/{path}", log_dir) as ep:
        async with httpx.AsyncClient(headers=auth_headers(api_key(cfg, path)),
                                     timeout=60.0) as http:
            await check_identity(cfg, path, http, ep.base_url)
            return [await probe(http, ep.base_url, sp.dialect, sp.model, n, PROBE_MAX_TOKENS,
                                scale) for _ in range(repeats)]
