"""nbclient runs a notebook with ``%agent --acp`` headless: nobody can click, so the agent's
permission request is refused by policy and the agent is told so (its reject option); the
saved file holds the run, readable, with no live widget."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from .conftest import kernel_env
from .kernel import AsyncLocalKernelManager, make_kernel_manager

pytest.importorskip("acp", reason="the acp extra (agent-client-protocol) is not installed")

SCRIPT = Path(__file__).resolve().parents[1] / "acp" / "scripted_agent.py"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def test_a_headless_run_refuses_the_agent_s_permission_request_and_saves_readable(
    tmp_path: Path,
) -> None:
    cells = [
        f"%load_ext nbagent\n%agent acp add scripted -- {sys.executable} {SCRIPT}",
        "%agent --acp scripted -o res tool",
        "print('agent said:', res.text, res.stop_reason)",
        "%agent --acp scripted -o again remember",
        "print('then:', again.text)",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(src).strip()) for src in cells]
    nb.metadata["kernelspec"] = {"name": "nbagent-test", "display_name": "t", "language": "python"}
    km = make_kernel_manager(sys.executable, tmp_path / "spec", AsyncLocalKernelManager)
    NotebookClient(nb, km=km, timeout=120).execute(env=kernel_env())
    printed = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    assert "agent said: denied (no) finished" in printed
    assert "then: you said: tool" in "".join(o.get("text", "") for o in nb.cells[4].outputs)
    run = nb.cells[1].outputs
    assert not [o for o in run if WIDGET_MIME in o.get("data", {})]
    shown = json.dumps([o.get("data", {}) for o in run])
    assert "denied by policy" in shown and "Run ls" in shown
