"""Text with dollar signs stays text in JupyterLab: MathJax typesets ``$…$`` in HTML and Markdown
outputs, so "costs $5 and $10" read "costs 5and10" (italic TeX) in a finished run, a tool's
result, a report such as ``%agent mcp list`` and a batch's summary. Checked live and after the
saved notebook is reopened (outputs rendered from the file, no kernel state)."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab import CHROMIUM, Lab, cells_done, menu, open_notebook, serve_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "dollars.ipynb"
SCREENSHOT = ROOT / "test-output" / "dollars.png"

SETUP = '''
%load_ext nbagent
import nbagent, nbagent.notebook, pandas as pd
from nbagent.models import ScriptedModel, FunctionModel, Call, Turn

@nbagent.tool
def price(item: str) -> str:
    """The price of an item."""
    return f"tool says: {item} costs $5 and $10 with tax"

session = nbagent.notebook.current_session()
session.set_model(ScriptedModel([Turn(Call("price", {"item": "tea"})),
                                 "answer says: it costs $5 and $10 in total."]))
'''

MAP = """
def decide(request):
    raise RuntimeError("map says: over $5 and $10 budget")
session.set_model(FunctionModel(decide))
rows = pd.DataFrame({"item": ["tea"]})
"""

REPORT = """
from nbagent.notebook.reports.classreport import _show
_show("report says: `$ref` at $5 and $10", "report says: $5 and $10")
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from serve_notebook(
        tmp_path_factory,
        "dollars",
        NOTEBOOK,
        [
            textwrap.dedent(SETUP).strip(),
            "%agent --approve auto What does tea cost?",
            textwrap.dedent(MAP).strip(),
            '%agent map --over rows -o out "{item}"',
            textwrap.dedent(REPORT).strip(),
        ],
    )


def _texts(page: Any) -> str:
    return str(page.locator(".jp-OutputArea-output").all_inner_texts())


def _check(page: Any, when: str) -> None:
    from playwright.sync_api import expect

    for who in ("answer says", "tool says", "map says", "report says"):
        expect(page.get_by_text(who).first).to_be_visible(timeout=60_000)
    assert page.locator(".jp-OutputArea-output mjx-container").count() == 0, when
    texts = _texts(page)
    for expected in (
        "it costs $5 and $10 in total",
        "tea costs $5 and $10 with tax",
        "over $5 and $10 budget",
        "$ref at $5 and $10",
    ):
        assert expected in texts, f"{when}: {expected!r} not shown as text"


def test_dollar_signs_are_not_typeset_live_or_reopened(lab: Lab) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        try:
            open_notebook(page, lab, NOTEBOOK)
            menu(page, "Run", "Run All Cells")
            page.wait_for_function(
                "() => document.body.innerText.includes('report says')", timeout=120_000
            )
            page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]"
                ".every(p => /\\[\\d+\\]/.test(p.textContent))",
                timeout=120_000,
            )
            assert cells_done(page)
            page.wait_for_timeout(1000)  # MathJax typesets shortly after an output is shown
            _check(page, "live")
            page.keyboard.press("Control+s")
            page.wait_for_timeout(1000)
            page.goto(lab.page_url(NOTEBOOK))
            page.locator(".jp-OutputArea-output").first.wait_for(timeout=60_000)
            page.wait_for_timeout(1000)
            _check(page, "reopened")
        except Exception:
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            raise
        finally:
            browser.close()
