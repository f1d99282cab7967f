"""Step mode, a fork and a comparison in a real browser: Run All in JupyterLab, a person clicks
**Next** at each pause, rewrites a tool result before the model reads it, then the next cells
fork the run at step 2 and compare the two; the notebook is saved, its kernel shut down, and the
reopened page still shows what the model saw at each step (with the edit) and the comparison.

Needs /usr/bin/chromium, Playwright for Python and JupyterLab (scripts/test installs them); the
test says why and skips when one is missing. Screenshots go to test-output/step-*.png.
"""

from __future__ import annotations

import json
import textwrap
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab import (
    BUTTONS,
    CHROMIUM,
    Lab,
    cells_done,
    menu,
    open_notebook,
    serve_notebook,
    short_ids,
)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "step.ipynb"
SHOTS = ROOT / "test-output"
TIMEOUT = 60_000

SETUP = '''
%load_ext nbagent
import nbagent
from nbagent.models import Call, ScriptedModel, Text, Turn

ran = []

@nbagent.tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    ran.append(city)
    return f"{city}: rain, 9 °C"

nbagent.notebook.current_session().set_model(ScriptedModel([
    Turn(Text("Let me look at Oslo.", chunks=3), Call("weather", {"city": "Oslo"})),
    [Text("Oslo has rain: bring a coat.", chunks=4)],
    [Text("Asked again: pack boots as well.", chunks=4)],
], model="stand-in", chunk_delay=0.01))
'''

EDITED = "Oslo: sunny, 25 °C (edited in the pause bar)"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from serve_notebook(
        tmp_path_factory,
        "lab-step",
        NOTEBOOK,
        [
            textwrap.dedent(SETUP).strip(),
            "%agent --new --step Should I bring a coat to Oslo?",
            "%agent fork run-1 2",
            "%agent compare run-1 run-2",
            "print('ran:', ran)",
        ],
    )


def _output(page: Any, index: int) -> str:
    """The text of code cell ``index``'s outputs."""
    cell = page.locator(".jp-Notebook .jp-CodeCell").nth(index)
    return short_ids(str(cell.locator(".jp-OutputArea").inner_text()))


def _wait(page: Any, predicate: Any, what: str, timeout: float = TIMEOUT / 1000) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _pause(page: Any, header: str) -> Any:
    """The pause bar whose header says ``header`` once it is shown with its buttons enabled."""
    from playwright.sync_api import expect

    bar = page.locator(".nbagent-pause", has_text=header).last
    expect(bar).to_be_visible(timeout=TIMEOUT)
    expect(bar.locator("button", has_text="Next")).to_be_enabled(timeout=TIMEOUT)
    return bar


