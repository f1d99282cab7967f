"""End to end in a real browser: JupyterLab, Debian's chromium, a person clicking Approve and Deny.

Needs /usr/bin/chromium, Playwright for Python and JupyterLab (scripts/test installs them); the
test says why and skips when one is missing. It never downloads a browser. The screenshot goes to
test-output/approval.png; NBAGENT_UPDATE_SCREENSHOTS=1 also refreshes docs/images/approval.png.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
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


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "jupyterlab is not installed (pip install jupyterlab)"
    return None


@dataclass
class Lab:
    url: str
    token: str
    notebook: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(textwrap.dedent(SETUP).strip()),
        nbformat.v4.new_code_cell("%agent Delete a.txt"),
        nbformat.v4.new_code_cell("%agent Now delete b.txt"),
    ]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    reason = _missing()
    if reason:
        print(f"browser test skipped: {reason}")
        pytest.skip(reason)
    home = tmp_path_factory.mktemp("lab")
    work = home / "work"
    work.mkdir()
    _write_notebook(work / "approval.ipynb")
    settings = home / "settings"
    news = settings / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBAGENT_", "JUPYTER", "JPY_"))}
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
    )
    token = secrets.token_hex(16)
    port = _free_port()
    log = (home / "lab.log").open("w")
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root"),
            *("--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}"),
            *(f"--ServerApp.root_dir={work}", "--LabApp.news_url=None"),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"jupyter lab did not start:\n{(home / 'lab.log').read_text()}"
                    ) from None
                time.sleep(0.3)
        yield Lab(url, token, "approval.ipynb")
    finally:
        try:
            request = urllib.request.Request(
                f"{url}/api/shutdown", method="POST", headers={"Authorization": f"token {token}"}
            )
            urllib.request.urlopen(request, timeout=5).close()
            server.wait(timeout=15)
        except Exception:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
        log.close()


def test_approve_then_deny_in_jupyterlab(lab: Lab) -> None:
    from playwright.sync_api import expect, sync_playwright

    timeout = 60_000
    # texts are matched with .first: when a run ends its output is updated with the transcript,
    # and JupyterLab re-renders the view, so for a moment a text can be on the page twice
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1300})
        try:
            page.goto(f"{lab.url}/lab/tree/{lab.notebook}?token={lab.token}")
            idle = page.locator(".jp-StatusBar-TextItem", has_text="Python 3 (ipykernel) | Idle")
            expect(idle).to_be_visible(timeout=timeout)
            page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            page.keyboard.press("Shift+Enter")  # setup
            page.keyboard.press("Shift+Enter")  # %agent Delete a.txt
            buttons = ".jp-OutputArea-output button.jupyter-button"
            approve = page.locator(buttons, has_text="Approve")
            expect(approve).to_have_count(1, timeout=timeout)
            expect(page.get_by_text("I will delete a.txt").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text('"path": "a.txt"').first).to_be_visible(timeout=timeout)
            approve.click()
            expect(page.get_by_text("deleted a.txt").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("Done: a.txt is gone.").first).to_be_visible(timeout=timeout)
            expect(page.get_by_text("approved by you · done").first).to_be_visible(timeout=timeout)
            expect(approve.first).to_be_hidden()  # decided: the bar folds away

            editors = page.locator(".jp-Cell .jp-InputArea-editor .cm-content")
            editors.nth(2).click()  # the click on Approve took the focus
            page.keyboard.press("Shift+Enter")  # %agent Now delete b.txt
            deny = page.locator(buttons, has_text="Deny").last
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
            # the model's text was shown, and its <img onerror> never ran
            assert page.evaluate("window.__pwned") is None
            assert page.locator(".nbagent-stream a[href^='javascript']").count() == 0
            docs = page.locator(".nbagent-stream a", has_text="docs").first
            assert docs.get_attribute("href") == "https://example.com/a_(b)"
            assert docs.get_attribute("rel") == "noopener noreferrer nofollow"
            assert page.get_by_text("deleted b.txt").count() == 0
        except Exception:
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOT.with_name("approval-failure.png")), full_page=True)
            raise
        finally:
            browser.close()
    if os.environ.get("NBAGENT_UPDATE_SCREENSHOTS") == "1" or not README_IMAGE.exists():
        README_IMAGE.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SCREENSHOT, README_IMAGE)
