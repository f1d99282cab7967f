"""Lesson 11 (the agent in your kernel) in JupyterLab, as a person takes it; and a snippet's code
highlighted while it streams.

The lesson's ``%agent --kernel`` cell replays its recording with no model set; nobody sets
``NBAGENT_APPROVAL`` in JupyterLab, so each ``run_python`` snippet waits for **Approve**. The
sequence, and why:

1. **Run All**, approving each snippet as its card asks. The cards show the code highlighted, the
   Namespace table and the figure; ``%agent cells`` puts the code into one new cell directly
   below it (Run All does not run that cell: it was not there when Run All began). Running
   ``%agent cells`` again adds a second cell directly below, above the first.
2. **The Undo button.** Under Run All the next cell runs at once and turns the button into text
   before anyone could click it, so the button is exercised on its own: Kernel > Restart, then
   the setup cell and the ``%agent`` cell only (approving each snippet), then a click on **Undo
   this run's changes**. A second client of the same kernel reads ``sales``'s columns and the
   names before and after the click: ``z`` and ``outlier`` and the plot's names must go.
3. **Save, shut the kernel down, reopen** in a new page and workspace: the code (highlighted),
   the Namespace table and the figure are still readable, where the button was is the undo's
   report in text, and nothing says "Error displaying widget" or "model not found".

Screenshots of each moment go to the test's tmp dir (their paths are printed);
``NBAGENT_UPDATE_SCREENSHOTS=1`` also refreshes docs/images/kernel.png from the reopened card.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import textwrap
import time
import urllib.error
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from .course import page_problems
from .lab import (
    BUTTONS,
    CHROMIUM,
    KERNELSPEC,
    Lab,
    Shots,
    cells_done,
    faint_text,
    mark_cells,
    menu,
    open_notebook,
    running_lab,
    short_ids,
    skip_unless_browser,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
LESSON = "11_the_agent_in_your_kernel.ipynb"
STREAMING = "streaming.ipynb"
DOCS_IMAGE = ROOT / "docs" / "images" / "kernel.png"
TIMEOUT = 120.0
UNDO = "Undo this run's changes"
CELL_CODE = ".jp-CodeCell"
EDITOR = ".jp-InputArea-editor .cm-content"


def recorded_snippets() -> list[str]:
    """The code of the lesson's recorded run_python calls, in order."""
    recordings = ROOT / "notebooks" / "nbagent-recordings"
    (path,) = list(recordings.glob("which-months-in-sales-*.json"))
    snippets = []
    for step in json.loads(path.read_text())["steps"]:
        for event in step["events"]:
            if event.get("type") == "call" and event["name"] == "run_python":
                snippets.append(json.loads(event["arguments"])["code"])
    return snippets


#: A run whose snippet streams in 40 pieces, slowly enough to be seen half written.
STREAMING_SETUP = '''
%load_ext nbagent
import nbagent
from nbagent.models import Call, ScriptedModel, Turn

SNIPPET = """import math

def area(r):  # a circle's
    return math.pi * r ** 2

print("area", round(area(2.0), 3))
"""
nbagent.notebook.current_session().set_model(ScriptedModel([
    Turn(Call("run_python", {"code": SNIPPET, "purpose": "an area"}, chunks=40)),
    "Done.",
], chunk_delay=0.15))
'''


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    skip_unless_browser()
    import nbformat

    home = tmp_path_factory.mktemp("lab-kernel")
    work = home / "work"
    work.mkdir()
    # the lesson as the course ships it: its data and its recording beside it
    shutil.copy(ROOT / "notebooks" / LESSON, work / LESSON)
    for folder in ("data", "nbagent-recordings"):
        shutil.copytree(ROOT / "notebooks" / folder, work / folder)
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(textwrap.dedent(STREAMING_SETUP).strip()),
        nbformat.v4.new_code_cell("%agent --kernel Work out the area of a circle of radius 2"),
    ]
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, work / STREAMING)
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


def code_cells(page: Any) -> Any:
    return page.locator(CELL_CODE)


def prompt(cell: Any) -> str:
    return str(cell.locator(".jp-InputArea-prompt").inner_text()).strip()


def ran(cell: Any) -> bool:
    return prompt(cell) not in ("[ ]:", "[*]:", "")


def sources(page: Any) -> list[str]:
    """Every cell's source, in order (markdown cells as they are rendered)."""
    return [
        str(t)
        for t in page.locator(".jp-Notebook .jp-Cell").evaluate_all(
            "cells => cells.map(c => (c.querySelector('.cm-content') || c).innerText)"
        )
    ]


