"""No new import cycle among dualpath's modules.

An import is any `import` in a module, inside functions too (a lazy import is still a
dependency: it only moves the cycle's failure to run time), except those under
`if TYPE_CHECKING:`. The cycles that exist are listed in `KNOWN` and may only shrink; the
one through config, the engines, launch arguments and sampling (12 modules) was broken by
giving each engine module its own launch parsing and request sampling.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"dualpath": "dualpath", "dualpath.flows": "flows", "dualpath.warehouse": "warehouse",
            "dualpath.evals": "evals", "dualpath.viewer": "viewer"}

KNOWN = [
    {"dualpath.evals.inference", "dualpath.evals.power"},
    {"dualpath.prereg", "dualpath.prereg_design"},
    {"dualpath.flows.metrics", "dualpath.flows.prereg"},
    {"dualpath.warehouse.db", "dualpath.warehouse.ingest", "dualpath.warehouse.migrations",
     "dualpath.warehouse.search_index"},
    {"dualpath.evals.headline", "dualpath.evals.listings", "dualpath.evals.registry",
     "dualpath.evals.serving", "dualpath.evals.speed", "dualpath.evals.tables"},
    {"dualpath.sim", "dualpath.sim.lifecycle", "dualpath.sim.running", "dualpath.sim.server"},
]


def modules(root: Path) -> dict[str, Path]:
    """{dotted module name: file} of every module of the installed namespace."""
    out = {}
    for pkg, folder in PACKAGES.items():
        for f in (root / folder).rglob("*.py"):
            parts = [p for p in f.relative_to(root / folder).with_suffix("").parts
                     if p != "__init__"]
            out[".".join([pkg, *parts])] = f
    return out


def _imports(body: list[ast.stmt]) -> set[str]:
    found: set[str] = set()
    for node in body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id == "TYPE_CHECKING":
            found |= _imports(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                found |= _imports([n for n in inner if isinstance(n, ast.AST)])
    return found


@functools.cache
def graph(root: Path) -> dict[str, set[str]]:
    mods = modules(root)
    return {name: {m for m in _imports(ast.parse(f.read_text()).body) if m in mods} - {name}
            for name, f in mods.items()}


def cycles(g: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def test_no_import_cycle_but_the_known_ones():
    new = [sorted(c) for c in cycles(graph(ROOT)) if c not in KNOWN]
    assert new == []


def test_no_cycle_runs_through_config_or_the_engines():
    core = ("dualpath.config", "dualpath.engines", "dualpath.launch_args", "dualpath.sampling",
            "dualpath.identity")
    assert [c for c in cycles(graph(ROOT)) if any(m.startswith(core) for m in c)] == []


def test_a_cycle_is_found_through_a_lazy_import(tmp_path):
    """The rule can fail: a.py imports b at the top, b.py imports a inside a function; a
    TYPE_CHECKING import makes no cycle."""
    pkg = tmp_path / "dualpath"
    pkg.mkdir()
    (pkg / "a.py").write_text("from dualpath.b import x\n")
    (pkg / "b.py").write_text("def x():\n    from dualpath.a import y\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from dualpath.a import y\n")
    (pkg / "d.py").write_text("import dualpath.c\n")
    assert cycles(graph(tmp_path)) == [{"dualpath.a", "dualpath.b"}]
