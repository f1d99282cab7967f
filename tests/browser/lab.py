"""A JupyterLab server for browser tests: its own config, data and settings dirs, no news pop-up.

Used by the browser tests and by hand (``python -m tests.browser.lab NOTEBOOK_DIR`` prints a URL).
Needs JupyterLab and, for the tests, Playwright with Debian's ``/usr/bin/chromium``; nothing here
downloads a browser.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
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
    root: Path
    home: Path

    def page_url(self, notebook: str, workspace: str | None = None) -> str:
        """The notebook in a workspace of its own (by default a new one): JupyterLab would
        otherwise reopen the tabs of the page before it."""
        name = workspace or secrets.token_hex(6)
        return f"{self.url}/lab/workspaces/{name}/tree/{notebook}?token={self.token}"

    def api(self, path: str, method: str = "GET", body: Any = None) -> Any:
        """Call the server's REST API (contents, kernels, sessions)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
        return json.loads(text) if text else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: How long a server may take to answer after it starts: a bound for a hang, never a speed
#: check (a loaded machine has taken over a minute to import JupyterLab and its extensions).
START_BOUND = 240.0


def _answers(server: subprocess.Popen[bytes], url: str, token: str) -> bool:
    """Whether the server answers before it exits or the bound passes."""
    deadline = time.monotonic() + START_BOUND
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2):
                return True
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.3)


def _stop(server: subprocess.Popen[bytes], url: str, token: str) -> None:
    """Stop a server: its shutdown API first, then signals."""
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


def lab_env(
    home: Path, extra: dict[str, str] | None = None, *, quiet_news: bool = True
) -> dict[str, str]:
    """The server's environment: no nbagent or vendor settings of the developer's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("NBAGENT_", "JUPYTER", "JPY_", "OPENAI_", "ANTHROPIC_"))
    }
    settings = home / "settings"
    news = settings / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True, exist_ok=True)
    if quiet_news:
        (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    # every cell in the DOM, so that a test can read the outputs of cells scrolled out of view
    tracker = settings / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True, exist_ok=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    env.update(extra or {})
    return env


@contextmanager
def running_lab(
    root: Path,
    home: Path,
    env: dict[str, str] | None = None,
    python: str = sys.executable,
    *,
    args: tuple[str, ...] = (),
    quiet_news: bool = True,
    app: str = "jupyterlab",
) -> Iterator[Lab]:
    """Start ``jupyter lab`` (or with ``app="notebook"``, Notebook 7) serving ``root``; stop it
    (API, then signals) on exit."""
    home.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    log_path = home / "lab.log"
    command = [
        *(python, "-m", app, "--no-browser", "--allow-root"),
        *("--ip=127.0.0.1", f"--IdentityProvider.token={token}"),
        # the port asked for or none: a server that moved to the next one would not be found
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        *(("--LabApp.news_url=None",) if app == "jupyterlab" else ()),
        *args,
    ]
    # a port found free may be taken by another process of this machine before the server
    # binds it (several suites share it): then the server exits saying so, and starts again on
    # another port (three times at most)
    for attempt in range(3):
        port = _free_port()
        log = log_path.open("w")
        server = subprocess.Popen(
            [*command, f"--port={port}"],
            env=lab_env(home, env, quiet_news=quiet_news),
            # in the test's home: what a server writes where it runs (jupyter-collaboration's
            # .jupyter_ystore.db) never lands in the checkout
            cwd=home,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        if _answers(server, url, token):
            break
        log.close()
        said = log_path.read_text(errors="replace")
        if server.poll() is None or "already in use" not in said or attempt == 2:
            _stop(server, url, token)
            raise AssertionError(f"{app} did not start:\n{said}")
    try:
        yield Lab(url, token, root, home)
    finally:
        _stop(server, url, token)
        log.close()


def skip_unless_browser() -> None:
    """Skip the test (printing why) where the browser tests cannot run here."""
    import pytest

    reason = missing()
    if reason:
        print(f"browser test skipped: {reason}")
        pytest.skip(reason)


def serve_notebook(
    tmp_path_factory: Any, name: str, notebook: str, cells: list[str]
) -> Iterator[Lab]:
    """For a module fixture: skip (saying why) where the browser tests cannot run, else write a
    notebook of ``cells`` (code) as ``notebook`` and serve it from a fresh JupyterLab."""

    skip_unless_browser()
    import nbformat

    home = tmp_path_factory.mktemp(name)
    work = home / "work"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code) for code in cells]
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, work / notebook)
    with running_lab(work, home) as server:
        yield server


# --- driving a notebook page --------------------------------------------------------------------

IDLE = "Python 3 (ipykernel) | Idle"
BUTTONS = ".jp-OutputArea-output button.jupyter-button"


def short_ids(text: str) -> str:
    """``text`` with each run's id in its short form (``run-k7q2x-3`` as ``run-3``): a kernel
    session's prefix is random, what a test compares is the run's number."""
    return re.sub(r"\b(run|serve)-[a-z][a-z0-9]{4}-(\d+)", r"\1-\2", text)


def keep_waiting_for_slow_documents(page: Any) -> None:
    """Answer jupyter-collaboration's "The document is taking some time to load" dialog as a
    person does, with "Continue waiting": it shows when the shared document syncs slowly (a
    loaded machine), and it sits over the cells, so every click waits behind it."""
    dialog = page.locator(".jp-Dialog", has_text="taking some time to load")
    page.add_locator_handler(
        dialog, lambda: dialog.get_by_role("button", name="Continue waiting").click()
    )


def open_notebook(page: Any, lab: Lab, notebook: str, timeout: float = 60_000) -> None:
    """Open a notebook and wait until its kernel is idle (a run sent earlier would be lost)."""
    from playwright.sync_api import expect

    page.goto(lab.page_url(notebook))
    expect(page.locator(".jp-StatusBar-TextItem", has_text=IDLE)).to_be_visible(timeout=timeout)


class Shots:
    """Screenshots into a test's tmp dir, each path printed (to look at them)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def take(self, page: Any, name: str, target: Any = None) -> Path:
        """The page as a person sees it, scrolled to ``target`` (an element shot of a tall
        output inside JupyterLab's own scroller comes out blank)."""
        path = self.folder / f"{name}.png"
        if target is not None:
            target.scroll_into_view_if_needed()
        page.screenshot(path=str(path))
        print(f"screenshot: {path}")
        return path


