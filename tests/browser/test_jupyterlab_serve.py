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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab import BUTTONS, CHROMIUM, IDLE, Lab, open_notebook, serve_notebook, wait_for

pytest.importorskip("mcp", reason="the mcp SDK is not installed (scripts/test installs the extra)")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "serve.ipynb"
WIDGET = "application/vnd.jupyter.widget-view+json"
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
            wait_for("the save while serving", lambda: "was shown here once" in _saved_text(lab))
            assert served["token"] not in _saved_text(lab)
            assert WIDGET not in _saved_text(lab)  # saved as it stood, not as widgets
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
            assert WIDGET not in saved
            for past in ("Served over MCP at", "used by nbagent", "1 call: 1 approved"):
                assert past in saved, past
            for present in ("nbagent serves at", "asked as in a run", ">Result</div>"):
                assert present not in saved, present
            page.reload()
            expect(page.get_by_text("stopped serving at").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("run_python").first).to_be_visible(timeout=timeout)
            # a record of what happened: what was served, where, when, to whom, how calls went
            finished = page.locator(".nbagent-run", has_text="Served over MCP at").first
            expect(finished).to_contain_text(
                "(stopped with %agent serve stop) · tools: describe_variable, list_variables, "
                "run_python · used by nbagent",
                timeout=timeout,
            )
            expect(finished).to_contain_text("approval was as in a run", timeout=timeout)
            expect(finished).to_contain_text("1 call: 1 approved · served for", timeout=timeout)
            said = finished.inner_text()
            for present in ("Serving over MCP", "serves at", "asked as in a run", "tokens"):
                assert present not in said, present
            # the snippet's pieces carry their own labels: no bare "Result" above "Namespace"
            card = finished.locator("div", has_text="⚙ run_python").filter(has_text="Namespace")
            expect(card.last).to_be_visible(timeout=timeout)
            assert card.last.get_by_text("Result", exact=True).count() == 0
            saved_fold = finished.locator("summary", has_text="What the client asked and got")
            saved_fold.first.click()
            finished.locator("summary", has_text="#1 · run_python").first.click()
            expect(finished.get_by_text('"method": "tools/call"').first).to_be_visible(
                timeout=timeout
            )
            page.screenshot(path=str(SHOTS / "serve-reopened.png"), full_page=True)
            line_note = page.get_by_text("with its token, was shown here once").first
            expect(line_note).to_be_visible(timeout=timeout)
            for gone in ("model not found", "Error displaying widget", "Loading widget"):
                assert page.get_by_text(gone).count() == 0, gone
        except Exception:
            page.screenshot(path=str(SHOTS / "serve-failure.png"), full_page=True)
            raise
        finally:
            browser.close()


# --- every way a serving ends leaves a readable record ------------------------------------------

ENDING_CELLS = [
    textwrap.dedent(
        '''
        %load_ext nbagent
        import nbagent

        @nbagent.tool
        def add(a: int, b: int) -> int:
            """Add two whole numbers."""
            return a + b
        '''
    ).strip(),
    "%agent serve",
    textwrap.dedent(
        """
        import json, os
        _fd = os.open("{name}.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(_fd, "w") as _f:
            json.dump({{"url": nbagent.serve().url, "token": nbagent.serve().token}}, _f)
        """
    ).strip(),
    "%agent serve stop",
]
#: How each serving ends: saved then the kernel shut down; the page reloaded, then stopped
#: there; saved then the kernel restarted; saved, the tab closed, the kernel shut down.
ENDINGS = ("save-shutdown", "reload-stop", "save-restart", "close-shutdown")
GONE = ("model not found", "Error displaying widget", "Loading widget")


def _write_notebook(lab: Lab, name: str) -> Path:
    import nbformat

    from .lab import KERNELSPEC

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code) for code in ENDING_CELLS]
    nb.cells[2].source = ENDING_CELLS[2].format(name=name)
    nb.metadata["kernelspec"] = KERNELSPEC
    path = Path(lab.root) / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


def _kernel_of(lab: Lab, notebook: str) -> str:
    found = [s["kernel"]["id"] for s in lab.api("/api/sessions") if s["path"].endswith(notebook)]
    assert found, f"no kernel for {notebook}"
    return str(found[0])


def _serving_outputs(path: Path) -> list[dict[str, Any]]:
    saved = json.loads(path.read_text())
    return list(saved["cells"][1].get("outputs", []))


def _record_of(outputs: list[dict[str, Any]]) -> dict[str, Any] | None:
    for output in outputs:
        mine = output.get("metadata", {}).get("nbagent")
        if isinstance(mine, dict) and isinstance(mine.get("provenance"), dict):
            return dict(mine["provenance"])
    return None


def _saved_since(path: Path, before: float) -> bool:
    try:
        return path.stat().st_mtime > before and bool(path.read_text())
    except OSError:
        return False


