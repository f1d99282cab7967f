"""The notebook examples of the README and of docs/getting-started.md, run in a real kernel as a
newcomer pastes them (headless: nobody can click, so a call that needs approval is denied)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from .conftest import kernel_env
from .kernel import AsyncLocalKernelManager, make_kernel_manager

ROOT = Path(__file__).resolve().parents[2]


def _ipython_cells(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    blocks = re.findall(r"^```(?:ipython|python)\n(.*?)^```$", text, re.S | re.M)
    return [b for b in blocks if "%agent" in b or "%load_ext" in b]


def _run(cells: list[str], tmp: Path) -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src.strip()) for src in cells]
    nb.metadata["kernelspec"] = {"name": "nbagent-test", "display_name": "t", "language": "python"}
    km = make_kernel_manager(sys.executable, tmp / "spec", AsyncLocalKernelManager)
    NotebookClient(nb, km=km, timeout=120).execute(env=kernel_env())  # raises on a cell error
    return nb


def _text(nb: Any) -> str:
    return "\n".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
        for cell in nb.cells
        for o in cell.outputs
    )


def test_getting_started_notebook_cells_call_the_tool(tmp_path: Path) -> None:
    cells = _ipython_cells(ROOT / "docs" / "getting-started.md")
    assert len(cells) == 2
    out = _text(_run(cells, tmp_path))
    assert "[offline model]" in out and "returned: Sunny in Paris" in out


def test_the_readme_s_ten_lines_deny_headless_and_say_how_to_allow(tmp_path: Path) -> None:
    (cell,) = _ipython_cells(ROOT / "README.md")
    out = _text(_run([cell], tmp_path))
    assert "nobody can approve calls in a headless run" in out
    assert "NBAGENT_APPROVAL=auto" in out
    assert "waiting for a person" not in out  # a policy decided at once: nobody waited
