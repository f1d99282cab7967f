"""End to end in a real browser: JupyterLab, Debian's chromium, a person clicking Approve and Deny.

Needs /usr/bin/chromium, Playwright for Python and JupyterLab (scripts/test installs them); the
test says why and skips when one is missing. It never downloads a browser. The screenshot goes to
test-output/approval.png; NBAGENT_UPDATE_SCREENSHOTS=1 also refreshes docs/images/approval.png.
"""

from __future__ import annotations

import os
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from .lab import BUTTONS, CHROMIUM, Lab, open_notebook, serve_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "approval.ipynb"
SCREENSHOT = ROOT / "test-output" / "approval.png"
README_IMAGE = ROOT / "docs" / "images" / "approval.png"

SETUP = '''
%load_ext nbagent
import nbagent, nbagent.notebook
from nbagent.models import ScriptedModel, Call, Turn

ran = []

@nbagent.tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append(path)
    return f"deleted {path}"

nbagent.notebook.current_session().set_model(ScriptedModel([
    Turn("I will **delete** `a.txt` <img src=x onerror=\\"window.__pwned=1\\"> "
         "[see](javascript:window.__pwned=2) [docs](https://example.com/a_(b))",
         Call("delete_file", {"path": "a.txt"})),
    "Done: *a.txt* is gone.",
    Turn("Then `b.txt` goes too.", Call("delete_file", {"path": "b.txt"})),
    "Understood, b.txt stays.",
], chunk_delay=0.01))
'''


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from serve_notebook(
        tmp_path_factory,
        "lab",
        NOTEBOOK,
        [
            textwrap.dedent(SETUP).strip(),
            "%agent Delete a.txt",
            "%agent Now delete b.txt",
        ],
    )


def test_approve_then_deny_in_jupyterlab(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    timeout = 60_000
    # texts are matched with .first: when a run ends its output is updated with the transcript,
    # and JupyterLab re-renders the view, so for a moment a text can be on the page twice
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1300})
        try:
            open_notebook(page, lab, NOTEBOOK)
            page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            page.keyboard.press("Shift+Enter")  # setup
            page.keyboard.press("Shift+Enter")  # %agent Delete a.txt
            approve = page.locator(BUTTONS, has_text="Approve")
            expect(approve).to_have_count(1, timeout=timeout)
            expect(page.get_by_text("I will delete a.txt").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text('"path": "a.txt"').first).to_be_visible(timeout=timeout)
            # a narrow notebook (760 px) shows every button whole, never cut to "✓ …"
            page.set_viewport_size({"width": 760, "height": 1300})
            for label in ("Approve", "Deny", "Always allow"):
                button = page.locator(BUTTONS, has_text=label).first
                expect(button).to_be_visible(timeout=timeout)
                cut = button.evaluate("b => b.scrollWidth > b.clientWidth + 1")
                assert not cut, f"the {label} button is cut at 760 px"
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT.with_name("approval-760.png")), full_page=True)
            page.set_viewport_size({"width": 1100, "height": 1300})
            # the live view: the model's links are kept only for http(s), never javascript:
            assert page.locator(".nbagent-stream a[href^='javascript']").count() == 0
            live = page.locator(".nbagent-stream a", has_text="docs").first
            assert live.get_attribute("href") == "https://example.com/a_(b)"
            assert live.get_attribute("rel") == "noopener noreferrer nofollow"
            approve.click()
            expect(page.get_by_text("deleted a.txt").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("Done: a.txt is gone.").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("approved by you").first).to_be_visible(timeout=timeout)
            expect(approve).to_have_count(0)  # the run ended: its view became plain output

            editors = page.locator(".jp-Cell .jp-InputArea-editor .cm-content")
            editors.nth(2).click()  # the click on Approve took the focus
            page.keyboard.press("Shift+Enter")  # %agent Now delete b.txt
            deny = page.locator(BUTTONS, has_text="Deny").last
            expect(page.get_by_text("Then b.txt goes too.").first).to_be_visible(timeout=timeout)
            expect(deny).to_be_enabled(timeout=timeout)
            reason = page.get_by_placeholder("Reason for the model (optional)").last
            reason.fill("b.txt is still needed")
            deny.scroll_into_view_if_needed()
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            deny.click()
            expect(page.get_by_text("Understood, b.txt stays.").first).to_be_visible(
                timeout=timeout
            )
            expect(page.get_by_text("denied by you: b.txt is still needed").first).to_be_visible(
                timeout=timeout
            )
            # the model's text was shown, and its <img onerror> never ran, live or static
            assert page.evaluate("window.__pwned") is None
            outputs = ".jp-OutputArea-output"
            assert page.locator(f"{outputs} a[href^='javascript']").count() == 0
            assert page.locator(f"{outputs} img[src='x']").count() == 0
            docs = page.locator(f"{outputs} a", has_text="docs").first
            assert docs.get_attribute("href") == "https://example.com/a_(b)"
            assert page.get_by_text("deleted b.txt").count() == 0
            assert page.get_by_text("model not found").count() == 0
        except Exception:
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT.with_name("approval-failure.png")), full_page=True)
            raise
        finally:
            browser.close()
    if os.environ.get("NBAGENT_UPDATE_SCREENSHOTS") == "1" or not README_IMAGE.exists():
        README_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SCREENSHOT, README_IMAGE)