def test_step_with_next_edit_fork_and_compare_in_jupyterlab(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        try:
            open_notebook(page, lab, NOTEBOOK)
            menu(page, "Run", "Run All Cells")

            # 1: before the first request: the prompt is what the model is about to read
            bar = _pause(page, "before the model request of step 1")
            assert "stand-in: 1 message (new: your prompt), 1 tool" in bar.inner_text()
            assert "ran:" not in _output(page, 4)  # the later cells wait
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / "step-1-request.png"), full_page=True)
            bar.locator("button", has_text="Next").click()

            # 2: the model asked for the weather; the call has not run yet
            bar = _pause(page, "before running the calls of step 1: weather")
            expect(page.get_by_text("Let me look at Oslo.").first).to_be_visible(timeout=TIMEOUT)
            bar.locator("button", has_text="Next").click()

            # 3: before the model reads the result: rewrite it in the bar, then Next
            bar = _pause(page, "before the model request of step 2")
            assert "(new: the result of weather)" in bar.inner_text()
            bar.locator("button", has_text="Edit before sending").click()
            field = bar.locator("textarea").first
            expect(field).to_have_value("Oslo: rain, 9 °C", timeout=TIMEOUT)
            field.fill(EDITED)
            page.screenshot(path=str(SHOTS / "step-3-edit.png"), full_page=True)
            bar.locator("button", has_text="Next").click()

            # the run ends, the fork and the comparison run after it
            expect(page.get_by_text("Oslo has rain: bring a coat.").first).to_be_visible(
                timeout=TIMEOUT
            )
            _wait(page, lambda: cells_done(page), "every cell to run")
            assert page.locator(".nbagent-pause").count() == 0
            assert page.locator(BUTTONS, has_text="Next").count() == 0
            ran_out = _output(page, 4)
            assert "ran: ['Oslo']" in ran_out, ran_out  # the fork did not run the tool again

            # what the model saw at step 2 is the edited result, in the run's saved fold
            stepped = page.locator(".jp-Notebook .jp-CodeCell").nth(1)
            fold = stepped.locator("summary", has_text="What the model saw").first
            expect(fold).to_be_visible(timeout=TIMEOUT)
            fold.click()
            _open_step(stepped, 2)
            expect(stepped.get_by_text(EDITED).first).to_be_visible(timeout=TIMEOUT)

            forked = _output(page, 2)
            assert "Asked again: pack boots as well." in forked, forked
            assert "a fork of run-1" in forked and "at step 2" in forked, forked
            compared = page.locator(".jp-Notebook .jp-CodeCell").nth(3)
            expect(compared.locator("table").first).to_be_visible(timeout=TIMEOUT)
            said = _output(page, 3)
            assert "run-1" in said and "run-2" in said and "step 2" in said, said
            page.screenshot(path=str(SHOTS / "step-done.png"), full_page=True)
            compared.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "step-compare.png"), full_page=True)

            menu(page, "File", "Save Notebook")
            _saved(lab)
            menu(page, "Kernel", "Shut Down Kernel")
            time.sleep(1.0)
        except Exception:
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / "step-failure.png"), full_page=True)
            raise
        finally:
            page.close()
        _no_kernels(lab)

        # reopened with no kernel: the fold, the edit and the comparison are still there
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        try:
            page.goto(lab.page_url(NOTEBOOK))
            page.locator(".jp-OutputArea-output").first.wait_for(timeout=TIMEOUT)
            time.sleep(2.0)  # a widget output would have failed to render by now
            stepped = page.locator(".jp-Notebook .jp-CodeCell").nth(1)
            stepped.locator("summary", has_text="What the model saw").first.click()
            _open_step(stepped, 2)
            expect(stepped.get_by_text(EDITED).first).to_be_visible(timeout=TIMEOUT)
            assert "Oslo has rain: bring a coat." in _output(page, 1)
            assert page.locator(".jp-Notebook .jp-CodeCell").nth(3).locator("table").count()
            assert page.locator(BUTTONS).count() == 0
            assert page.get_by_text("Error displaying widget").count() == 0
            page.screenshot(path=str(SHOTS / "step-reopened.png"), full_page=True)
        finally:
            page.close()
            browser.close()
    raw = (lab.root / NOTEBOOK).read_text()
    assert "application/vnd.jupyter.widget-view+json" not in raw
    assert EDITED in raw


def _open_step(cell: Any, step: int) -> None:
    """Open step ``step`` of an opened "What the model saw" fold."""
    from playwright.sync_api import expect

    summary = cell.locator(".nbagent-exchanges summary", has_text=f"step {step} ·").first
    expect(summary).to_be_visible(timeout=TIMEOUT)
    summary.click()


def _saved(lab: Lab) -> None:
    """Wait until JupyterLab has written the notebook with its outputs."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            saved = json.loads((lab.root / NOTEBOOK).read_text())
        except json.JSONDecodeError:  # read while JupyterLab was writing it
            saved = {"cells": []}
        if sum(bool(c.get("outputs")) for c in saved["cells"]) >= 4:
            return
        time.sleep(0.3)
    raise AssertionError("the notebook was not saved with its outputs")


def _no_kernels(lab: Lab) -> None:
    for kernel in lab.api("/api/kernels"):
        try:
            lab.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        except urllib.error.HTTPError as error:
            if error.code != 404:  # listed and gone by the time we ask
                raise
