"""The documentation's reference pages, generated from the code at every build.

    python docs/gen_reference.py OUT_DIR     # what docs/conf.py does before Sphinx reads

- `cli.md`: every command and option, from the Typer app, by Typer's own documentation
  command (`typer dualpath.cli utils docs`), so the page is the `--help` a person would read;
- `config.md`: every setting of `dualpath.toml`, `prereg.toml` and a sweep spec, from the
  pydantic models (field, type, default, allowed range, description);
- `dictionary.md`: every table and view of a new warehouse with each column's type, unit and
  meaning (`dualpath.warehouse.dictionary`, as `dualpath schema` prints it).

Nothing here is copied by hand: a command, a field or a column added to the code appears on
the next build, and tests/test_docs.py checks that it does.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import types
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

GENERATED = ("cli.md", "config.md", "dictionary.md")


def cli_page() -> str:
    """Typer's Markdown for the whole app, one heading level down under the page's title."""
    out = subprocess.run([sys.executable, "-m", "typer", "dualpath.cli", "utils", "docs",
                          "--name", "dualpath"], capture_output=True, text=True, check=True,
                         env={"COLUMNS": "100", "PATH": "", "NO_COLOR": "1"})
    lines = ["#" + line if line.startswith("#") else line for line in out.stdout.splitlines()]
    return ("# CLI reference\n\nGenerated from the commands themselves (`dualpath COMMAND "
            "--help` says the same). Exit codes: 0 ok; 1 a night not complete or a failure; "
            "2 a user mistake; 130 interrupted.\n\n" + "\n".join(lines) + "\n")


def _type_name(annotation) -> str:
    """A field's type as a reader writes it in TOML terms: `int`, `list[str]`, `"a" | "b"`."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "none"
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_name(a) for a in args)}]"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    return {"Path": "path", "str": "str", "PosixPath": "path"}.get(
        getattr(annotation, "__name__", ""), getattr(annotation, "__name__", str(annotation)))


def _bounds(field) -> str:
    """The range pydantic enforces (`ge`, `gt`, `le`, `lt`, lengths, pattern), in words."""
    words = []
    for m in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"),
                           ("min_length", "length ≥"), ("max_length", "length ≤"),
                           ("pattern", "matches")):
            value = getattr(m, attr, None)
            if value is not None:
                words.append(f"{sign} `{value}`")
    return ", ".join(words)


def _toml(value) -> str:
    """A default as it would be written in the TOML file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, Path)):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default(field) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(table)"
    return f"`{_toml(value)}`" if value is not None else "none"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _nested(annotation) -> tuple[type[BaseModel], str] | None:
    """The model a field holds and how its TOML table is named below the parent's:
    a model (`.name`), a dict of models (`.<name>`) or a list of them (`[[...]]`)."""
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg, ""
        origin, inner = typing.get_origin(arg), typing.get_args(arg)
        if origin is dict and inner and isinstance(inner[-1], type) \
                and issubclass(inner[-1], BaseModel):
            return inner[-1], ".<name>"
        if origin is list and inner and isinstance(inner[0], type) \
                and issubclass(inner[0], BaseModel):
            return inner[0], "[]"
    return None


def _first_paragraph(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split("\n\n")[0].split())


def model_sections(model: type[BaseModel], table: str, level: int = 2,
                   array: bool = False) -> list[str]:
    """One section per TOML table: the model's docstring, then a row per field."""
    doc = _first_paragraph(model)
    head = f"`[[{table}]]`" if array else f"`[{table}]`" if table else "top level"
    out = [f"{'#' * level} {head}", "",
           doc, "", "| key | type | default | allowed | description |",
           "|---|---|---|---|---|"]
    children = []
    for name, field in model.model_fields.items():
        nested = _nested(field.annotation)
        # a table field without a description of its own: its model's docstring says it
        what = field.description or (_first_paragraph(nested[0]) if nested else "")
        out.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} | "
                   f"{_bounds(field)} | {_cell(what)} |")
        if nested is not None:
            sub, suffix = nested
            key = f"{table}.{name}" if table else name
            children.append((sub, key + suffix if suffix != "[]" else key, suffix == "[]"))
    out.append("")
    for sub, key, array in children:
        out += model_sections(sub, key, min(level + 1, 4), array)
    return out


def config_page() -> str:
    from dualpath.config import Config
    from dualpath.prereg import Plan
    from dualpath.sweep_spec import SweepSpec

    out = ["# Configuration reference", "",
           "Generated from the pydantic models that read each file: every key, its type, "
           "default, allowed range and meaning. Every table forbids unknown keys, so a typo "
           "is an error naming the key. `dualpath init` writes a commented example "
           "(`deploy/dualpath.example.toml`); `dualpath check` validates a file offline.", "",
           "## dualpath.toml", ""]
    out += model_sections(Config, "", 3)
    out += ["## prereg.toml (the preregistered plan)", "",
            "Written by `dualpath prereg draft`, frozen by `dualpath prereg freeze` "
            "(example: `deploy/prereg.example.toml`).", ""]
    out += model_sections(Plan, "", 3)
    out += ["## A sweep spec (`dualpath sweep SPEC.toml`)", "",
            "Its keys sit under a `[sweep]` table.", ""]
    out += model_sections(SweepSpec, "sweep", 3)
    return "\n".join(out) + "\n"


def dictionary_page() -> str:
    from dualpath.warehouse.adhoc import schema_frame
    from dualpath.warehouse.dictionary import TABLES

    with tempfile.TemporaryDirectory() as tmp:       # no file there: a new warehouse's schema
        frame = schema_frame(Path(tmp) / "new.duckdb")
    out = ["# Data dictionary", "",
           "Every table and view of a new warehouse, each column with its DuckDB type, unit "
           "and meaning; generated from the schema the migrations build and the dictionary "
           "beside it (`dualpath schema -c dualpath.toml` prints the same for your own "
           "warehouse, `--table T` for one). Seconds named *monotonic* are on the harness's "
           "monotonic clock: compare differences only.", ""]
    for kind, title in (("table", "Tables"), ("view", "Views")):
        out += [f"## {title}", ""]
        for name, cols in frame[frame["kind"] == kind].groupby("table", sort=True):
            what = TABLES.get(name, ("", {}))[0]
            out += [f"### `{name}`", "", _cell(what), "", "| column | type | unit and meaning |",
                    "|---|---|---|"]
            out += [f"| `{c}` | {t} | {_cell(m)} |" for c, t, m in
                    zip(cols["column"], cols["type"], cols["unit and meaning"])]
            out.append("")
    return "\n".join(out) + "\n"


def write(out_dir: Path) -> list[Path]:
    """Write the three pages into `out_dir`; a page whose text is unchanged is not touched
    (Sphinx then does not rebuild it)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in zip(GENERATED, (cli_page, config_page, dictionary_page)):
        target, text = out_dir / name, make()
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
        written.append(target)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference/generated")):
        sys.stdout.write(f"{path}\n")
