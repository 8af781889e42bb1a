"""A path's GPUs read while it scores (`dualpath.telemetry`), and the segment's record of
them appended to `telemetry.jsonl` beside its journal, which ingest stores
(`warehouse.energy`).

The idle floor is read first, before the first unit starts (the server loaded, nothing in
flight). A path whose GPUs cannot be read still gets its record: the reason, so the night
says "energy unknown", never 0 J.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from dataclasses import asdict
from pathlib import Path
from typing import AsyncIterator

import orjson

from dualpath.config import Config
from dualpath.telemetry import NoCounters, Sampler, shared_gpus, source_for, is_local
from dualpath.telemetry import path_gpus
from dualpath.telemetry.readers import link_text

log = logging.getLogger(__name__)

FILE = "telemetry.jsonl"


def _shared(cfg: Config, path: str) -> list[str]:
    host = lambda n: "local" if is_local(cfg.paths[n].base_url) else cfg.paths[n].base_url
    return shared_gpus(cfg.paths, host).get(path, [])


@contextlib.asynccontextmanager
async def path_telemetry(cfg: Config, work, base_url: str, client) -> AsyncIterator[None]:
    """Read the path's GPUs for as long as the block runs; append the segment's record."""
    ts, sp = cfg.telemetry, cfg.paths[work.path]
    rec = {"run_id": work.run_id, "segment": work.segment, "host": socket.gethostname(),
           "gpus": path_gpus(sp), "shared_with": _shared(cfg, work.path)}
    if not ts.enabled:
        rec["unknown"] = "telemetry is off ([telemetry] enabled = false)"
        _append(work.journal.parent / FILE, rec)
        yield
        return
    sampler = None
    try:
        src = await asyncio.to_thread(source_for, sp, base_url,
                                      lambda: getattr(client, "in_flight", 0),
                                      ts.drm_root())
        # a simulated GPU integrates its busy slots between reads: at a compressed clock a
        # night lasts seconds, so it is read more often (its reads cost next to nothing)
        sim = sp.engine == "sim"
        sampler = Sampler(src, max(ts.hz, 20.0) if sim else ts.hz, ts.max_samples,
                          name=work.path)
        rec["info"] = [asdict(i) for i in await asyncio.to_thread(src.info)]
        idle_s = min(ts.idle_s, 0.2) if sim else ts.idle_s
        await asyncio.to_thread(sampler.measure_idle, idle_s)
        sampler.start()
    except NoCounters as e:
        rec["unknown"] = str(e)
    except Exception as e:        # a reader's fault must not cost the night its scores
        log.warning("path %s: GPU telemetry failed to start: %s", work.path, e)
        rec["unknown"] = f"the GPU reader failed: {type(e).__name__}: {e}"
        sampler = None
    rec["started_wall"] = time.time()
    try:
        yield
    finally:
        if sampler is not None and "unknown" not in rec:
            rec.update(await _finish(sampler, work.path))
        rec["ended_wall"] = time.time()
        _append(work.journal.parent / FILE, rec)


async def _finish(sampler: Sampler, path: str) -> dict:
    """The segment's summary (the sampler states a reader's faults itself; anything else
    that goes wrong here is said once and costs the segment its joules, not its record)."""
    try:
        summary = await asyncio.to_thread(sampler.stop)
    except Exception as e:        # noqa: BLE001 - telemetry never breaks a night's output
        log.warning("path %s: GPU telemetry could not be summed: %s: %s", path,
                    type(e).__name__, e)
        return {"unknown": f"the GPU telemetry could not be summed: {type(e).__name__}: {e}"}
    with contextlib.suppress(Exception):
        sampler.src.close()
    st = sampler.baseline[0] if sampler.baseline else None
    return {"summary": asdict(summary),
            "link": link_text(st.pcie_gen, st.pcie_width) if st else None}


def _append(file: Path, rec: dict) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file, "ab") as f:
        f.write(orjson.dumps(rec, default=str) + b"\n")