def approve_until(page: Any, done: Callable[[], bool], seen: list[dict[str, Any]]) -> None:
    """Click each Approve as its card asks, until ``done()``; for each card that asked, note
    what its code block showed at that moment (text and colored spans)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        buttons = page.locator(BUTTONS, has_text="Approve")
        for index in range(buttons.count()):
            button = buttons.nth(index)
            if button.is_visible() and button.is_enabled():
                card = button.locator("xpath=ancestor::*[contains(@class,'nbagent-card')][1]")
                seen.append(card.evaluate(LIVE_CODE))
                button.click()
        if done():
            return
        time.sleep(0.25)
    raise AssertionError("the run did not finish")


#: What a live card's code block shows: its text, its own color, and each colored span.
LIVE_CODE = """(card) => {
  const code = card.querySelector('.nbagent-stream[data-format="code"]');
  if (!code) return { text: null, base: null, spans: [], streaming: false };
  const spans = Array.from(code.querySelectorAll('span')).filter(s => s.style.color);
  return {
    text: code.textContent,
    base: getComputedStyle(code).color,
    spans: spans.map(s => [s.textContent, getComputedStyle(s).color]),
    streaming: code.classList.contains('nbagent-streaming'),
  };
}"""

#: The saved (static) cards of an output area: each card's highlighted code, with its spans.
#: ``band`` is what is behind the code's lines, ``block`` the block's own background.
STATIC_CODE = """(area) => Array.from(area.querySelectorAll('pre > code')).map(code => ({
  text: code.textContent,
  base: getComputedStyle(code).color,
  band: getComputedStyle(code).backgroundColor,
  block: getComputedStyle(code.parentElement).backgroundColor,
  spans: Array.from(code.querySelectorAll('span'))
    .filter(s => s.style.color)
    .map(s => [s.textContent, getComputedStyle(s).color]),
}))"""

#: The tables of an output area whose header is the Namespace diff's, as lists of rows.
DIFF_TABLES = """(area) => Array.from(area.querySelectorAll('table')).filter(t =>
  Array.from(t.querySelectorAll('th')).map(th => th.textContent.trim()).join('|')
    === 'name|change|before|now'
).map(t => Array.from(t.querySelectorAll('tbody tr')).map(tr =>
  Array.from(tr.querySelectorAll('td')).map(td => td.textContent.trim())))"""

#: The PNG images of an output area that loaded (a run's figures; its timeline is an SVG), as
#: [natural width, natural height, shown width].
IMAGES = """(area) => Array.from(area.querySelectorAll('img'))
  .filter(img => img.src.startsWith('data:image/png') && img.complete && img.naturalWidth > 0)
  .map(img => [
    img.naturalWidth, img.naturalHeight, Math.round(img.getBoundingClientRect().width),
  ])"""


def colored_words(block: dict[str, Any]) -> set[str]:
    """The words of a code block shown in a color other than the block's own."""
    return {text.strip() for text, color in block["spans"] if color != block["base"]}


def assert_highlighted(block: dict[str, Any], code: str) -> None:
    """The block shows ``code`` with its keywords and strings colored."""
    assert block["text"] is not None, "no code block in the card"
    assert block["text"].strip() == code.strip()
    words = colored_words(block)
    keywords = [w for w in ("import", "for", "in", "def", "return") if f"{w} " in code]
    strings = [w for w in ('"region"', '"outlier"', '"area"') if w in code]
    assert keywords or strings, "a snippet the test cannot judge"
    for word in keywords:
        assert any(word in w.split() for w in words), (word, sorted(words)[:20])
    for word in strings:
        assert any(word in w for w in words), (word, sorted(words)[:20])
    # more than one color: keywords and strings are told apart
    assert len({color for _, color in block["spans"]} - {block["base"]}) >= 2


def kernel_state(
    lab: Lab, notebook: str, expressions: dict[str, str], timeout: float = 30
) -> dict[str, str]:
    """Evaluate ``expressions`` in the notebook's kernel from a second client, silently (no
    execution count, no cell hooks: the notebook cannot tell)."""
    from jupyter_client.blocking import BlockingKernelClient

    (kernel,) = [
        s["kernel"] for s in lab.api("/api/sessions") if s.get("path", "").endswith(notebook)
    ]
    client = BlockingKernelClient(
        connection_file=str(lab.home / "runtime" / f"kernel-{kernel['id']}.json")
    )
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=timeout)
        msg_id = client.execute("", silent=True, store_history=False, user_expressions=expressions)
        while True:
            reply = client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        found = reply["content"]["user_expressions"]
        failed = {k: v for k, v in found.items() if v.get("status") != "ok"}
        assert not failed, failed
        return {k: v["data"]["text/plain"] for k, v in found.items()}
    finally:
        client.stop_channels()