def _save(page: Any, path: Path) -> None:
    before = path.stat().st_mtime
    time.sleep(0.05)  # mtime's resolution: a save in the same instant would look like none
    page.keyboard.press("Control+s")
    wait_for(f"{path.name} saved", lambda: _saved_since(path, before))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ending", ENDINGS)
def test_every_way_serving_ends_leaves_a_readable_record(lab: Lab, ending: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    timeout = 60_000
    name = f"ends-{ending}"
    path = _write_notebook(lab, name)
    notebook = path.name
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1300})
        try:
            open_notebook(page, lab, notebook)
            page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            for _ in range(3):  # the tool, %agent serve, the connection file
                page.keyboard.press("Shift+Enter")
            connection = Path(lab.root) / f"{name}.json"
            found = wait_for(
                "the connection file", lambda: connection.exists() and connection.read_text()
            )
            served = json.loads(found)
            out: dict[str, Any] = {}
            client = _add(served["url"], served["token"], out)
            client.join(60)
            assert "error" not in out, out.get("error")
            assert out["result"].text == "5"
            live = page.locator(".nbagent-run", has_text="Serving over MCP at").first
            expect(live).to_contain_text("1 call", timeout=timeout)
            _save(page, path)  # saved while it serves
            saved = _serving_outputs(path)
            assert not any(WIDGET in o.get("data", {}) for o in saved), saved
            assert served["token"] not in path.read_text()
            kernel = _kernel_of(lab, notebook)
            if ending == "save-shutdown":
                lab.api(f"/api/kernels/{kernel}", method="DELETE")
            elif ending == "save-restart":
                lab.api(f"/api/kernels/{kernel}/restart", method="POST")
            elif ending == "close-shutdown":
                page.close()
                lab.api(f"/api/kernels/{kernel}", method="DELETE")
            else:  # reload the page while it serves, then stop it from the reloaded page
                page.reload()
                expect(page.locator(".jp-StatusBar-TextItem", has_text=IDLE)).to_be_visible(
                    timeout=timeout
                )
                # the live card is back in its cell: serving goes on
                back = page.locator(".nbagent-run", has_text="Serving over MCP at").first
                expect(back).to_be_visible(timeout=timeout)
                page.screenshot(path=str(SHOTS / f"serve-{ending}-reloaded.png"), full_page=True)
                page.locator(".jp-Cell .jp-InputArea-editor .cm-content").nth(3).click()
                page.keyboard.press("Shift+Enter")
                expect(page.get_by_text("stopped serving at").first).to_be_visible(timeout=timeout)
                ended = page.locator(".nbagent-run", has_text="Served over MCP at").first
                expect(ended).to_be_visible(timeout=timeout)
                _save(page, path)
            if not page.is_closed():
                page.screenshot(path=str(SHOTS / f"serve-{ending}-ended.png"), full_page=True)
                page.close()
            # reopened: the file and the page show the record, no widget anywhere
            outputs = _serving_outputs(path)
            assert not any(WIDGET in o.get("data", {}) for o in outputs), outputs
            record = _record_of(outputs)
            assert record is not None and record["mode"] == "served", outputs
            assert [c["tool"] for c in record["calls"]] == ["add"]
            text = json.dumps(outputs)
            assert "add" in text and served["url"] in text
            assert served["token"] not in path.read_text()
            page = browser.new_page(viewport={"width": 1100, "height": 1300})
            open_notebook(page, lab, notebook)
            shown = page.locator(".jp-Cell").nth(1)
            expect(shown.locator(".nbagent-run").first).to_contain_text(
                "over MCP at", timeout=timeout
            )
            expect(shown.get_by_text("⚙ add").first).to_be_visible(timeout=timeout)
            page.screenshot(path=str(SHOTS / f"serve-{ending}-reopened.png"), full_page=True)
            for gone in GONE:
                assert page.get_by_text(gone).count() == 0, gone
        except Exception:
            if not page.is_closed():
                page.screenshot(path=str(SHOTS / f"serve-{ending}-failure.png"), full_page=True)
            raise
        finally:
            browser.close()
            _stop_kernels_of(lab, notebook)


def _stop_kernels_of(lab: Lab, notebook: str) -> None:
    for session in lab.api("/api/sessions"):
        if session["path"].endswith(notebook):
            lab.api(f"/api/sessions/{session['id']}", method="DELETE")


def _add(url: str, token: str, out: dict[str, Any]) -> threading.Thread:
    from nbagent import mcp_server
    from nbagent.tools import ToolCall, ToolContext

    def go() -> None:
        import asyncio

        try:
            with mcp_server("nb", url=url, headers={"Authorization": f"Bearer {token}"}) as c:
                found = {t.name: t for t in c.tools}["nb__add"]
                context = ToolContext(ToolCall("c", found.name, "{}"), {"a": 2, "b": 3}, found)
                out["result"] = asyncio.run(found.execute(context))
        except BaseException as exc:
            out["error"] = exc

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread
