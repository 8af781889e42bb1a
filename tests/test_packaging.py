"""One import name: the wheel installs `dualpath` alone (its layers as dualpath.evals,
dualpath.flows, dualpath.warehouse, dualpath.viewer), and works outside the checkout."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("evals", "flows", "warehouse", "viewer")


def _declared() -> tuple[set[str], dict[str, str]]:
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(tool["packages"]), tool["package-dir"]


def _on_disk() -> set[str]:
    """Every folder with an __init__.py, named as it installs."""
    out = set()
    for top in ("dualpath", *LAYERS):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT).parts
            out.add(".".join(rel if top == "dualpath" else ("dualpath", *rel)))
    return out


def test_every_package_folder_is_declared_under_the_namespace():
    """A new subpackage left out of pyproject's list would be missing from the wheel."""
    packages, dirs = _declared()
    assert packages == _on_disk()
    assert all(p == "dualpath" or p.startswith("dualpath.") for p in packages)
    assert dirs == {f"dualpath.{layer}": layer for layer in LAYERS}


# a statement's start: a line's, after `;`, or a string's opening quote (`python -c` code)
BARE = re.compile(r"(?:^|[;\"'(])\s*(?:from|import) (?:evals|flows|warehouse|viewer)\b")


def test_no_module_imports_a_layer_by_its_bare_name():
    """`import evals` works from the checkout's root (the folder is there) and nowhere else;
    code in strings counts (a test's `python -c` child)."""
    bad = []
    for top in ("dualpath", *LAYERS, "tests", "bench"):
        for f in (ROOT / top).rglob("*.py"):
            for n, line in enumerate(f.read_text().splitlines(), 1):
                if BARE.search(line.split("#")[0]):
                    bad.append(f"{f.relative_to(ROOT)}:{n}")
    assert bad == []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of the source (a build/ folder left in the checkout would carry
    files since deleted into the wheel)."""
    out = tmp_path_factory.mktemp("wheel")
    src = out / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", ".dualpath", "*.egg-info", "__pycache__", ".prefect"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out),
                    str(src)], check=True, capture_output=True, text=True)
    (built,) = out.glob("dualpath-*.whl")
    return built


def test_the_wheel_holds_only_the_dualpath_namespace(wheel):
    with zipfile.ZipFile(wheel) as z:
        tops = {name.split("/")[0] for name in z.namelist()}
        names = set(z.namelist())
    assert {t for t in tops if not t.endswith(".dist-info")} == {"dualpath"}
    for needed in ("dualpath/evals/interchange.py", "dualpath/flows/nightly.py",
                   "dualpath/warehouse/migrations.py", "dualpath/viewer/static/ui.css",
                   "dualpath/viewer/templates/base.html.j2", "dualpath/demo.toml",
                   "dualpath/evals/weekly/templates/report.html.j2",
                   "dualpath/schemas/result.schema.json"):
        assert needed in names, needed


def test_the_wheel_runs_a_demo_outside_the_checkout(wheel, tmp_path):
    """A fresh venv holding the wheel (its dependencies borrowed from this one's
    site-packages, read as a plain path so this checkout's editable finder stays out), run
    from a folder far from the checkout: `--help`, then a 2-night demo."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True)
    ours = Path(site.stdout.strip())
    # the borrowed path goes last: the wheel's own dualpath wins over nothing else
    (ours / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(ours), str(wheel)], check=True)
    far = tmp_path / "elsewhere"
    far.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
    where = subprocess.run([str(py), "-c", "import dualpath.evals, dualpath; "
                            "print(dualpath.evals.__file__)"], cwd=far, env=env,
                           capture_output=True, text=True)
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(ours)), where.stdout
    cli = [str(py), "-m", "dualpath"]
    helped = subprocess.run([*cli, "--help"], cwd=far, env=env, capture_output=True,
                            text=True)
    assert helped.returncode == 0 and "demo" in helped.stdout, helped.stderr
    demo = subprocess.run([*cli, "demo", "--nights", "2", "--tickers", "5", "--draws", "1",
                           "--root", str(far / "demo")], cwd=far, env=env,
                          capture_output=True, text=True, timeout=900)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "Speed" in demo.stdout
    assert (far / "demo" / "warehouse.duckdb").exists()
