"""`dualpath --help` lists the commands by what a person does, each summarised in one
paragraph (typer listed them in registration order and kept the docstrings' line breaks)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from dualpath.cli._common import PANELS


def _help(columns: int = 200) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([sys.executable, "-m", "dualpath", "--help"], capture_output=True,
                          text=True, timeout=120, env=env, check=True).stdout


def test_commands_are_listed_in_panels_in_the_order_a_person_uses_them():
    out = _help()
    panels = re.findall(r"╭─ (.+?) ─", out)
    assert panels == ["Options", *PANELS]
    for title, names in PANELS.items():
        body = out[out.index(f"╭─ {title} "):]
        body = body[:body.index("╰")]
        listed = re.findall(r"^│ (\w+) ", body, flags=re.M)
        assert listed == names, title
    assert "Other" not in panels       # every command has its place


def test_each_summary_is_one_paragraph_not_the_docstrings_lines():
    from typer.main import get_command

    from dualpath.cli import app

    group = get_command(app)
    out = " ".join(_help(columns=2000).split())
    for name in group.list_commands(None):
        command = group.commands[name]
        first = " ".join(command.help.split("\n\n")[0].split()).replace("\\[", "[")
        assert f"│ {name} {first} │" in out, name
