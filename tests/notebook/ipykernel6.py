"""The venv with ipykernel 6.29 that the kernel tests also run on (NBAGENT_TEST_IPYKERNEL6=1).

Built into the pytest cache once, and again when pyproject.toml changes. ``scripts/test`` builds
it before the tests, while ruff, mypy and the docs build run, so that no test waits for pip
inside its timeout; a test that finds it missing builds it then. pytest-xdist's workers share
one build: the first takes a lock, the others wait for it and find it ready.

Usage: ``python -m tests.notebook.ipykernel6 [FOLDER]`` (default: the pytest cache's folder).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = "6.29.5"
#: Where ``config.cache.mkdir("ipykernel6-venv")`` puts it with pytest's default cache_dir.
FOLDER = ROOT / ".pytest_cache" / "d" / "ipykernel6-venv"


def ensure(where: Path = FOLDER) -> Path:
    """The venv's python, built first if it is missing or was built for another pyproject.toml;
    raises CalledProcessError if venv or pip fails."""
    where.parent.mkdir(parents=True, exist_ok=True)
    # beside the venv, not in it: a build empties the venv's folder first
    with (where.parent / f"{where.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(where)


def _build(where: Path) -> Path:
    python = where / "bin" / "python"
    marker = where / "nbagent-ready.json"
    project = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    want = {
        "ipykernel": VERSION,
        "root": str(ROOT),
        "extra": ["pandas", "matplotlib", "prices", "mcp", "acp"],
        "pyproject": project,  # a new dependency must reach this venv too
    }
    if marker.exists() and json.loads(marker.read_text()) == want and python.exists():
        return python
    if where.is_symlink():  # another checkout's venv: clearing it would break that checkout
        raise subprocess.CalledProcessError(
            1, ["venv", str(where)], f"{where} links to a venv built for another checkout"
        )
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(where)], check=True)
    subprocess.run(
        [
            *(str(python), "-m", "pip", "install", "-q"),
            # prices: the course tests read what a run cost in this kernel too; mcp: %agent
            # serve's tests serve from this kernel too; acp: %agent --acp's tests start agents
            *(f"ipykernel=={VERSION}", "pandas", "matplotlib", "-e", f"{ROOT}[prices,mcp,acp]"),
        ],
        check=True,
    )
    marker.write_text(json.dumps(want))
    return python


if __name__ == "__main__":
    print(ensure(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER))
