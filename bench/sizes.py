"""Module and function sizes of the project's Python packages (issue 23's closing note).

    python bench/sizes.py [ROOT]

Prints the largest module (lines), the number of functions over 60 lines, and the median
function length (lines from `def` to the function's last line, nested functions counted
on their own as well).
"""

import ast
import statistics
import sys
from pathlib import Path

PACKAGES = ("dualpath", "flows", "warehouse", "evals", "viewer")


def sizes(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    modules, functions = [], []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            text = path.read_text()
            name = str(path.relative_to(root))
            modules.append((len(text.splitlines()), name))
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    functions.append((length, f"{name}:{node.name}"))
    return modules, functions


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    modules, functions = sizes(root)
    largest = max(modules)
    over = sorted((f for f in functions if f[0] > 60), reverse=True)
    print(f"modules {len(modules)}, largest {largest[1]} {largest[0]} lines")
    print(f"functions {len(functions)}, over 60 lines {len(over)}, "
          f"median {statistics.median(n for n, _ in functions)} lines")
    for n, name in over:
        print(f"  {n:4d} {name}")


if __name__ == "__main__":
    main()