def restarted(lab: Lab, notebook: str) -> bool:
    """The notebook's kernel answers, and holds none of the lesson's names."""
    try:
        found = kernel_state(lab, notebook, {"fresh": "'sales' not in globals()"}, timeout=5)
    except (RuntimeError, queue.Empty):  # still restarting: no heartbeat, or no reply yet
        return False
    return found["fresh"] == "True"


def shut_down_kernels(lab: Lab) -> None:
    for kernel in lab.api("/api/kernels"):
        try:
            lab.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        except urllib.error.HTTPError as error:
            if error.code != 404:  # listed, and gone by the time we asked
                raise


def wait_saved(lab: Lab, notebook: str, text: str) -> dict[str, Any]:
    def saved() -> dict[str, Any] | None:
        raw = (lab.root / notebook).read_text()
        if text not in short_ids(raw):
            return None
        try:
            return dict(json.loads(raw))
        except json.JSONDecodeError:  # read while JupyterLab was writing it
            return None

    return dict(wait_for(f"the saved notebook to hold {text!r}", saved, 30))


@pytest.mark.timeout(600)
def test_lesson_11_run_all_approve_undo_save_reopen(lab: Lab, browser: Any, tmp_path: Path) -> None:
    shots = Shots(tmp_path / "shots")
    snippets = recorded_snippets()
    assert len(snippets) == 2
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    try:
        # --- 1. Run All, approving each snippet -------------------------------------------
        open_notebook(page, lab, LESSON)
        agent = code_cells(page).nth(1)
        assert "%agent --kernel" in agent.locator(EDITOR).inner_text()
        mark_cells(page)  # Run All does not run the cell %agent cells inserts
        menu(page, "Run", "Run All Cells")
        seen: list[dict[str, Any]] = []
        approve_until(page, lambda: cells_done(page), seen)
        assert len(seen) == 2, "each run_python snippet asks once"
        for block, code in zip(seen, snippets, strict=True):
            assert_highlighted(block, code)
        assert page_problems(page) == []
        area = agent.locator(".jp-Cell-outputArea")
        check_run(area, snippets)
        # the button is text now: the next cell ran before anyone could click it
        assert area.locator(BUTTONS, has_text=UNDO).count() == 0
        assert "To put back what run-1 changed: %agent undo run-1" in short_ids(area.inner_text())
        shown = short_ids("\n".join(page.locator(".jp-OutputArea-output").all_inner_texts()))
        assert "Undid run-1 · step 4." in shown
        assert "still there: ['fig', 'ax']" in shown  # undo cannot vouch for a figure
        assert "'z', 'outlier']" in shown
        assert faint_text(page) == []
        shots.take(page, "1-run-all-done")

        inserted_cells(page)  # %agent cells: one new cell directly below it

        # --- 2. The Undo button, on a run of its own --------------------------------------
        menu(page, "Kernel", "Restart Kernel…")
        page.locator(".jp-Dialog .jp-mod-accept").click()
        wait_for("the restarted kernel", lambda: restarted(lab, LESSON), 60)
        code_cells(page).nth(0).locator(EDITOR).click()
        page.keyboard.press("Control+Enter")
        agent.locator(EDITOR).click()
        page.keyboard.press("Control+Enter")
        seen = []
        undo = area.locator(BUTTONS, has_text=UNDO)
        approve_until(page, lambda: ran(agent) and undo.count() == 1, seen)
        assert len(seen) == 2
        check_run(area, snippets)
        names = {
            "columns": "list(sales.columns)",
            "added": "[n for n in ('fig', 'ax', 'flagged', 'by_region') if n in globals()]",
        }
        before = kernel_state(lab, LESSON, names)
        assert before["columns"].endswith("'z', 'outlier']"), before
        assert before["added"] == "['fig', 'ax', 'flagged', 'by_region']", before
        shots.take(page, "2-undo-button", undo)
        assert not undo.evaluate("b => b.scrollWidth > b.clientWidth + 1"), "the label is cut"
        undo.click()
        report_line = "Undid run-1 · step 4, run-1 · step 3."  # newest step first
        wait_for("the undo's report", lambda: report_line in short_ids(area.inner_text()))
        assert undo.count() == 0
        after = kernel_state(lab, LESSON, names)
        assert after == {
            "columns": "['month', 'region', 'units', 'revenue']",
            # a figure and a groupby are read only by their own code: undo leaves them, and says
            "added": "['fig', 'ax', 'by_region']",
        }, after
        report = short_ids(area.inner_text())
        assert "sales" in report[report.index("Undid run-1 · step 4, run-1 · step 3") :]
        undid = re.compile(r"Undid run-\S+-1 · step 4, run-\S+-1 · step 3")
        shots.take(page, "3-undone", area.get_by_text(undid))
        assert page_problems(page) == []

        # --- 3. Save, shut down, reopen --------------------------------------------------
        page.keyboard.press("Control+s")
        saved = wait_saved(lab, LESSON, "Undid run-1 · step 4, run-1 · step 3")  # short ids
        outputs = json.dumps(saved["cells"])
        assert "application/vnd.jupyter.widget-view+json" not in outputs
        menu(page, "Kernel", "Shut Down Kernel")
        time.sleep(1.0)
        page.close()
        shut_down_kernels(lab)

        page = browser.new_page(viewport={"width": 1100, "height": 1000})
        page.goto(lab.page_url(LESSON))
        page.locator(".jp-OutputArea-output").first.wait_for(timeout=60_000)
        time.sleep(2.0)  # widget outputs would fail to render by now
        assert page_problems(page) == []
        area = code_cells(page).nth(1).locator(".jp-Cell-outputArea")
        check_run(area, snippets)
        assert "Undid run-1 · step 4, run-1 · step 3." in short_ids(area.inner_text())
        assert area.locator(".jupyter-widgets").count() == 0
        assert faint_text(page) == []
        shots.take(page, "4-reopened", area.locator("img[src^='data:image/png']"))
        card = docs_shot(page, area, shots)
        if os.environ.get("NBAGENT_UPDATE_SCREENSHOTS") == "1" or not DOCS_IMAGE.exists():
            DOCS_IMAGE.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(card, DOCS_IMAGE)
    except Exception:
        shots.take(page, "failure")
        raise
    finally:
        page.close()


