"""The two ends of retuning a path: freezing a night's requests, and verifying a path's speed.

`freeze` writes N tickers' recorded requests as a content-hashed replay set (one Parquet
file) and notes it in the warehouse. `verify` is the user's reproducible check: the probe's
short and long prompt through the path's running server (after its identity check), decode
and prefill tok/s compared with the `[paths.X.measured]` block within a tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

import httpx

from dualpath.config import Config
from dualpath.errors import UserError
from dualpath.identity import auth_headers
from dualpath.night import api_key
from dualpath.replay import PROBE_MAX_TOKENS, ProbeResult, probe
from flows.runner import check_identity
from warehouse import sweeps as store
from warehouse.db import reader, writer


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
    """One figure of `verify`: what the measured block says, what the server does now."""

    what: str
    measured: float
    now: float | None
    regressed: bool


async def verify(cfg: Config, path: str, tolerance: float,
                 long_tokens: int | None = None) -> tuple[list[Verdict], ProbeResult]:
    """Probe the path's server and compare with its measured block (single-request basis)."""
    if path not in cfg.paths:
        raise UserError(f"no path named '{path}' in the config; paths: {list(cfg.paths)}")
    sp = cfg.paths[path]
    m = sp.measured
    if m is None or m.probe_prefill_tps is None or m.probe_decode_tps is None:
        raise UserError(f"path '{path}' has no [paths.{path}.measured] block with "
                        "probe_prefill_tps and probe_decode_tps; run `dualpath sweep` and "
                        "merge its proposal.toml (or add the block by hand)")
    if not sp.base_url:
        raise UserError(f"path '{path}' has no base_url: verify checks a running server; set "
                        "base_url to where it listens")
    n = long_tokens or m.probe_long_tokens or 3000
    scale = sp.sim.time_scale if sp.engine == "sim" else 1.0
    async with httpx.AsyncClient(headers=auth_headers(api_key(cfg, path)), timeout=10.0) as http:
        await check_identity(cfg, path, http, sp.base_url)
        res = await probe(http, sp.base_url, sp.dialect, sp.model, n, PROBE_MAX_TOKENS, scale)
    out = []
    for what, measured, now in (("decode tok/s (single request, short prompt)",
                                 m.probe_decode_tps, res.decode_tps),
                                (f"prefill tok/s (single request, ~{n}-token prompt)",
                                 m.probe_prefill_tps, res.prefill_tps)):
        out.append(Verdict(what, measured, now,
                           now is None or now < measured * (1 - tolerance)))
    return out, res
