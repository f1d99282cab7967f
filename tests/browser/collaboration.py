"""The venv with ``jupyter-collaboration`` that the notebook-edit browser tests also run on.

JupyterLab and Notebook 7 with real-time collaboration keep each notebook in a shared document
on the server (every view and collaborator edits the same one, the server saves it); the
notebook tools must work there as they do without it. It is never installed into the shared
``.venv`` (it would change every other browser test's JupyterLab): it lives in a venv of its
own, with the same JupyterLab and Notebook as ``.venv`` and this checkout of nbagent, built into
the pytest cache once (again when pyproject.toml or those versions change). ``scripts/test``
builds it in the background before the tests; a test that finds it missing builds it then,
and skips, saying why, when it cannot be built (no network to PyPI). pytest-xdist's workers
share one build: the first takes a lock, the others wait and find it ready.

Usage: ``python -m tests.browser.collaboration [FOLDER]`` (default: the pytest cache's folder).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The release tested (it needs JupyterLab >= 4.6).
VERSION = "5.0.4"
FOLDER = ROOT / ".pytest_cache" / "d" / "collaboration-venv"


def _versions() -> dict[str, str]:
    return {name: version(name) for name in ("jupyterlab", "notebook", "ipywidgets", "anywidget")}


def ensure(where: Path = FOLDER) -> Path:
    """The venv's python, built first if missing or built for another pyproject.toml or other
    JupyterLab versions; raises CalledProcessError if venv or pip fails."""
    where.parent.mkdir(parents=True, exist_ok=True)
    with (where.parent / f"{where.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(where)


def _build(where: Path) -> Path:
    python = where / "bin" / "python"
    marker = where / "nbagent-ready.json"
    pins = _versions()
    want = {
        "jupyter-collaboration": VERSION,
        "root": str(ROOT),
        "pins": pins,
        "pyproject": hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest(),
    }
    if marker.exists() and json.loads(marker.read_text()) == want and python.exists():
        return python
    if where.is_symlink():
        raise subprocess.CalledProcessError(1, ["venv", str(where)], f"{where} links elsewhere")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(where)], check=True)
    subprocess.run(
        [
            *(str(python), "-m", "pip", "install", "-q"),
            f"jupyter-collaboration=={VERSION}",
            *(f"{name}=={pinned}" for name, pinned in pins.items()),
            *("-e", str(ROOT)),
        ],
        check=True,
    )
    marker.write_text(json.dumps(want))
    return python


if __name__ == "__main__":
    print(ensure(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER))
