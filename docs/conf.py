"""Sphinx configuration: MyST pages, the teaching notebooks executed at build, API from docstrings.

The notebooks live in ../notebooks (one copy in git). Each build copies them into ``course/``
(git-ignored) and myst-nb executes them there, always on the offline model, so the rendered
outputs match what a reader without an API key sees.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

import nbagent  # noqa: E402

project = "nbagent"
author = "nbagent developers"
copyright = "nbagent developers"
release = version = nbagent.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

# --- the notebooks ------------------------------------------------------------------------------

COURSE = HERE / "course"


def _mirror(source_dir: Path, target_dir: Path, pattern: str) -> None:
    """Mirror source_dir/pattern into target_dir (only files that changed, so caching works)."""
    target_dir.mkdir(exist_ok=True)
    sources = {p.name: p for p in sorted(source_dir.glob(pattern))}
    for stale in target_dir.glob(pattern):
        if stale.name not in sources:
            stale.unlink()
    for name, source in sources.items():
        target = target_dir / name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)


def _copy_notebooks() -> None:
    """The notebooks, the recordings beside them (notebooks 8 and 11 replay some) and the data
    they read (notebook 11's)."""
    _mirror(ROOT / "notebooks", COURSE, "*.ipynb")
    _mirror(ROOT / "notebooks" / "nbagent-recordings", COURSE / "nbagent-recordings", "*.json")
    _mirror(ROOT / "notebooks" / "data", COURSE / "data", "*.csv")
    _mirror(ROOT / "notebooks" / "data", COURSE / "data", "*.ipynb")  # notebook 15's student's
    # notebook 13's sample course (a policy and generated submissions): read, never a page
    sample = COURSE / "sample-course"
    if sample.exists():
        shutil.rmtree(sample)
    shutil.copytree(ROOT / "notebooks" / "sample-course", sample, symlinks=True)


_copy_notebooks()

# Docs always show the offline model, whatever the builder's shell has configured, and a build
# must never wait for an approval click.
for _name in [n for n in os.environ if n.startswith("NBAGENT_")]:
    del os.environ[_name]
os.environ["NBAGENT_MODEL"] = "offline"
os.environ.setdefault("MPLBACKEND", "Agg")

nb_execution_mode = os.environ.get("NBAGENT_DOCS_EXECUTE", "force")
nb_execution_timeout = 120
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_kernel_rgx_aliases = {".*": "python3"}
nb_merge_streams = True
# Run views write Markdown with tables: render them as MyST (CommonMark has no tables).
nb_render_markdown_format = "myst"

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# --- API reference ------------------------------------------------------------------------------

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_class_signature = "separated"
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# --- pages --------------------------------------------------------------------------------------

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}
exclude_patterns = [
    "_build",
    "course/.ipynb_checkpoints",
    "course/sample-course",
    "course/data",
    "Thumbs.db",
    ".DS_Store",
]
html_theme = "pydata_sphinx_theme"
html_title = "nbagent"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path: list[str] = []
