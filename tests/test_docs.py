"""The documentation: a README a newcomer reads in a minute, and a site that builds from the
repository with warnings as errors, offline, whose reference pages reach every command,
setting and warehouse column (docs/gen_reference.py generates them from the code)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dualpath import engines

ROOT = Path(__file__).resolve().parents[1]


def build(docs: Path, out: Path) -> subprocess.CompletedProcess:
    """`make docs`'s command on a copy of docs/ (the generated pages land in the copy)."""
    return subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b",
                           "html", str(docs), str(out)], capture_output=True, text=True,
                          env={"PATH": "", "NO_COLOR": "1", "HOME": str(out.parent)})


def docs_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(ROOT / "docs", tmp_path / "docs",
                                ignore=shutil.ignore_patterns("_build", "generated")))


def test_the_readme_is_short_and_its_quick_start_is_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    start = readme.index("## Quick start")
    block = re.search(r"```sh\n(.*?)```", readme[start:], re.S).group(1)
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["make demo",
                                                                          "make test"]


def test_every_page_the_readme_links_to_exists():
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)", readme)
    assert len(links) >= 10           # the pages of "Where to go next" and the screenshot
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_the_readme_names_every_real_engine():
    # every registered engine a config can name, but the simulated one: llama.cpp, vllm,
    # sglang, openai today (the README writes them as vLLM, SGLang, OpenAI-compatible)
    readme = (ROOT / "README.md").read_text().lower()
    assert [n for n in engines.names() if n != "sim" and n not in readme] == []


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    docs = docs_copy(tmp)
    done = build(docs, tmp / "html")
    return docs, tmp / "html", done


def test_the_site_builds_without_a_warning(site):
    _, html, done = site
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.strip() == ""
    pages = {p.relative_to(html).as_posix() for p in html.rglob("*.html")}
    assert {"index.html", "getting-started.html", "concepts.html", "decision.html",
            "operations.html", "reference/generated/cli.html",
            "reference/generated/config.html", "reference/generated/dictionary.html",
            "contributing/engine.html", "contributing/metric.html",
            "contributing/report-table.html", "contributing/command.html"} <= pages


def test_the_site_loads_nothing_from_the_network(site):
    _, html, _ = site
    # a script, stylesheet, image or font fetched from elsewhere (a link to a page is fine)
    fetched = re.compile(r'<(script|link|img)[^>]+(src|href)="(https?:)?//')
    offenders = [p.name for p in html.rglob("*.html") if fetched.search(p.read_text())]
    offenders += [p.name for p in (html / "_static").rglob("*.css")
                  if re.search(r"url\((['\"]?)(https?:)?//", p.read_text())]
    assert offenders == []


def _command_paths(group, prefix="dualpath"):
    """Every command as `dualpath X` / `dualpath X Y`, from the Typer app itself."""
    import typer

    from dualpath.cli import app

    group = group or typer.main.get_command(app)
    out = []
    for name, cmd in group.commands.items():
        out.append(f"{prefix} {name}")
        if hasattr(cmd, "commands"):
            out += _command_paths(cmd, f"{prefix} {name}")
    return out


def test_the_cli_reference_has_every_command(site):
    docs, _, _ = site
    page = (docs / "reference" / "generated" / "cli.md").read_text()
    headings = set(re.findall(r"^#+ `(dualpath[^`]*)`", page, re.M))
    commands = _command_paths(None)
    assert len(commands) > 20          # init … verify, prices import … prereg status
    assert [c for c in commands if c not in headings] == []


def _fields(model, seen=None):
    """Every field name of a pydantic model and of the models it holds."""
    from dualpath.config import Config  # noqa: F401  (the models' forward refs resolved)

    seen = seen if seen is not None else set()
    names = []
    for name, field in model.model_fields.items():
        names.append(name)
        for arg in (field.annotation, *_args(field.annotation)):
            if isinstance(arg, type) and hasattr(arg, "model_fields") and arg not in seen:
                seen.add(arg)
                names += _fields(arg, seen)
    return names


def _args(annotation):
    import typing

    out = []
    for a in typing.get_args(annotation):
        out += [a, *_args(a)]
    return out


def test_the_config_reference_has_every_setting_with_its_description(site):
    from dualpath.config import Config, Sampling
    from dualpath.prereg import Plan
    from dualpath.sweep_spec import SweepSpec

    docs, _, _ = site
    page = (docs / "reference" / "generated" / "config.md").read_text()
    rows = set(re.findall(r"^\| `([a-z_0-9]+)` \|", page, re.M))
    for model in (Config, Plan, SweepSpec):
        assert [f for f in _fields(model) if f not in rows] == []
    # a row: key, type, default, allowed range, description (from Field(description=...))
    assert ("| `top_k` | int | `20` | ≥ `0` | Top-k cut-off (0 = off). |" in page)
    assert Sampling.model_fields["top_k"].description == "Top-k cut-off (0 = off)."


def test_the_data_dictionary_has_every_table_and_column(site):
    import duckdb

    from dualpath.warehouse.dictionary import dictionary
    from dualpath.warehouse.migrations import migrate

    docs, _, _ = site
    page = (docs / "reference" / "generated" / "dictionary.md").read_text()
    with duckdb.connect() as con:
        migrate(con)
        d = dictionary(con)
    sections = re.split(r"^### ", page, flags=re.M)[1:]
    columns = {s.split("`")[1]: set(re.findall(r"^\| `([^`]+)` \|", s, re.M)) for s in sections}
    missing = [(t, c) for t, c in zip(d["table"], d["column"]) if c not in columns.get(t, ())]
    assert missing == []


def test_a_broken_link_fails_the_build(tmp_path):
    docs = docs_copy(tmp_path)
    with (docs / "concepts.md").open("a") as f:
        f.write("\nSee [the missing page](no-such-page.md).\n")
    done = build(docs, tmp_path / "html")
    assert done.returncode != 0
    assert "concepts.md" in done.stderr and "no-such-page.md" in done.stderr
