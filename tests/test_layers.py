"""Imports run one way: CLI -> flows -> core / warehouse / evals (see STYLE)."""

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


FORBIDDEN = {
    "evals": {"duckdb", "httpx", "prefect", "dualpath", "warehouse", "flows"},
    "warehouse": {"prefect", "httpx", "flows", "evals"},
    "dualpath": {"flows", "warehouse", "prefect", "duckdb"},
    "viewer": {"duckdb", "prefect", "httpx"},   # its queries live in warehouse.viewer
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layering(package):
    for f in (ROOT / package).rglob("*.py"):
        if package == "dualpath" and f.parent.name == "cli":
            continue   # the CLI is the top layer
        bad = imported_roots(f) & FORBIDDEN[package]
        assert not bad, f"{f.relative_to(ROOT)} imports {sorted(bad)}"
