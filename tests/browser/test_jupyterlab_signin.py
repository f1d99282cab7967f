"""Signing in to an OAuth-protected MCP server from JupyterLab, in Debian's chromium, as a
person does it: the link in the cell, a click on it, the authorization server's redirects in a
new tab, the loopback listener's page, and the cell going on.

The server is tests/mcp/oauth_server.py (the SDK's own server-side auth, on 127.0.0.1), whose
consent page answers as a person who clicked "Allow". The sequence, and why:

1. ``%agent mcp add`` shows the sign-in link as a plain link; a click opens it in a new tab,
   which follows the authorization server to ``http://127.0.0.1:PORT/callback`` (the kernel's
   listener: the browser runs on the kernel's machine); that page says so in plain words, and
   the cell says how the sign-in ended.
2. ``%agent mcp list`` says signed in and until when; an ``%agent`` cell calls the server's
   ``whoami`` (the offline stand-in calls a tool the prompt names), approved by a click.
3. Save, shut the kernel down, reopen: every output reads without a kernel, and the saved file
   holds none of the codes and tokens the server issued.
4. A second notebook: nobody clicks, and Kernel > Interrupt ends the waiting cell with one clear
   line; the kernel lives and the next cell runs.

Screenshots of each moment go to the test's tmp dir (their paths are printed).
"""

from __future__ import annotations

import json
import re
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

from ..mcp.oauth import leaked, oauth_server, stats
from .course import page_problems
from .lab import (
    BUTTONS,
    CHROMIUM,
    KERNELSPEC,
    Lab,
    Shots,
    faint_text,
    menu,
    open_notebook,
    running_lab,
    skip_unless_browser,
    wait_for,
)

SIGN_IN = "signin.ipynb"
INTERRUPT = "interrupt.ipynb"
TIMEOUT = 120.0
EDITOR = ".jp-InputArea-editor .cm-content"
OUTPUTS = ".jp-Cell-outputArea"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with oauth_server() as url:
        yield url


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, base: str) -> Iterator[Lab]:
    skip_unless_browser()
    import nbformat

    home = tmp_path_factory.mktemp("lab-signin")
    work = home / "work"
    work.mkdir()
    notebooks = {
        SIGN_IN: [
            "%load_ext nbagent",
            f"%agent mcp add secure --url {base}/mcp",
            "%agent mcp list",
            "%agent Ask the server whoami",
        ],
        INTERRUPT: [
            "%load_ext nbagent",
            f"%agent mcp add secure --url {base}/mcp",
            "print('the kernel goes on:', 6 * 7)",
        ],
    }
    for name, cells in notebooks.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell(code) for code in cells]
        nb.metadata["kernelspec"] = KERNELSPEC
        nbformat.write(nb, work / name)
    with running_lab(work, home) as server:
        yield server


@pytest.fixture
def browser(lab: Lab) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def cell(page: Any, index: int) -> Any:
    return page.locator(".jp-CodeCell").nth(index)


def run(page: Any, index: int) -> None:
    """Click into cell ``index`` and run it (Ctrl+Enter: the focus stays there)."""
    cell(page, index).locator(EDITOR).click()
    page.keyboard.press("Control+Enter")


def prompt(page: Any, index: int) -> str:
    return str(cell(page, index).locator(".jp-InputArea-prompt").inner_text()).strip()


def ran(page: Any, index: int) -> bool:
    return prompt(page, index) not in ("[ ]:", "[*]:", "")


def output(page: Any, index: int) -> str:
    return str(cell(page, index).locator(OUTPUTS).inner_text())


def shut_down_kernels(lab: Lab) -> None:
    for kernel in lab.api("/api/kernels"):
        try:
            lab.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        except urllib.error.HTTPError as error:
            if error.code != 404:  # listed, and gone by the time we asked
                raise


def wait_saved(lab: Lab, notebook: str, text: str) -> str:
    def saved() -> str | None:
        raw = (lab.root / notebook).read_text()
        if text not in raw:
            return None
        try:
            json.loads(raw)
        except json.JSONDecodeError:  # read while JupyterLab was writing it
            return None
        return raw

    return str(wait_for(f"the saved notebook to hold {text!r}", saved, 30))


def the_link(page: Any, index: int) -> Any:
    """The sign-in link cell ``index`` shows, once it is there."""
    link = cell(page, index).locator(f"{OUTPUTS} a", has_text="open the sign-in page")
    link.wait_for(timeout=TIMEOUT * 1000)
    return link


