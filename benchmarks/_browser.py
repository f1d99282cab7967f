"""JupyterLab in headless Chromium for the benchmarks that measure what a person sees.

Built on the browser tests' harness (``tests/browser/lab.py``: its own config and settings dirs,
no news pop-up, Debian's ``/usr/bin/chromium``; nothing here downloads a browser). Adds what a
benchmark needs beyond a test: a notebook page to drive cell by cell, cells awaited by their own
prompt, a kernel restarted through the server's REST API, and a reason when something is missing.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the harness lives in the test tree
    sys.path.insert(0, str(ROOT))

from tests.browser.lab import (  # noqa: E402
    CHROMIUM,
    KERNELSPEC,
    Lab,
    cells_done,
    kernel_idle,
    menu,
    missing,
    open_notebook,
    running_lab,
)

__all__ = [
    "CHROMIUM",
    "TIMEOUT",
    "Page",
    "Watched",
    "cells_done",
    "kernel_idle",
    "lab_pages",
    "menu",
    "notebook_page",
    "unavailable",
    "write_notebook",
]

EDITORS = ".jp-Notebook .jp-Cell .jp-InputArea-editor .cm-content"
#: How long one cell, a save or a kernel restart may take before the benchmark calls it a crash.
TIMEOUT = 120.0


def unavailable() -> str | None:
    """Why the browser benchmarks cannot run here (chromium, playwright or jupyterlab), or None."""
    reason = missing()
    if reason is not None:
        return f"{reason}; the browser extra has them: scripts/setup 'test,browser'"
    return None


def write_notebook(path: Path, sources: list[str | tuple[str, str]]) -> None:
    """Code cells (a plain string) or ``("markdown", text)`` cells, with a kernelspec so that
    JupyterLab asks no kernel question."""
    import nbformat

    cells = []
    for source in sources:
        if isinstance(source, tuple):
            cells.append(nbformat.v4.new_markdown_cell(source[1]))
        else:
            cells.append(nbformat.v4.new_code_cell(source))
    notebook = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC})
    nbformat.write(notebook, path)


#: Armed in the page before a key press (see :meth:`Page.run`).
_ARM = """
([index, markers]) => {
  const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[index];
  const prompt = cell.querySelector('.jp-InputArea-prompt');
  const old = new WeakSet(cell.querySelectorAll('.jp-OutputArea-output'));
  const state = {markers, key: null, seen: {}, where: {}, busy: false, done: null, errors: ''};
  const errors = "[data-mime-type='application/vnd.jupyter.stderr']";
  const check = () => {
    if (state.key === null) return;
    const now = performance.now();
    for (const [name, text] of Object.entries(markers)) {
      if (name in state.seen) continue;
      for (const out of cell.querySelectorAll('.jp-OutputArea-output')) {
        if (old.has(out) || !out.textContent.includes(text) || !out.checkVisibility()) continue;
        state.seen[name] = now;
        state.where[name] = out.querySelector('.nbagent-stream') ? 'live'
          : (out.querySelector('.nbagent-run') ? 'static' : 'other');
        break;
      }
    }
    const shown = prompt.textContent.trim();
    if (shown === '[*]:') state.busy = true;
    else if (state.busy && state.done === null && shown !== '[ ]:' && shown !== '') {
      state.done = now;
      state.errors = Array.from(cell.querySelectorAll(errors), (e) => e.textContent).join('\\n');
      observer.disconnect();
    }
  };
  const observer = new MutationObserver(check);
  observer.observe(cell, {subtree: true, childList: true, characterData: true, attributes: true});
  const onKey = (event) => {
    if (event.key === 'Enter' && event.shiftKey && state.key === null) {
      state.key = performance.now();
      window.removeEventListener('keydown', onKey, true);
    }
  };
  window.addEventListener('keydown', onKey, true);
  window.__bench = state;
}
"""
_ALL_SEEN = (
    "() => window.__bench.done !== null && "
    "Object.keys(window.__bench.markers).every((name) => name in window.__bench.seen)"
)


@dataclass
class Watched:
    """One cell run as the page saw it, in seconds of the page's clock."""

    key: float  # Shift+Enter pressed
    done: float  # the prompt left [*]
    seen: dict[str, float]  # each marker's name: when its text was first in a new visible output
    where: dict[str, str]  # each marker's name: "live" (in the streaming widget), "static" (in a
    # finished run's HTML) or "other"

    def after_key(self, name: str) -> float:
        """Seconds from the key press to marker ``name``."""
        return self.seen[name] - self.key


