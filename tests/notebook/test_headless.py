"""nbclient runs a notebook using every feature headless; the saved file holds it all, no key."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from .conftest import SECRET, kernel_env
from .kernel import AsyncLocalKernelManager, make_kernel_manager

TOOLS = '''
import nbagent, nbagent.notebook
import pandas as pd
from PIL import Image
from nbagent.models import ScriptedModel, Call, Turn

deleted = []

@nbagent.tool
def weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}"

@nbagent.tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    deleted.append(path)
    return f"deleted {path}"

@nbagent.tool
def picture() -> object:
    """A small picture."""
    return Image.new("RGB", (6, 4), "blue")

@nbagent.tool
def cities() -> object:
    """A table of cities."""
    return pd.DataFrame({"city": ["Paris", "Oslo"], "temp": [21, 9]})
'''

MODEL = """
nbagent.notebook.current_session().set_model(ScriptedModel([
    Turn("Checking <b>now</b>.", Call("weather", {"city": "Paris"}),
         Call("delete_file", {"path": "old.txt"})),
    "It is sunny.",
    Turn(Call("delete_file", {"path": "old.txt"}), Call("picture"), Call("cities")),
    "Deleted, with a picture and a table.",
    "Two lines read.",
]))
city = "Paris"
"""

CELLS = [
    "%load_ext nbagent",
    TOOLS,
    MODEL,
    "%agent -o first What is the weather in {city}? Then delete old.txt.",
    "%agent --approve auto Delete it now, and show me a picture and a table.",
    "%%agent --new --tools weather\nTwo lines,\nread as one prompt.",
    "%agent tools",
    "%agent history",
    'nbagent.notebook.current_session().set_model("openai:gpt-4.1-mini")\n%agent config',
    "print(first.stop_reason, deleted)",
    "%agent -m offline What is the weather in 'Oslo'?",
]


def run_notebook(python: str, tmp: Path, env: dict[str, str]) -> tuple[Any, str]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(src).strip()) for src in CELLS]
    nb.metadata["kernelspec"] = {"name": "nbagent-test", "display_name": "t", "language": "python"}
    km = make_kernel_manager(python, tmp / "spec", AsyncLocalKernelManager)
    client = NotebookClient(nb, km=km, timeout=120)
    client.execute(env=env)
    path = tmp / "saved.ipynb"
    nbformat.write(nb, path)
    return nb, path.read_text()


def texts(cell: Any, mime: str = "text/plain") -> str:
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif mime in output.get("data", {}):
            parts.append(str(output.data[mime]))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def executed(kernel_python: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    return run_notebook(kernel_python, tmp_path_factory.mktemp("headless"), kernel_env())


def test_runs_are_saved_as_text_outputs_with_their_decisions(executed: tuple[Any, str]) -> None:
    nb, raw = executed
    first = nb.cells[3]
    markdown = texts(first, "text/markdown")
    assert "**You:** What is the weather in Paris? Then delete old.txt." in markdown
    assert "Checking &lt;b>now&lt;/b>." in markdown  # model text is never raw HTML
    assert "**🔧 weather** — done" in markdown
    assert "denied by policy: nobody can approve calls in a headless run" in markdown
    assert "NBAGENT_APPROVAL=auto" in markdown
    assert "Sunny in Paris" in texts(first)
    record = first.outputs[-1].metadata["nbagent"]
    assert record["stop_reason"] == "finished"
    approvals = {c["name"]: c["approval"] for c in record["calls"]}
    assert approvals["weather"] is None
    assert approvals["delete_file"]["approved"] is False
    assert approvals["delete_file"]["by"] == "deny"
    # no widgets headless: every output is plain data a saved notebook shows anywhere
    assert "application/vnd.jupyter.widget-view+json" not in raw


def test_auto_policy_images_and_tables(executed: tuple[Any, str]) -> None:
    nb, _ = executed
    second = nb.cells[4]
    assert "approved by policy (auto)" in texts(second, "text/markdown")
    pngs = [o for o in second.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 1
    tables = texts(second, "text/html")
    assert "<th>city</th>" in tables and "<td>Oslo</td>" in tables
    assert "print" not in texts(nb.cells[9]) and "finished ['old.txt']" in texts(nb.cells[9])


def test_cell_magic_subcommands_and_the_offline_model(executed: tuple[Any, str]) -> None:
    nb, _ = executed
    assert "**You:** Two lines,\n> read as one prompt." in texts(nb.cells[5], "text/markdown")
    table = texts(nb.cells[6])
    assert "delete_file" in table and "asks every call" in table and "city: string*" in table
    history = texts(nb.cells[7])
    assert "You: Two lines," in history and "Assistant: Two lines read." in history
    config = texts(nb.cells[8])
    assert "OPENAI_API_KEY" in config and "headless" in config
    offline = texts(nb.cells[10], "text/markdown")
    assert "**🔧 weather** — done" in offline and "[offline model]" in offline


def test_no_secret_in_the_saved_notebook(executed: tuple[Any, str]) -> None:
    _, raw = executed
    assert SECRET not in raw
    assert SECRET[:12] not in raw
    json.loads(raw)  # and it is a valid notebook file


def test_approval_from_the_environment(kernel_python: str, tmp_path: Path) -> None:
    nb, _ = run_notebook(kernel_python, tmp_path, kernel_env(NBAGENT_APPROVAL="auto"))
    assert "approved by policy (auto)" in texts(nb.cells[3], "text/markdown")
    assert "finished ['old.txt', 'old.txt']" in texts(nb.cells[9])
