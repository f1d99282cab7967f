"""An external agent's run in a cell of JupyterLab, in Debian's chromium: ``%agent --acp`` with a
real ACP agent (tests/acp/scripted_agent.py, written with the SDK's agent side), its plan and
thoughts streaming, its permission request clicked Approve, and the notebook saved and
reopened readable (the run as static outputs, no widget errors).

Screenshots go to test-output/acp-*.png.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .lab import BUTTONS, CHROMIUM, Lab, open_notebook, serve_notebook

pytest.importorskip("acp", reason="the acp extra (agent-client-protocol) is not installed")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "acp.ipynb"
SHOTS = ROOT / "test-output"
SCRIPT = ROOT / "tests" / "acp" / "scripted_agent.py"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from serve_notebook(
        tmp_path_factory,
        "lab-acp",
        NOTEBOOK,
        [
            f"%load_ext nbagent\n%agent acp add scripted -- {sys.executable} {SCRIPT}",
            "%agent --acp scripted chat",
            "%agent --acp scripted tool",
        ],
    )


def test_an_external_agent_s_run_approved_saved_and_reopened(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    timeout = 60_000
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        try:
            open_notebook(page, lab, NOTEBOOK)
            page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            page.keyboard.press("Shift+Enter")  # load, register
            page.keyboard.press("Shift+Enter")  # chat
            expect(page.get_by_text("Hello, notebook!").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("read the question").first).to_be_visible(timeout=timeout)
            page.keyboard.press("Shift+Enter")  # tool: asks permission
            approve = page.locator(BUTTONS, has_text="Approve")
            expect(approve).to_have_count(1, timeout=timeout)
            expect(page.get_by_text("Run ls").first).to_be_visible(timeout=timeout)
            approve.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "acp-asking.png"), full_page=True)
            approve.click()
            expect(page.get_by_text("ran (yes)").first).to_be_visible(timeout=timeout)
            expect(approve).to_have_count(0, timeout=timeout)  # ended: plain outputs now
            page.screenshot(path=str(SHOTS / "acp-ended.png"), full_page=True)
            page.keyboard.press("Control+s")
            page.wait_for_timeout(1500)
            saved = lab.api(f"/api/contents/{NOTEBOOK}")["content"]
            texts = "\n".join(
                str(o.get("data", {}).get("text/plain", ""))
                for cell in saved["cells"]
                for o in cell.get("outputs", [])
            )
            assert "Hello, notebook!" in texts and "ran (yes)" in texts

            page.reload()
            expect(page.get_by_text("ran (yes)").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("Hello, notebook!").first).to_be_visible(timeout=timeout)
            assert page.get_by_text("Error displaying widget").count() == 0
            page.screenshot(path=str(SHOTS / "acp-reopened.png"), full_page=True)
        finally:
            browser.close()
