"""The course in Notebook 7 (the classic-style interface on JupyterLab's parts): Run All with the
approvals clicked, at 1100 px and 760 px, then saved, shut down and reopened; and where
``%agent cells`` puts the code (measured: one new cell directly below, as in JupyterLab).

Notebook 7 shares JupyterLab's renderers but not its page: no status bar, no side panel (so a
760 px window leaves the notebook twice as wide as in JupyterLab), its own URL. Needs the
``notebook`` package (the browser extra installs it); skips, saying why, without it.
"""

from __future__ import annotations

import shutil
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .course import (
    EXPECTED,
    SHOTS,
    WIDE_IMAGES,
    output_text,
    page_problems,
    run_all,
)
from .lab import CHROMIUM, Lab, faint_text, missing, open_in_notebook7, running_lab
from .test_jupyterlab_kernel import LESSON, inserted_cells

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "03_approvals.ipynb"


@pytest.fixture(scope="module")
def notebook7(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    reason = missing()
    try:
        import notebook  # noqa: F401
    except ImportError:
        reason = reason or "Notebook 7 is not installed (pip install notebook)"
    if reason:
        print(f"browser test skipped: {reason}")
        pytest.skip(reason)
    home = tmp_path_factory.mktemp("notebook7")
    work = home / "work"
    shutil.copytree(ROOT / "notebooks", work)
    with running_lab(work, home, app="notebook") as server:
        yield server


def test_run_all_save_and_reopen_in_notebook7(notebook7: Lab) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page: Any = browser.new_page(viewport={"width": 1100, "height": 1000})
        try:
            open_in_notebook7(page, notebook7, NOTEBOOK)
            assert run_all(page) == 2  # the two %agent calls that ask
            assert page_problems(page) == []
            shown = output_text(page)
            assert [t for t in EXPECTED["03_approvals"] if t not in shown] == []
            assert page.locator(".jp-OutputArea-output .jupyter-widgets").count() == 0
            for width in (1100, 760):
                page.set_viewport_size({"width": width, "height": 1000})
                assert page.evaluate(WIDE_IMAGES) == [], width
                assert faint_text(page) == [], width
            page.keyboard.press("Control+s")
            deadline = time.monotonic() + 30
            while "deleted old.log" not in (notebook7.root / NOTEBOOK).read_text():
                assert time.monotonic() < deadline, "Ctrl+S did not save the outputs"
                time.sleep(0.3)
            for kernel in notebook7.api("/api/kernels"):
                try:
                    notebook7.api(f"/api/kernels/{kernel['id']}", method="DELETE")
                except urllib.error.HTTPError as error:
                    if error.code != 404:
                        raise
            page.close()

            page = browser.new_page(viewport={"width": 760, "height": 1000})
            page.goto(f"{notebook7.url}/notebooks/{NOTEBOOK}?token={notebook7.token}")
            page.locator(".jp-OutputArea-output").first.wait_for(timeout=60_000)
            time.sleep(2.0)  # widget outputs would fail to render by now
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / "notebook7-reopened-760.png"))
            assert page_problems(page) == []
            shown = output_text(page)
            for text in ("deleted old.log", "approved by you", "You: Please delete_file"):
                assert text in shown, text
            assert faint_text(page) == []
        except Exception:
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / "notebook7-failure.png"), full_page=True)
            raise
        finally:
            browser.close()


@pytest.mark.timeout(300)
def test_agent_cells_puts_the_code_in_one_new_cell_below_in_notebook7(notebook7: Lab) -> None:
    """Notebook 7 acts on the kernel's ``set_next_input`` payload as JupyterLab does: after
    lesson 11's Run All (both snippets approved), one new cell directly below ``%agent cells``
    holds the steps' code in order, each under its comment; running it again adds another."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page: Any = browser.new_page(viewport={"width": 1100, "height": 1000})
        try:
            open_in_notebook7(page, notebook7, LESSON)
            assert run_all(page) == 2  # the two run_python snippets
            assert page_problems(page) == []
            inserted_cells(page)
        except Exception:
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / "notebook7-cells-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