def inserted_cells(page: Any) -> None:
    """After lesson 11's Run All: ``%agent cells`` inserted one new cell directly below it, with
    the steps' code in order under their comments (the undone step commented out), and Run All
    did not run it; running ``%agent cells`` again inserts another directly below it, above the
    first (JupyterLab and Notebook 7 act on the first ``set_next_input`` payload of a reply)."""
    snippets = recorded_snippets()
    lesson = len(json.loads((ROOT / "notebooks" / LESSON).read_text())["cells"])
    found = sources(page)
    at = found.index("%agent cells")
    raw = found[at + 1]  # the cell's comments name each step by its run's full id
    inserted = short_ids(raw)
    assert inserted.startswith("# nbagent run-1 · step 3: flag the unusual months\n")
    assert snippets[0] in inserted
    step4 = inserted.index("# nbagent run-1 · step 4: plot revenue, outliers circled")
    assert step4 > inserted.index(snippets[0])  # in order
    assert "(left out: it was undone)" in inserted[step4:].splitlines()[0]
    assert "# import matplotlib.pyplot as plt" in inserted[step4:]
    assert found[at + 2].startswith("## How the recording was made")  # one cell, no more
    assert len(found) == lesson + 1
    cells = page.locator(".jp-Notebook .jp-Cell")
    assert not ran(cells.nth(at + 1))  # Run All did not run it
    mark_cells(page)
    cells.nth(at).locator(EDITOR).click()
    page.keyboard.press("Control+Enter")
    wait_for("a second inserted cell", lambda: len(sources(page)) == lesson + 2)
    again = sources(page)
    assert again[at] == "%agent cells" and again[at + 1] == again[at + 2] == raw
    assert again[at + 3].startswith("## How the recording was made")
    marked = cells.evaluate_all("cells => cells.map(c => c.dataset.nbagentMarked === '1')")
    assert marked[at + 1] is False and marked[at + 2] is True  # the new one is right below


