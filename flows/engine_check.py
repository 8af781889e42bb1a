"""Each attached path's server proven to be of its path's engine, before a night starts
(`dualpath nightly`) or on request (`dualpath check --connect`).

A launched path's server does not run yet: the night proves it once launched
(`flows.runner.check_identity`), as `doctor --launch` does.
"""

from __future__ import annotations

import asyncio

import httpx

from dualpath.config import Config
from dualpath.engines.proof import ServerReplies, engine_mismatch
from dualpath.identity import auth_headers


def attached(cfg: Config) -> list[str]:
    """The paths whose server runs without dualpath starting it (a base_url, no launch)."""
    return [name for name, sp in cfg.paths.items() if sp.base_url and not sp.launch]


async def _one(cfg: Config, name: str) -> tuple[str | None, bool]:
    from dualpath.night import api_key

    sp = cfg.paths[name]
    async with httpx.AsyncClient(headers=auth_headers(api_key(cfg, name)),
                                 timeout=5.0) as http:
        replies = ServerReplies(http, sp.base_url)
        wrong = await engine_mismatch(http, sp.base_url, sp.dialect, replies)
        answered = await replies.json("/v1/models") is not None
    return (None if wrong is None else f"path {name}: {wrong}"), answered


def engine_mismatches(cfg: Config) -> dict[str, tuple[str | None, bool]]:
    """{attached path: (why its server is not of its engine, None where it is or where it
    does not answer; whether it answered)}: the night reports an unanswering one itself."""
    async def run() -> list[tuple[str | None, bool]]:
        return await asyncio.gather(*(_one(cfg, n) for n in attached(cfg)))

    return dict(zip(attached(cfg), asyncio.run(run())))
