"""End to end in JupyterLab: a person edits a call's argument on the card, sees the preview of the
edit, and approves; the call runs with the edit and the saved output shows what changed.

Screenshots of the waiting card (edit form open, preview shown) and of the finished run go to
test-output/ at 1100 px and 760 px wide, so that a person can look at them; the test says why
and skips when Chromium, Playwright or JupyterLab is missing.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from .lab import BUTTONS, CHROMIUM, Lab, open_notebook, serve_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "edit.ipynb"
SHOTS = ROOT / "test-output"

SETUP = '''
%load_ext nbagent
import nbagent, nbagent.notebook
from nbagent.models import ScriptedModel, Call, Turn

ran = []

def lines_to_remove(arguments):
    return f"would remove 3 lines from {arguments['path']} (mode {arguments['mode']})"

@nbagent.tool(needs_approval=True, preview=lines_to_remove)
def clean_file(path: str, mode: str = "trim", keep_last: int = 10, dry_run: bool = False) -> str:
    """Remove stale lines from a file."""
    ran.append((path, mode, keep_last))
    return f"cleaned {path}"

nbagent.notebook.current_session().set_model(ScriptedModel([
    Turn("I will clean the log.", Call("clean_file", {"path": "logs/app.log", "mode": "trim"})),
    "Cleaned it.",
], chunk_delay=0.01))
'''


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from serve_notebook(
        tmp_path_factory,
        "lab-edit",
        NOTEBOOK,
        [
            textwrap.dedent(SETUP).strip(),
            "%agent Clean the log",
            "print('ran:', ran)",
        ],
    )


def test_edit_an_argument_and_approve_in_jupyterlab(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    timeout = 60_000
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1100})
        try:
            open_notebook(page, lab, NOTEBOOK)
            page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            page.keyboard.press("Shift+Enter")  # setup
            page.keyboard.press("Shift+Enter")  # %agent Clean the log
            expect(page.get_by_text("would remove 3 lines from logs/app.log").first).to_be_visible(
                timeout=timeout
            )
            page.locator(BUTTONS, has_text=re.compile(r"^\s*Edit\s*$")).click()
            path_box = page.locator(".nbagent-edit input[type='text']").first
            expect(path_box).to_have_value("logs/app.log", timeout=timeout)
            path_box.fill("logs/old.log")
            path_box.press("Tab")  # the browser sends the new value
            page.locator(BUTTONS, has_text="Preview edit").click()
            expect(page.get_by_text("would remove 3 lines from logs/old.log").first).to_be_visible(
                timeout=timeout
            )
            label = 'Preview of your edit {"path": "logs/old.log", "mode": "trim"'
            expect(page.get_by_text(label).first).to_be_visible(timeout=timeout)
            card = page.locator(".nbagent-card").first
            card.scroll_into_view_if_needed()
            card.screenshot(path=str(SHOTS / "edit-card-1100.png"))
            page.set_viewport_size({"width": 760, "height": 1100})
            card.screenshot(path=str(SHOTS / "edit-card-760.png"))
            page.set_viewport_size({"width": 1100, "height": 1100})
            page.locator(BUTTONS, has_text="Approve").click()
            expect(page.get_by_text("Cleaned it.").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("approved by you with your edit").first).to_be_visible(
                timeout=timeout
            )
            diff = 'by you: /path "logs/app.log" → "logs/old.log"'
            expect(page.get_by_text(diff).first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("cleaned logs/old.log").first).to_be_visible(timeout=timeout)
            assert page.locator(BUTTONS, has_text="Approve").count() == 0  # static output now
            editors = page.locator(".jp-Cell .jp-InputArea-editor .cm-content")
            editors.nth(2).click()  # the click on Approve took the focus
            page.keyboard.press("Shift+Enter")  # print('ran:', ran)
            expect(page.get_by_text("ran: [('logs/old.log', 'trim', 10)]")).to_be_visible(
                timeout=timeout
            )
            run = page.locator(".jp-OutputArea-output .nbagent-run").first
            run.scroll_into_view_if_needed()
            run.screenshot(path=str(SHOTS / "edit-static-1100.png"))
            page.set_viewport_size({"width": 760, "height": 1100})
            run.screenshot(path=str(SHOTS / "edit-static-760.png"))
            assert page.get_by_text("model not found").count() == 0
        except Exception:
            page.screenshot(path=str(SHOTS / "edit-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
