"""A person runs an ``%agent`` cell again (or presses Run All again) while its run waits for
Approve: JupyterLab clears the cell's output at once and queues the new execution behind the
waiting one. The old buttons are gone, so the old run must stop by itself and the new one must
show its own buttons, instead of the cell spinning at ``[*]`` with an empty output for ever.

Also checked: a waiting run whose cell is only scrolled out of sight, or collapsed, goes on
waiting (its view is still there), and Kernel > Interrupt stops a waiting run with a one-line
message, leaving every button disabled and the next cell runnable.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab import BUTTONS, CHROMIUM, Lab, menu, open_notebook, serve_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "rerun.ipynb"
SHOTS = ROOT / "test-output"
TIMEOUT = 60.0

SETUP = '''
%load_ext nbagent
import nbagent

ran = []

@nbagent.tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (this one only pretends)."""
    ran.append(path)
    return f"deleted {path}"
'''


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from serve_notebook(
        tmp_path_factory,
        "lab-rerun",
        NOTEBOOK,
        [
            textwrap.dedent(SETUP).strip(),
            '%agent Please delete_file "a.txt"',
            "print('ran:', ran)",
        ],
    )


@pytest.fixture
def page(lab: Lab) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1000})
        try:
            open_notebook(page, lab, NOTEBOOK)
            yield page
        except Exception:
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / "rerun-failure.png"), full_page=True)
            raise
        finally:
            browser.close()


def wait_for(what: str, check: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def prompt(page: Any, index: int) -> str:
    return str(page.locator(".jp-CodeCell .jp-InputArea-prompt").nth(index).inner_text()).strip()


def output(page: Any, index: int) -> str:
    return str(page.locator(".jp-CodeCell").nth(index).locator(".jp-OutputArea").inner_text())


def run_cell(page: Any, index: int) -> None:
    """Click into a cell and run it, staying there (Ctrl+Enter)."""
    page.locator(".jp-Cell .jp-InputArea-editor .cm-content").nth(index).click()
    page.keyboard.press("Control+Enter")


def enabled_approve(page: Any) -> Any:
    buttons = page.locator(BUTTONS, has_text="Approve")
    return buttons.count() == 1 and buttons.first.is_enabled() and buttons.first


def start_waiting_run(page: Any) -> None:
    run_cell(page, 0)
    wait_for("the setup cell", lambda: prompt(page, 0) not in ("[ ]:", "[*]:"))
    page.evaluate("() => document.querySelector('.jp-WindowedPanel-outer').scrollTop = 0")
    run_cell(page, 1)
    wait_for("the Approve button", lambda: enabled_approve(page))


def ran(page: Any) -> str:
    run_cell(page, 2)
    wait_for("the print cell", lambda: "ran:" in output(page, 2))
    return output(page, 2).strip()


def test_running_a_waiting_cell_again_stops_the_old_run_and_asks_again(page: Any) -> None:
    start_waiting_run(page)
    # while it waits, its view stays even when the cell is scrolled away or collapsed
    page.evaluate("() => document.querySelector('.jp-WindowedPanel-outer').scrollTop = 1e6")
    menu(page, "View", "Collapse All Outputs")
    time.sleep(4.0)  # longer than the grace the run gives a cleared view
    menu(page, "View", "Expand All Outputs")
    assert enabled_approve(page), "a collapsed or scrolled-away run must go on waiting"
    assert "cancelled" not in output(page, 1)

    run_cell(page, 1)  # again, while the first run waits: its buttons are cleared at once
    approve = wait_for("the second run's Approve button", lambda: enabled_approve(page))
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "rerun-asks-again.png"))
    approve.click()
    wait_for("the second run to finish", lambda: prompt(page, 1) not in ("[ ]:", "[*]:"))
    wait_for("the result", lambda: "deleted a.txt" in output(page, 1))
    assert "approved by you" in output(page, 1)
    assert ran(page) == "ran: ['a.txt']"  # the first run's call never ran

    # Run All twice: the second clears the waiting cell too, and everything still runs
    menu(page, "Run", "Run All Cells")
    wait_for("the Approve button", lambda: enabled_approve(page))
    menu(page, "Run", "Run All Cells")
    wait_for("the repeated Run All's Approve button", lambda: enabled_approve(page)).click()
    wait_for("Run All to finish", lambda: "ran:" in output(page, 2), timeout=TIMEOUT * 2)
    assert output(page, 2).strip() == "ran: ['a.txt']"  # the setup cell emptied the list


def test_kernel_interrupt_stops_a_waiting_run_in_one_line(page: Any) -> None:
    start_waiting_run(page)
    started = time.monotonic()
    menu(page, "Kernel", "Interrupt Kernel")
    wait_for("the cell to end", lambda: prompt(page, 1) not in ("[ ]:", "[*]:"), timeout=30)
    assert time.monotonic() - started < 20
    shown = wait_for("the error line", lambda: output(page, 1))
    assert "was stopped by a kernel interrupt" in shown
    assert "Traceback" not in shown and "runner.py" not in shown, shown
    assert "cancelled" in shown
    buttons = page.locator(BUTTONS)
    assert all(not buttons.nth(i).is_enabled() for i in range(buttons.count()))
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "interrupted-approval.png"))
    assert ran(page) == "ran: []"
