"""A typed answer in JupyterLab (headless Chromium): the card shows the answer's fields filling
in while it streams (the model holds the rest until the page's button is clicked), then the
validated value; model text in it is escaped. Screenshots go to test-output/typed-*.png."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from .lab import BUTTONS, CHROMIUM, Lab, Shots, kernel_idle, open_notebook, serve_notebook, wait_for

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "typed.ipynb"

SETUP = """
%load_ext nbagent
import asyncio, dataclasses
import ipywidgets
import nbagent.notebook
from nbagent.generation import Finish, TextDelta, Usage
from nbagent.models import FunctionModel

@dataclasses.dataclass
class Person:
    name: str
    city: str
    age: int
    languages: list[str]

class Native(FunctionModel):
    def native_answers(self, schema):
        return True, "test structured output"

more = asyncio.Event()
rest = ipywidgets.Button(description="send the rest")
rest.on_click(lambda _button: more.set())

async def answer(request):
    for piece in ['{"name": "Ann <img src=x onerror=\\\\"window.__pwned=1\\\\">", ', '"city": "Be']:
        yield TextDelta(piece)
    await more.wait()
    for piece in ['rn", "age": 31, ', '"languages": ["de", "fr"]}']:
        yield TextDelta(piece)
    yield Finish("stop", Usage(10, 5))

nbagent.notebook.current_session().set_model(Native(answer))
rest
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from serve_notebook(
        tmp_path_factory,
        "typed",
        NOTEBOOK,
        [textwrap.dedent(SETUP).strip(), "%agent --output Person -o p Who is Ann?"],
    )


def test_the_answer_fills_in_then_shows_validated(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    timeout = 60_000
    shots = Shots(ROOT / "test-output")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        try:
            open_notebook(page, lab, NOTEBOOK)
            page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            page.keyboard.press("Shift+Enter")  # setup (shows the button)
            page.keyboard.press("Shift+Enter")  # %agent --output Person …
            block = page.locator(".nbagent-answer").first
            expect(block).to_contain_text("filling in", timeout=timeout)
            expect(block).to_contain_text("Be", timeout=timeout)
            assert "age" not in block.inner_text()  # the fields not yet arrived are not there
            assert "<img" in block.inner_text()  # the model's markup, as text
            shots.take(page, "typed-filling-in", block)
            page.locator(BUTTONS, has_text="send the rest").click()
            answer = page.locator(".jp-OutputArea-output", has_text="Answer").last
            expect(answer).to_contain_text("Bern", timeout=timeout)
            expect(answer).to_contain_text("31", timeout=timeout)
            expect(page.get_by_text("filling in")).to_have_count(0, timeout=timeout)
            shots.take(page, "typed-validated", answer)
            wait_for("the cell to end", lambda: kernel_idle(page))
            saved = page.locator(".jp-OutputArea-output", has_text="Answer").last
            expect(saved).to_contain_text("languages", timeout=timeout)  # the static output
            expect(page.locator(".nbagent-answer")).to_have_count(0, timeout=timeout)
            assert '"city": "Bern"' not in saved.inner_text()  # the table, not the JSON again
            shots.take(page, "typed-saved", saved)
            assert page.evaluate("window.__pwned") is None
            assert page.locator(".jp-OutputArea-output img[src='x']").count() == 0
        except Exception:
            shots.take(page, "typed-failure")
            raise
        finally:
            browser.close()
