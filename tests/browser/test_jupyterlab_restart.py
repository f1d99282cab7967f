"""Kernel > Restart in JupyterLab, and the conversation goes on: a person's whole round trip.

A run against a loopback server speaking Chat Completions, the notebook saved, **Kernel >
Restart Kernel…**, the notebook reopened in a new page, the tool's cell run again, then
``%agent --continue …``: the cell says whose conversation goes on, the model receives that
conversation with the new prompt, and the notebook saved again reads, from the file alone,
without a widget and without "model not found". Screenshots go to the test's tmp dir.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from ..notebook.test_kernel_restart import FIRST, NEXT, SETUP, _chat_turns, _Server
from ..providers import wire
from .lab import (
    BUTTONS,
    CHROMIUM,
    KERNELSPEC,
    Lab,
    Shots,
    kernel_idle,
    menu,
    open_notebook,
    running_lab,
    skip_unless_browser,
    wait_for,
)

NOTEBOOK = "restart.ipynb"
EDITOR = ".jp-Cell .jp-InputArea-editor .cm-content"
WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def server() -> Iterator[_Server]:
    found = _Server()
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def lab(tmp_path: Path, server: _Server) -> Iterator[Lab]:
    skip_unless_browser()
    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell(f"%agent -m openai:gpt-test {FIRST}"),
        nbformat.v4.new_code_cell(f"%agent -m openai:gpt-test --continue {NEXT}"),
    ]
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, work / NOTEBOOK)
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-test-restart-0123456789"}
    with running_lab(work, tmp_path / "home", env) as running:
        yield running


def _run_cell(page: Any, index: int) -> None:
    page.locator(EDITOR).nth(index).click()
    page.keyboard.press("Control+Enter")


def _saved(lab: Lab) -> Any:
    return nbformat.read(lab.root / NOTEBOOK, as_version=4)


def _shown(cell: Any) -> str:
    return "\n".join(
        str(o.get("data", {}).get("text/plain", o.get("text", ""))) for o in cell.outputs
    )


@pytest.mark.timeout(300)  # two pages, a restart, three runs
def test_restart_reopen_continue_save_and_reopen_readable(
    lab: Lab, server: _Server, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = Shots(tmp_path / "shots")
    timeout = 90_000
    server.bodies += _chat_turns()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1300})
        try:
            open_notebook(page, lab, NOTEBOOK)
            _run_cell(page, 0)
            _run_cell(page, 1)
            expect(page.get_by_text("Sunny in Zürich, 21 °C.").first).to_be_visible(timeout=timeout)
            expect(page.locator(BUTTONS, has_text="Stop")).to_have_count(0, timeout=timeout)
            menu(page, "File", "Save Notebook")
            wait_for("the saved run", lambda: "Sunny in Zürich" in _shown(_saved(lab).cells[1]))

            menu(page, "Kernel", "Restart Kernel…")
            page.locator(".jp-Dialog .jp-mod-accept").click()
            wait_for("the restarted kernel", lambda: kernel_idle(page), 60)
            page.close()
            page = browser.new_page(viewport={"width": 1100, "height": 1300})
            open_notebook(page, lab, NOTEBOOK)  # reopened: the saved outputs, no kernel state
            assert page.get_by_text("model not found").count() == 0
            server.bodies.append(wire.openai_text("Wear sunglasses."))
            _run_cell(page, 0)
            wait_for("the tools' cell", lambda: kernel_idle(page), 60)
            _run_cell(page, 2)
            expect(page.get_by_text("Wear sunglasses.").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("conversation from the saved notebook").first).to_be_visible(
                timeout=timeout
            )
            # the run's end (its Stop button gone: the status bar may read Idle before)
            expect(page.locator(BUTTONS, has_text="Stop")).to_have_count(0, timeout=timeout)
            shots.take(page, "continued", page.get_by_text("Wear sunglasses.").first)
            menu(page, "File", "Save Notebook")
            wait_for("the saved continuation", lambda: "Wear" in _shown(_saved(lab).cells[2]))
        except Exception:
            shots.take(page, "failure")
            raise
        finally:
            browser.close()

    sent = server.requests[-1]["messages"]
    said = json.dumps(sent, ensure_ascii=False)
    assert FIRST in said and "Zürich: sunny, 21 °C" in said and NEXT in said, said
    assert len(sent) == 5, sent  # the prompt, the call, its result, the answer, the new prompt
    reopened = _saved(lab)
    nbformat.validate(reopened)
    for cell in reopened.cells[1:]:
        assert not [o for o in cell.outputs if WIDGET in o.get("data", {})], cell.outputs
    text = _shown(reopened.cells[2])
    assert "continuing run-" in text and "Wear sunglasses." in text, text
