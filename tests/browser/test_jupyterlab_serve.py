"""``%agent serve --kernel`` end to end in JupyterLab: an external MCP client (nbagent's own)
calls ``run_python``, the card appears in the serving cell, the person approves in the browser,
the namespace diff shows, Undo puts the variable back, and after ``%agent serve stop`` the
notebook is saved and reopened with no live widget left and no token in it.

Needs /usr/bin/chromium, Playwright and JupyterLab (scripts/test installs them); skips saying why
where one is missing. Screenshots go to test-output/serve*.png.
"""

from __future__ import annotations

import json
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab import BUTTONS, CHROMIUM, Lab, open_notebook, serve_notebook, wait_for

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "serve.ipynb"
SHOTS = ROOT / "test-output"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from serve_notebook(
        tmp_path_factory,
        "serve",
        NOTEBOOK,
        [
            "%load_ext nbagent\nimport nbagent\nserved_value = 1",
            "%agent serve --kernel",
            textwrap.dedent(
                """
                import json, os
                _fd = os.open("serve-connection.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(_fd, "w") as _f:
                    json.dump({"url": nbagent.serve().url, "token": nbagent.serve().token}, _f)
                """
            ).strip(),
            "print('served_value is', served_value)",
            "%agent serve stop",
        ],
    )


def _saved_text(lab: Lab) -> str:
    try:
        return (Path(lab.root) / NOTEBOOK).read_text()
    except OSError:  # JupyterLab writes it now
        return ""


def _call(url: str, token: str, out: dict[str, Any]) -> threading.Thread:
    from nbagent import mcp_server
    from nbagent.tools import ToolCall, ToolContext

    def go() -> None:
        import asyncio

        try:
            with mcp_server("nb", url=url, headers={"Authorization": f"Bearer {token}"}) as c:
                found = {t.name: t for t in c.tools}["nb__run_python"]
                arguments = {"code": "served_value = 2", "purpose": "set served_value"}
                context = ToolContext(ToolCall("c", found.name, "{}"), arguments, found)
                out["result"] = asyncio.run(found.execute(context))
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def test_an_external_run_python_is_approved_diffed_undone_saved_and_reopened(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    timeout = 60_000
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1400})
        try:
            open_notebook(page, lab, NOTEBOOK)
            page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            for _ in range(2):  # setup, %agent serve --kernel
                page.keyboard.press("Shift+Enter")
            # the line to paste, shown once: its script asked the kernel for it (no widget
            # state holds it)
            line = page.locator("pre", has_text="claude mcp add").first
            expect(line).to_be_visible(timeout=timeout)
            shown_line = line.inner_text()
            page.screenshot(path=str(SHOTS / "serve-line.png"))
            page.keyboard.press("Shift+Enter")  # the connection file (the line then leaves)
            connection = Path(lab.root) / "serve-connection.json"
            wait_for("the connection file", connection.exists)
            found = wait_for("its content", lambda: connection.read_text() or None)
            served = json.loads(found)
            assert f"Bearer {served['token']}" in shown_line, shown_line
            expect(page.locator("pre", has_text="claude mcp add")).to_have_count(0, timeout=timeout)
            out: dict[str, Any] = {}
            client = _call(served["url"], served["token"], out)
            approve = page.locator(BUTTONS, has_text="Approve")
            expect(approve).to_have_count(1, timeout=timeout)
            expect(page.get_by_text("served_value = 2").first).to_be_visible(timeout=timeout)
            page.screenshot(path=str(SHOTS / "serve-asking.png"), full_page=True)
            approve.click()
            client.join(60)
            assert "error" not in out, out.get("error")
            assert "served_value" in out["result"].text
            undo = page.locator(BUTTONS, has_text="Undo this call's changes")
            expect(undo).to_have_count(1, timeout=timeout)
            # the header: what, where, by whom (never the token); the footer: the calls
            header = page.locator(".nbagent-run", has_text="Serving over MCP at").first
            expect(header).to_contain_text(served["url"], timeout=timeout)
            expect(header).to_contain_text("used by nbagent", timeout=timeout)
            expect(header).to_contain_text("1 call: 1 approved", timeout=timeout)
            assert served["token"] not in header.inner_text()
            # the request view, live: what the client asked and what went back
            fold = page.get_by_text("What the client asked and got (1 call)").first
            expect(fold).to_be_visible(timeout=timeout)
            fold.click()
            page.locator(".nbagent-served-requests summary", has_text="#1 · run_python").click()
            expect(page.get_by_text("what the client asked").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text('"method": "tools/call"').first).to_be_visible(timeout=timeout)
            page.screenshot(path=str(SHOTS / "serve-done.png"), full_page=True)
            page.keyboard.press("Control+s")  # saved while it serves: no token in the file
            wait_for("the save while serving", lambda: "was shown once" in _saved_text(lab))
            assert served["token"] not in _saved_text(lab)
            undo.click()
            expect(undo.first).to_be_hidden(timeout=timeout)  # it became what the undo did
            editors = page.locator(".jp-Cell .jp-InputArea-editor .cm-content")
            editors.nth(3).click()
            page.keyboard.press("Shift+Enter")  # print(served_value)
            expect(page.get_by_text("served_value is 1").first).to_be_visible(timeout=timeout)
            page.keyboard.press("Shift+Enter")  # %agent serve stop
            expect(page.get_by_text("stopped serving at").first).to_be_visible(timeout=timeout)
            page.keyboard.press("Control+s")
            wait_for(
                "the save",
                lambda: "stopped serving" in (Path(lab.root) / NOTEBOOK).read_text(),
            )
            saved = (Path(lab.root) / NOTEBOOK).read_text()
            assert served["token"] not in saved
            assert "run_python" in saved
            assert "Undid" in saved  # the card says its change was put back
            page.reload()
            expect(page.get_by_text("stopped serving at").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("run_python").first).to_be_visible(timeout=timeout)
            finished = page.locator(".nbagent-run", has_text="now ended").first
            expect(finished).to_contain_text("stopped · 1 call: 1 approved", timeout=timeout)
            assert "tokens" not in finished.inner_text()
            saved_fold = finished.locator("summary", has_text="What the client asked and got")
            saved_fold.first.click()
            finished.locator("summary", has_text="#1 · run_python").first.click()
            expect(finished.get_by_text('"method": "tools/call"').first).to_be_visible(
                timeout=timeout
            )
            page.screenshot(path=str(SHOTS / "serve-reopened.png"), full_page=True)
            expect(page.get_by_text("the line with its token was shown once").first).to_be_visible(
                timeout=timeout
            )
            for gone in ("model not found", "Error displaying widget", "Loading widget"):
                assert page.get_by_text(gone).count() == 0, gone
        except Exception:
            page.screenshot(path=str(SHOTS / "serve-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