@dataclass
class Page:
    """One notebook open in JupyterLab."""

    lab: Lab
    page: Any
    notebook: str

    def click_editor(self, index: int) -> None:
        """Put cell ``index`` (counting every cell) in edit mode, as a person's click does."""
        editor = self.page.locator(EDITORS).nth(index)
        editor.scroll_into_view_if_needed()
        editor.click()

    def run(
        self, index: int, markers: dict[str, str] | None = None, timeout: float = TIMEOUT
    ) -> Watched:
        """Shift+Enter in cell ``index`` and wait until the cell is done and the kernel idle.

        Before the key press, the page arms a ``MutationObserver`` on the cell and a keydown
        listener, so that every time is the page's own ``performance.now()``: the key press,
        the first moment each of ``markers`` (name: text) is in a *new* visible output of the
        cell (outputs shown before the press do not count), and the moment the prompt leaves
        ``[*]``. A cell that writes to stderr or raises makes this raise with what it wrote.
        """
        self.click_editor(index)
        self.page.evaluate(_ARM, [index, markers or {}])
        self.page.keyboard.press("Shift+Enter")
        try:
            self.page.wait_for_function(_ALL_SEEN, timeout=timeout * 1000)
        except Exception as exc:
            state = self.page.evaluate("() => window.__bench")
            raise RuntimeError(
                f"cell {index} of {self.notebook}: not done or not everything seen within "
                f"{timeout:.0f} s ({state})"
            ) from exc
        state = self.page.evaluate("() => window.__bench")
        if state["errors"]:
            raise RuntimeError(f"cell {index} of {self.notebook} failed:\n{state['errors']}")
        deadline = time.monotonic() + timeout
        while not kernel_idle(self.page):
            if time.monotonic() > deadline:
                raise RuntimeError("the kernel did not become idle")
            time.sleep(0.02)
        return Watched(
            key=state["key"] / 1000,
            done=state["done"] / 1000,
            seen={name: at / 1000 for name, at in state["seen"].items()},
            where=dict(state["where"]),
        )

    def prompt(self, index: int) -> str:
        """The execution prompt of cell ``index``, e.g. ``[3]:``."""
        prompts = self.page.locator(".jp-Notebook .jp-Cell .jp-InputArea-prompt")
        return str(prompts.nth(index).inner_text()).strip()

    def restart_kernel(self, timeout: float = TIMEOUT) -> None:
        """Kernel > Restart Kernel…, confirmed in the dialog (as a person does), then wait until
        the status bar has left "Idle" and come back to it for a moment.

        (A restart through the server's REST API leaves the page saying "Starting" until the
        next request: the page never hears the new kernel's first idle.)
        """
        menu(self.page, "Kernel", "Restart Kernel…")
        self.page.locator(".jp-Dialog-button", has_text="Restart").first.click()
        deadline = time.monotonic() + timeout
        left = False
        idle_since: float | None = None
        while time.monotonic() < deadline:
            if not kernel_idle(self.page):
                left, idle_since = True, None
            elif left:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since >= 0.5:
                    return
            time.sleep(0.02)
        raise RuntimeError("the kernel did not come back idle after a restart")

    def save(self, path: Path, timeout: float = TIMEOUT) -> dict[str, Any]:
        """Save through the UI (File > Save Notebook) and return the file once it changed on
        disk."""
        before = path.stat().st_mtime_ns if path.exists() else 0
        menu(self.page, "File", "Save Notebook")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists() and path.stat().st_mtime_ns != before:
                try:
                    saved: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
                    return saved
                except ValueError:  # caught mid-write
                    pass
            time.sleep(0.1)
        raise RuntimeError(f"{path.name} was not saved within {timeout:.0f} s")


@contextmanager
def lab_pages(root: Path, home: Path) -> Iterator[tuple[Lab, Any]]:
    """A JupyterLab server on ``root`` and a headless Chromium; yields the server and browser."""
    from playwright.sync_api import sync_playwright

    with running_lab(root, home) as lab, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield lab, browser
        finally:
            browser.close()


@contextmanager
def notebook_page(lab: Lab, browser: Any, notebook: str) -> Iterator[Page]:
    """``notebook`` open in a new tab, its kernel idle; the tab is closed and the kernel shut
    down on exit (so the next notebook starts alone)."""
    page = browser.new_page(viewport={"width": 1200, "height": 1000})
    try:
        open_notebook(page, lab, notebook, timeout=TIMEOUT * 1000)
        yield Page(lab, page, notebook)
    finally:
        page.close()
        for session in lab.api("/api/sessions"):
            if session.get("path", "").endswith(notebook):
                lab.api(f"/api/sessions/{session['id']}", method="DELETE")
