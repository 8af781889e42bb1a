"""Run one simulated server in its own process: `python -m dualpath.sim --slots 4 --profile '{}'`.

Prints `listening on http://HOST:PORT` once it accepts connections, then serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import date

import uvicorn

from dualpath.config import SimProfile
from dualpath.sim.server import SimServer, build_app


async def _serve(args: argparse.Namespace) -> None:
    sim = SimServer(SimProfile.model_validate_json(args.profile), args.slots,
                    loading_s=args.loading_s, market_start=date.fromisoformat(args.market_start),
                    log_path=args.log_file)
    cfg = uvicorn.Config(build_app(sim), host=args.host, port=args.port, log_level="warning",
                         access_log=False, lifespan="off", backlog=4096)
    server = uvicorn.Server(cfg)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task
            return
        await asyncio.sleep(0.01)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    await task


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m dualpath.sim")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--loading-s", type=float, default=0.0)
    ap.add_argument("--market-start", default="2027-01-04")
    ap.add_argument("--profile", default="{}", help="SimProfile as JSON")
    ap.add_argument("--log-file", help="write slot launches and releases here, in llama-server's "
                    "log format")
    args = ap.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
