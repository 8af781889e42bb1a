"""Imports run one way: CLI -> flows -> core / warehouse / evals (see STYLE); duckdb only in
warehouse/ (every query lives there)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


# Each layer (a folder) and the roots its modules may not import; a module belongs to the
# deepest layer holding it (dualpath/cli/ is its own layer, not dualpath's).
FORBIDDEN = {
    "evals": {"duckdb", "httpx", "prefect", "dualpath", "warehouse", "flows"},
    "warehouse": {"prefect", "httpx", "flows", "evals"},
    "dualpath": {"flows", "warehouse", "prefect", "duckdb"},
    "dualpath/cli": {"duckdb"},   # the top layer: flows and warehouse, never SQL of its own
    "flows": {"duckdb"},
    "viewer": {"duckdb", "prefect", "httpx"},   # its queries live in warehouse.viewer
}


def layer_of(path: Path, root: Path) -> str | None:
    rel = path.relative_to(root).parent.as_posix()
    held = [layer for layer in FORBIDDEN if rel == layer or rel.startswith(layer + "/")]
    return max(held, key=len) if held else None


def violations(root: Path, layer: str) -> list[str]:
    out = []
    for f in sorted((root / layer).rglob("*.py")):
        if layer_of(f, root) != layer:
            continue
        bad = imported_roots(f) & FORBIDDEN[layer]
        if bad:
            out.append(f"{f.relative_to(root)} imports {sorted(bad)}")
    return out


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layering(layer):
    assert violations(ROOT, layer) == []


def test_duckdb_only_in_warehouse():
    for package in ("dualpath", "flows", "evals", "viewer"):
        for f in (ROOT / package).rglob("*.py"):
            assert "duckdb" not in imported_roots(f), f"{f.relative_to(ROOT)} imports duckdb"


@pytest.mark.parametrize("module, caught", [
    ("dualpath/cli/data.py", True), ("dualpath/cli/sub/deep.py", True),
    ("flows/doctor.py", True), ("dualpath/night.py", True), ("warehouse/db.py", False)])
def test_a_duckdb_import_outside_warehouse_fails(tmp_path, module, caught):
    """The rule can fail: `import duckdb` (here inside a function, as the CLI imports) added
    to a module of any layer but warehouse/ is reported."""
    f = tmp_path / module
    f.parent.mkdir(parents=True)
    f.write_text("def sql():\n    import duckdb\n    return duckdb\n")
    layer = layer_of(f, tmp_path)
    assert bool(violations(tmp_path, layer)) is caught
    if caught:
        assert violations(tmp_path, layer) == [f"{module} imports ['duckdb']"]
