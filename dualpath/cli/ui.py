"""`dualpath ui`: the read-only web viewer over the warehouse (see `viewer.app`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from dualpath.cli._common import CONFIG_OPT, app, console, warehouse_file
from dualpath.cli._common import load_config
from dualpath.errors import UserError


@app.command("ui")
def ui_cmd(config: Path = CONFIG_OPT,
           host: Optional[str] = typer.Option(None, help="Address to listen on (default: "
                                              "\\[ui] host, 127.0.0.1: this machine only)."),
           port: Optional[int] = typer.Option(None, min=0, max=65535, help="Port (default: "
                                              "\\[ui] port; 0: any free port)."),
           db: Optional[Path] = typer.Option(None, help="Warehouse file (instead of the "
                                             "config's).")) -> None:
    """A local, read-only web viewer: the verdict, each night's tickers on both paths, and
    one ticker's calls side by side (works while a night is being scored)."""
    import socket

    import uvicorn

    from dualpath.viewer.app import create_app

    cfg = load_config(config)
    # a file given with --db is checked as `dualpath sql --db` checks it, before listening
    path = warehouse_file(db, "--db") if db is not None else cfg.resolve(cfg.warehouse.path)
    if not path.exists():
        raise UserError(f"no warehouse at {path}; run `dualpath nightly` or `dualpath demo` first")
    from dualpath.warehouse.db import holds_runs

    if db is not None and not holds_runs(path):
        raise UserError(f"--db {path} is a DuckDB file but no dualpath warehouse (it has no "
                        "runs table); give the warehouse file of a config's [warehouse] path")
    host = host or cfg.ui.host
    port = cfg.ui.port if port is None else port
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.bind((host, port))
    except OSError as e:
        raise UserError(f"cannot listen on {host}:{port} ({e.strerror}); pick another "
                        "--port, or 0 for any free one") from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    console.print(f"dualpath ui: http://{shown}:{bound}/  (read-only; Ctrl-C stops it)",
                  soft_wrap=True)
    server = uvicorn.Server(uvicorn.Config(create_app(cfg, path, host), log_level="warning",
                                           access_log=False, server_header=False))
    server.run(sockets=[sock])


def night_links(cfg, frame, cols: list[str], fmt: str):
    """`dualpath runs` with `[ui] base_url` set: a `ui_url` column per run (csv, json), or one
    line naming the latest night's page (table). Returns (frame, columns, line or None)."""
    from dualpath.viewer.links import night_url

    base = cfg.ui.base_url
    if not base or not len(frame):
        return frame, cols, None
    urls = [night_url(base, f"{n:%Y-%m-%d}") for n in frame["night"]]
    if fmt != "table":
        return frame.assign(ui_url=urls), cols + ["ui_url"], None
    latest = urls[int(frame["night"].values.argmax())]
    return frame, cols, f"in the viewer: {latest}  (any night: {night_url(base, 'YYYY-MM-DD')})"