@pytest.mark.timeout(600)
def test_sign_in_by_clicking_the_link_call_save_reopen(
    lab: Lab, base: str, browser: Any, tmp_path: Path
) -> None:
    shots = Shots(tmp_path / "shots")
    context = browser.new_context(viewport={"width": 1100, "height": 1000})
    page = context.new_page()
    try:
        # --- 1. the link in the cell, a click, the loopback page ---------------------------
        open_notebook(page, lab, SIGN_IN)
        run(page, 0)
        wait_for("%load_ext", lambda: ran(page, 0))
        run(page, 1)
        link = the_link(page, 1)
        shots.take(page, "1-link-waiting", cell(page, 1))
        assert str(link.get_attribute("href")).startswith(f"{base}/authorize?")
        assert link.get_attribute("target") == "_blank"
        waiting = output(page, 1)
        assert "Sign in to the MCP server secure (127.0.0.1:" in waiting
        assert "This cell goes on when you have signed in" in waiting
        assert "<a" not in waiting and "href" not in waiting  # a link, not its markup
        assert faint_text(page) == []
        calls = stats(base)["calls"]
        with context.expect_page(timeout=TIMEOUT * 1000) as opened:
            link.click()  # as a person: the browser follows the server's redirects
        tab = opened.value
        wait_for("the loopback page", lambda: "Sign-in received" in tab.title())
        shots.take(tab, "2-loopback-page")
        assert tab.url.startswith("http://127.0.0.1:") and "/callback?" in tab.url
        assert tab.title() == "Sign-in received · nbagent"
        assert tab.locator("h1").inner_text() == "Sign-in received"
        said = tab.locator("p").inner_text()
        assert said.startswith("Your sign-in to the MCP server secure reached nbagent"), said
        assert "You can close this tab." in said
        assert leaked(base, tab.content()) == []  # the code is in its address, not its page
        tab.close()
        # the cell ends, then its output is replaced by the table: wait for both (read at once,
        # the page can still show the first line alone)
        wait_for(
            "the add cell to end with its table",
            lambda: (
                ran(page, 1) and output(page, 1).startswith("Signed in to the MCP server secure.\n")
            ),
        )
        signed = output(page, 1)
        shots.take(page, "3-signed-in", cell(page, 1))
        assert signed.startswith("Signed in to the MCP server secure.\n"), signed
        assert "open the sign-in page" not in signed
        assert cell(page, 1).locator(f"{OUTPUTS} a[href*='/authorize']").count() == 0

        # --- 2. the list says until when; a call ---------------------------------------------
        run(page, 2)
        wait_for("%agent mcp list", lambda: ran(page, 2))
        listed = output(page, 2)
        shots.take(page, "4-list", cell(page, 2))
        assert re.search(r"signed in, expires at \d\d:\d\d \(in (59|60) min\)", listed), listed
        run(page, 3)
        approve = cell(page, 3).locator(BUTTONS, has_text="Approve")
        approve.wait_for(timeout=TIMEOUT * 1000)
        shots.take(page, "5-approve", cell(page, 3))
        assert "secure__whoami" in output(page, 3)
        approve.click()
        wait_for("the %agent cell to end", lambda: ran(page, 3))
        called = output(page, 3)
        shots.take(page, "6-called", cell(page, 3))
        assert "⚙ secure__whoami · approved by you" in called, called
        assert "the secure server, signed in" in called
        assert stats(base)["calls"] == calls + 1
        assert page_problems(page) == []
        assert faint_text(page) == []

        # --- 3. save, shut down, reopen ------------------------------------------------------
        page.keyboard.press("Control+s")
        raw = wait_saved(lab, SIGN_IN, "the secure server, signed in")
        saved = json.loads(raw)
        assert "application/vnd.jupyter.widget-view+json" not in json.dumps(saved["cells"])
        assert leaked(base, raw) == []  # no code, token or client secret the server issued
        assert stats(base)["codes"] >= 1 and stats(base)["tokens"] >= 1  # some were issued
        menu(page, "Kernel", "Shut Down Kernel")
        page.close()
        shut_down_kernels(lab)
        page = context.new_page()
        open_notebook(page, lab, SIGN_IN)  # a fresh kernel, which ran nothing: the saved outputs
        wait_for("the saved outputs", lambda: "the secure server, signed in" in output(page, 3))
        shots.take(page, "7-reopened")
        assert output(page, 1).startswith("Signed in to the MCP server secure.")
        assert "signed in, expires at" in output(page, 2)
        assert page_problems(page) == []
        assert page.locator(".jupyter-widgets").count() == 0
        assert faint_text(page) == []
    except Exception:
        shots.take(page, "failure")
        raise
    finally:
        context.close()


@pytest.mark.timeout(300)
def test_interrupting_the_waiting_cell_ends_it_with_one_line(
    lab: Lab, base: str, browser: Any, tmp_path: Path
) -> None:
    shots = Shots(tmp_path / "shots")
    context = browser.new_context(viewport={"width": 1100, "height": 1000})
    page = context.new_page()
    try:
        open_notebook(page, lab, INTERRUPT)
        run(page, 0)
        wait_for("%load_ext", lambda: ran(page, 0))
        run(page, 1)
        the_link(page, 1)
        shots.take(page, "1-waiting", cell(page, 1))
        assert prompt(page, 1) == "[*]:"  # it waits for the person
        menu(page, "Kernel", "Interrupt Kernel")
        wait_for("the add cell to end", lambda: ran(page, 1))
        shots.take(page, "2-interrupted", cell(page, 1))
        assert output(page, 1).strip() == (
            "KeyboardInterrupt: adding the MCP server 'secure' was stopped by a kernel "
            "interrupt: it was not added"
        )
        assert cell(page, 1).locator(f"{OUTPUTS} a").count() == 0  # no dead link left
        run(page, 2)
        wait_for("the next cell", lambda: ran(page, 2))
        shots.take(page, "3-next-cell", cell(page, 2))
        assert output(page, 2).strip() == "the kernel goes on: 42"
    except Exception:
        shots.take(page, "failure")
        raise
    finally:
        context.close()
