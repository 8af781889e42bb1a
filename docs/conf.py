"""Sphinx configuration of the documentation site (`make docs`).

Pages are Markdown (MyST), so the README's text moved here as it was. The reference pages
(CLI, configuration, data dictionary) are generated from the code before Sphinx reads
anything (`gen_reference.py`, into reference/generated/, which git ignores). Nothing is
fetched from the network: no intersphinx, no remote images, a theme that ships its assets.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

project = "dualpath"
author = "dualpath"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]
myst_heading_anchors = 4          # `[text](page.md#a-heading)` links resolve, and are checked
myst_enable_extensions = ["colon_fence", "deflist"]
html_theme = "furo"
html_title = "dualpath"
html_show_sourcelink = False
smartquotes = False               # '…' in a setting's description is a literal value, keep it


def _generate(app) -> None:
    """Write the generated reference pages before Sphinx collects its sources."""
    from gen_reference import write

    write(HERE / "reference" / "generated")


def setup(app) -> None:
    app.connect("builder-inited", _generate)
