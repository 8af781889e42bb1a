"""Imports run one way: CLI -> flows -> core / warehouse / evals (see STYLE); duckdb only in
warehouse/ (every query lives there)."""

import ast
from pathlib import Path

import pytest

from dualpath.engines import engine, names

ROOT = Path(__file__).resolve().parents[1]


LAYER_PACKAGES = {"evals", "flows", "warehouse", "viewer"}   # installed as dualpath.<name>


def root_of(module: str) -> str:
    """The layer a module name belongs to: `dualpath.evals.x` is evals (the layers install
    under the one dualpath namespace), `dualpath.night` the core, `duckdb` itself."""
    parts = module.split(".")
    if parts[0] == "dualpath" and len(parts) > 1 and parts[1] in LAYER_PACKAGES:
        return parts[1]
    return parts[0]


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {root_of(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(root_of(node.module))
            if node.module == "dualpath":      # from dualpath import evals
                roots |= {a.name for a in node.names if a.name in LAYER_PACKAGES}
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


# What differs by serving engine is asked of `dualpath.engines` (one module per engine): a
# comparison with an engine's name anywhere else is a branch the next engine silently misses.
# The serving engines are the registry's (those the simulated server can speak like); `sim`
# and `openai` say whether dualpath runs the server and that nothing is known of it.
ENGINE_NAMES = {n for n in names() if engine(n).facts.simulated}
ENGINE_HOMES = ("dualpath/engines/", "dualpath/sim/")


def _names_in(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node)
            if isinstance(n, ast.Constant) and n.value in ENGINE_NAMES}


def engine_comparisons(root: Path) -> list[str]:
    """Each `==`/`!=`/`in` with an engine's name, or a dict keyed by one, outside the
    engines' homes (file:line name)."""
    out = []
    for rel, node in _nodes_outside_homes(root):
        if isinstance(node, ast.Compare):
            hit = _names_in(node)
        elif isinstance(node, ast.Dict):
            hit = set().union(*(_names_in(k) for k in node.keys if k is not None))
        else:
            continue
        out += [f"{rel}:{node.lineno} {name}" for name in sorted(hit)]
    return out


def _nodes_outside_homes(root: Path):
    """(file, node) for every AST node of the packages' modules outside the engines' homes."""
    for package in ("dualpath", "flows", "warehouse", "evals", "viewer"):
        for f in sorted((root / package).rglob("*.py")):
            rel = f.relative_to(root).as_posix()
            if not rel.startswith(ENGINE_HOMES):
                for node in ast.walk(ast.parse(f.read_text())):
                    yield rel, node


def test_engine_names_are_compared_only_in_the_engines_homes():
    assert engine_comparisons(ROOT) == []


@pytest.mark.parametrize("code", ['ok = path.dialect == "llama.cpp"\n',
                                  'ok = dialect in ("vllm", "openai")\n',
                                  'FIELDS = {"sglang": "reasoning"}\n'])
def test_an_engine_name_compared_outside_its_home_fails(tmp_path, code):
    """The rule can fail: each shape of an engine branch, written in flows/, is reported;
    the same line in dualpath/engines/ is not."""
    for where in ("flows/x.py", "dualpath/engines/x.py"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text(code)
    assert [hit.split(":")[0] for hit in engine_comparisons(tmp_path)] == ["flows/x.py"]


def test_the_engine_names_are_the_registrys():
    """A newly registered serving engine is checked without editing this file."""
    assert ENGINE_NAMES >= {"llama.cpp", "vllm", "sglang"}
    assert ENGINE_NAMES <= set(names())


def counter_name_uses(root: Path) -> list[str]:
    """Each string outside the engines' homes holding a registered engine's /metrics name
    or its prefix and a name (`vllm:num_requests_running`): counters are read by meaning
    through the registry (`dualpath.engines.counter_names`), never by name."""
    counters = {c for n in names() for c in engine(n).facts.counters.values()}
    prefixes = {c.split(":", 1)[0] + ":" for c in counters}
    out = []
    for rel, node in _nodes_outside_homes(root):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if any(c in text for c in counters) or any(
                    p + ch in text for p in prefixes for ch in "abcdefghijklmnopqrstuvwxyz_"):
                out.append(f"{rel}:{node.lineno}")
    return out


def test_no_engines_counter_name_outside_its_module():
    assert counter_name_uses(ROOT) == []


def test_a_counter_name_outside_the_engines_fails(tmp_path):
    """The rule can fail: SGLang's generation counter written in warehouse/ is reported."""
    for where in ("warehouse/x.py", "dualpath/engines/x.py"):
        (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / where).write_text('N = "$.\\"sglang:generation_tokens_total\\""\n')
    assert counter_name_uses(tmp_path) == ["warehouse/x.py:1"]