def check_run(area: Any, snippets: list[str]) -> None:
    """A finished run's output: each snippet's code highlighted, the Namespace tables, and the
    figure, as the saved notebook keeps them (plain HTML and an image, no widget)."""
    blocks = area.evaluate(STATIC_CODE)
    shown = [b for b in blocks if any(b["text"].strip() == s.strip() for s in snippets)]
    assert len(shown) == len(snippets), [b["text"][:40] for b in blocks]
    for block, code in zip(shown, snippets, strict=True):
        assert_highlighted(block, code)
        # the lines sit on the block's background, not on bands of the page's own
        assert block["band"] in ("rgba(0, 0, 0, 0)", block["block"]), block["band"]
    tables = area.evaluate(DIFF_TABLES)
    assert len(tables) == 2, tables
    flag, plot = tables
    assert ["by_region", "added", "", "pandas.SeriesGroupBy"] in flag
    assert flag[[r[0] for r in flag].index("sales")][:2] == ["sales", "changed in place"]
    assert {r[0] for r in plot} >= {"plt", "fig", "ax", "flagged"}
    images = area.evaluate(IMAGES)
    assert len(images) == 1, images
    width, height, shown_width = images[0]
    assert width > 300 and height > 150 and shown_width > 300


#: The plotting step's card and the figure after it, scrolled into view: their joint rectangle.
PLOT_CARD = """(area) => {
  const both = (d) => d.textContent.includes('⚙ run_python')
    && d.textContent.includes('plot revenue, outliers circled');
  const card = Array.from(area.querySelectorAll('div'))
    .find((d) => both(d) && !Array.from(d.children).some(both));
  const image = area.querySelector('img[src^="data:image/png"]');
  if (!card || !image) return null;
  card.scrollIntoView();
  const a = card.getBoundingClientRect();
  const b = image.getBoundingClientRect();
  const x = Math.min(a.left, b.left) - 4;
  const width = Math.max(a.right, b.right) - x + 4;
  return { x, y: a.top - 4, width, height: b.bottom - a.top + 8 };
}"""


def docs_shot(page: Any, area: Any, shots: Shots) -> Path:
    """The plotting step's card with its figure, for the how-to page."""
    page.set_viewport_size({"width": 1100, "height": 2200})
    clip = area.evaluate(PLOT_CARD)
    assert clip is not None
    path = shots.folder / "5-kernel-card.png"
    page.screenshot(path=str(path), clip=clip)
    print(f"screenshot: {path}")
    return path


def test_snippet_is_highlighted_while_it_streams(lab: Lab, browser: Any, tmp_path: Path) -> None:
    """The code block of a streaming ``run_python`` call is colored while half written (the
    live view's own highlighter, plain.js), and whole and colored once the call is complete."""
    shots = Shots(tmp_path / "shots")
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    try:
        open_notebook(page, lab, STREAMING)
        code_cells(page).nth(0).locator(EDITOR).click()
        page.keyboard.press("Shift+Enter")
        page.keyboard.press("Shift+Enter")
        card = page.locator(".nbagent-card").first
        card.wait_for(timeout=60_000)

        def half_written() -> dict[str, Any] | None:
            block = dict(card.evaluate(LIVE_CODE))
            text = block["text"] or ""
            if block["streaming"] and "def area" in text and "print" not in text:
                return block
            return None

        block = wait_for("the snippet half written", half_written, 60)
        shots.take(page, "6-streaming", card)
        words = colored_words(block)
        assert "import" in words and "def" in words, sorted(words)
        assert '"code"' not in block["text"] and "\\n" not in block["text"]  # not the JSON
        approve = page.locator(BUTTONS, has_text="Approve")
        approve.wait_for(timeout=60_000)
        whole = dict(card.evaluate(LIVE_CODE))
        assert whole["text"].startswith("import math\n\ndef area(r):  # a circle's\n")
        assert {"import", "def", "return", "print", "# a circle's", '"area"'} <= colored_words(
            whole
        ), sorted(colored_words(whole))
        approve.click()
        area = code_cells(page).nth(1).locator(".jp-Cell-outputArea")
        wait_for(
            "the run's end",
            lambda: "area 12.566" in area.inner_text() and ran(code_cells(page).nth(1)),
        )
        (saved,) = [b for b in area.evaluate(STATIC_CODE) if "def area" in b["text"]]
        assert {"import", "def", "return", "print"} <= {
            w for t in colored_words(saved) for w in t.split()
        }
        assert faint_text(page) == []  # the comment's grey too, on the code's background
        shots.take(page, "7-streamed-done", area)
    except Exception:
        shots.take(page, "streaming-failure")
        raise
    finally:
        page.close()