def wait_for(what: str, check: Callable[[], Any], timeout: float = 120.0) -> Any:
    """``check()``'s first truthy value, polled every 0.2 s; fails naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def open_in_notebook7(page: Any, lab: Lab, notebook: str, timeout: float = 60.0) -> None:
    """Open a notebook in Notebook 7 (a server started with ``app="notebook"``) and wait until
    its kernel is idle with the page connected to it (Notebook 7 has no status bar to read)."""
    page.goto(f"{lab.url}/notebooks/{notebook}?token={lab.token}")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=timeout * 1000)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kernels = [
            s["kernel"] for s in lab.api("/api/sessions") if s.get("path", "").endswith(notebook)
        ]
        if any(k.get("execution_state") == "idle" and k.get("connections") for k in kernels):
            return
        time.sleep(0.3)
    raise AssertionError(f"the kernel of {notebook} did not become idle in Notebook 7")


def menu(page: Any, *path: str) -> None:
    """Click through the main menu, e.g. ``menu(page, "Run", "Run All Cells")``."""
    page.locator(".lm-MenuBar-itemLabel", has_text=path[0]).first.click()
    for label in path[1:]:
        page.locator(".lm-Menu-itemLabel", has_text=label).first.click()


def kernel_idle(page: Any) -> bool:
    return bool(page.locator(".jp-StatusBar-TextItem", has_text=IDLE).count())


def mark_cells(page: Any) -> None:
    """Mark the code cells there now, so that :func:`cells_done` waits for them alone: a cell
    that a run inserts (``%agent cells``) is not run by the Run All that made it."""
    page.evaluate(
        "() => document.querySelectorAll('.jp-CodeCell')"
        ".forEach(c => { c.dataset.nbagentMarked = '1'; })"
    )


def cells_done(page: Any) -> bool:
    """Every code cell (every marked one, after :func:`mark_cells`) has run: an execution
    count, no ``[*]``."""
    marked = page.locator(".jp-CodeCell[data-nbagent-marked] .jp-InputArea-prompt")
    found = marked if marked.count() else page.locator(".jp-CodeCell .jp-InputArea-prompt")
    prompts = found.all_inner_texts()
    return bool(prompts) and all(p.strip() not in ("[ ]:", "[*]:", "") for p in prompts)


#: Text in the cells' outputs (not stderr or tracebacks, nor the code blocks of Markdown that
#: JupyterLab highlights with its theme's classes: Jupyter itself colours those) whose contrast
#: with what is behind it is below ``limit``: ``[text, ratio, color, background]``. The colour
#: is blended with the background by its alpha and every ancestor's opacity.
_FAINT_TEXT = """(limit) => {
  const rgba = (css) => {
    const m = css.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const [r, g, b, a] = m[1].split(',').map(Number);
    return { r, g, b, a: Number.isNaN(a) || a === undefined ? 1 : a };
  };
  const lin = (v) => (v /= 255) <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  const lum = (c) => 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
  const behind = (el) => {
    for (; el; el = el.parentElement) {
      const c = rgba(getComputedStyle(el).backgroundColor);
      if (c && c.a > 0.5) return c;
    }
    return { r: 255, g: 255, b: 255, a: 1 };
  };
  const found = [];
  const outputs = document.querySelectorAll(
    '.jp-OutputArea-output:not([data-mime-type*="stderr"]):not([data-mime-type*="error"])'
  );
  for (const output of outputs) {
    const walker = document.createTreeWalker(output, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const el = node.parentElement;
      if (!node.textContent.trim() || !el.getClientRects().length) continue;
      if (el.matches('.jp-RenderedMarkdown pre code span[class]:not([style])')) continue;
      let alpha = rgba(getComputedStyle(el).color).a;
      for (let up = el; up; up = up.parentElement) alpha *= Number(getComputedStyle(up).opacity);
      const fg = rgba(getComputedStyle(el).color);
      const bg = behind(el);
      const mix = (k) => fg[k] * alpha + bg[k] * (1 - alpha);
      const seen = lum({ r: mix('r'), g: mix('g'), b: mix('b') });
      const ratio = (Math.max(seen, lum(bg)) + 0.05) / (Math.min(seen, lum(bg)) + 0.05);
      if (ratio < limit) {
        const text = node.textContent.trim().slice(0, 60);
        const color = getComputedStyle(el).color;
        found.push([text, ratio.toFixed(2), color, `rgb(${bg.r}, ${bg.g}, ${bg.b})`]);
      }
    }
  }
  return found;
}"""


def faint_text(page: Any, limit: float = 3.0) -> list[Any]:
    """Output text a person can hardly read (see :data:`_FAINT_TEXT`)."""
    return list(page.evaluate(_FAINT_TEXT, limit))


def main() -> None:  # pragma: no cover - by hand
    import tempfile

    root = Path(sys.argv[1]).resolve()
    with running_lab(root, Path(tempfile.mkdtemp())) as lab:
        print(f"{lab.url}/lab?token={lab.token}", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # pragma: no cover
    main()
