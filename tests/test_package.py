"""The package surface: pinned exports, no front-end imports in the core, typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbagent


def test_public_names_are_pinned() -> None:
    assert nbagent.__all__ == sorted(nbagent.__all__, key=str)
    for name in nbagent.__all__:
        assert hasattr(nbagent, name), name
    assert {"Agent", "tool", "Tool", "Definition", "compile_schema", "ScriptedModel"} <= set(
        nbagent.__all__
    )


def test_import_does_not_pull_in_front_ends_or_http() -> None:
    code = (
        "import sys, nbagent\n"
        "bad = [m for m in ('IPython', 'ipywidgets', 'httpx2', 'httpx', 'ipykernel',"
        " 'jsonschema', 'PIL', 'asyncio') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_typed_marker_ships() -> None:
    assert (Path(nbagent.__file__).parent / "py.typed").exists()
