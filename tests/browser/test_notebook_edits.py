"""The notebook as the agent's workspace, in the real page: JupyterLab 4 and Notebook 7, with
and without ``jupyter-collaboration`` (a venv of its own: tests/browser/collaboration.py).

One notebook, three runs of a scripted model, as a person meets them: read → propose → the
per-cell diff (Markdown and HTML in it shown as text) → Accept (the cell changes in the page) →
Accept a new cell (with collaboration, a second page shows it too, once) → Reject a new cell
with a reason (nothing changes) → JupyterLab's own undo in the edited cell and of the new cell
(command mode Z), and redo → a proposal the person's own typing overtakes (it does not land,
the card says so with the new diff) → ``%agent undo`` (the run's edits taken back as one step)
→ save → reopen. Screenshots of each step are printed; look at them.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from . import collaboration
from .lab import (
    BUTTONS,
    CHROMIUM,
    KERNELSPEC,
    Lab,
    Shots,
    faint_text,
    keep_waiting_for_slow_documents,
    missing,
    open_in_notebook7,
    open_notebook,
    running_lab,
    wait_for,
)

NOTEBOOK = "edits.ipynb"
SETUP = """%load_ext nbagent
import nbagent.notebook
from nbagent.models import ScriptedModel, Call, Turn
nbagent.notebook.current_session().set_model(ScriptedModel([
    Turn(Call('read_notebook', {})),
    Turn(Call('edit_cell', {'cell_id': 'broken', 'source': 'print(total)'})),
    Turn(Call('insert_cell', {'source': '**Fixed** <b>it</b>', 'cell_type': 'markdown',
                              'after_cell_id': 'broken'})),
    Turn(Call('insert_cell', {'source': "print('never')", 'after_cell_id': 'first'})),
    'Fixed it.',
    Turn(Call('read_notebook', {})),
    Turn(Call('edit_cell', {'cell_id': 'first', 'source': 'total = 4'})),
    'Tried.',
]))"""
CELLS = [
    ("setup", SETUP),
    ("first", "total = 3"),
    ("broken", "print(totl)"),
    ("ask", "%agent --notebook fix the error above"),
    ("again", "%agent --new --notebook once more"),
    ("undo", "%agent undo run-1"),
]
ACCEPT = re.compile("^Accept$")


@pytest.fixture(scope="module", params=["jupyterlab", "notebook", "jupyterlab+rtc", "notebook+rtc"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Lab]:
    app, _, rtc = request.param.partition("+")
    reason = missing()
    if reason is None and app == "notebook":
        try:
            import notebook  # noqa: F401
        except ImportError:
            reason = "Notebook 7 is not installed (pip install notebook)"
    python = None
    if reason is None and rtc:
        cache = request.config.cache
        assert cache is not None
        try:
            python = str(collaboration.ensure(Path(cache.mkdir("collaboration-venv"))))
        except (subprocess.CalledProcessError, OSError) as exc:
            reason = (
                f"the jupyter-collaboration {collaboration.VERSION} venv could not be built: {exc}"
            )
    if reason:
        print(f"browser test skipped: {reason}")
        pytest.skip(reason)
    home = tmp_path_factory.mktemp(f"edits-{app}{'-rtc' if rtc else ''}")
    work = home / "work"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    for cell_id, source in CELLS:
        cell = nbformat.v4.new_code_cell(source)
        cell.id = cell_id
        nb.cells.append(cell)
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, work / NOTEBOOK)
    options: dict[str, Any] = {"app": app}
    if python is not None:
        options["python"] = python
    with running_lab(work, home, **options) as server:
        server.app = app  # type: ignore[attr-defined]
        server.rtc = bool(rtc)  # type: ignore[attr-defined]
        yield server


def _open(page: Any, lab: Lab) -> None:
    keep_waiting_for_slow_documents(page)
    if lab.app == "notebook":  # type: ignore[attr-defined]
        open_in_notebook7(page, lab, NOTEBOOK)
    else:
        open_notebook(page, lab, NOTEBOOK)
    page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.wait_for(timeout=60_000)


def _sources(page: Any) -> list[str]:
    return list(
        page.evaluate(
            "() => Array.from(document.querySelectorAll('.jp-Notebook .jp-Cell')).map(c => {"
            " const e = c.querySelector('.jp-InputArea-editor .cm-content');"
            " return e ? e.innerText.replace(/\\u200b/g, '') : ''; })"
        )
    )


def _editor(page: Any, source: str) -> Any:
    """The editor of the cell whose source starts with ``source``."""
    index = next(i for i, s in enumerate(_sources(page)) if s.startswith(source))
    return page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor .cm-content").nth(index)


def _run(page: Any, source: str, keys: str = "Shift+Enter") -> None:
    _editor(page, source).click()
    page.keyboard.press(keys)


def _visible(page: Any, text: Any) -> Any:
    button = page.locator(f"{BUTTONS}:visible", has_text=text)
    return button.first if button.count() and button.first.is_enabled() else None


def _card_text(page: Any) -> str:
    return "\n".join(page.locator(".nbagent-card").all_inner_texts())


def _saved(lab: Lab) -> Any:
    try:
        return nbformat.read(lab.root / NOTEBOOK, as_version=4)
    except (ValueError, nbformat.reader.NotJSONError):  # read mid-save
        return nbformat.v4.new_notebook()


@pytest.mark.timeout(600)
def test_read_propose_accept_reject_conflict_undo_save_reopen(served: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    shots = Shots(tmp_path)
    rtc = served.rtc  # type: ignore[attr-defined]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page: Any = browser.new_page(viewport={"width": 1300, "height": 1000})
        other: Any = None
        try:
            _open(page, served)
            if rtc:  # a collaborator with the same notebook open
                other = browser.new_context().new_page()
                _open(other, served)
            for source in ("%load_ext", "total = 3", "print(totl)"):
                _run(page, source)
                time.sleep(1.0)
            wait_for("the error", lambda: page.get_by_text("is not defined").count(), 60)
            _run(page, "%agent --notebook fix")
            # read → propose → the diff
            accept = wait_for("the edit's card", lambda: _visible(page, ACCEPT), 90)
            said = "Proposal: Edit cell 3 (id broken, code): 1 line added, 1 removed"
            wait_for("the edit's diff", lambda: said in _card_text(page), 30)  # the preview
            assert "-print(totl)" in _card_text(page) and "+print(total)" in _card_text(page)
            shots.take(page, "1-edit-proposed", accept)
            accept.click()
            wait_for("the edit in the page", lambda: "print(total)" in _sources(page), 30)
            done = page.locator(".nbagent-card", has_text="Done: Edited cell 3")
            wait_for(
                "the accepted card", lambda: "shown before it was approved" in done.inner_text(), 30
            )
            # a new Markdown cell: shown as text in the card, accepted, once in every view
            accept = wait_for("the new cell's card", lambda: _visible(page, ACCEPT), 60)
            card = page.locator(".nbagent-card").last
            wait_for("the new cell's diff", lambda: "+**Fixed** <b>it</b>" in card.inner_text(), 30)
            assert card.locator("b", has_text="it").count() == 0  # never rendered
            shots.take(page, "2-markdown-proposed", accept)
            accept.click()
            wait_for("the new cell", lambda: "**Fixed** <b>it</b>" in _sources(page), 30)
            # reject another new cell, with a reason: nothing changes
            reject = wait_for("the second new cell's card", lambda: _visible(page, "Reject"), 60)
            count = len(_sources(page))
            page.locator(".nbagent-approval input:visible").last.fill("not this one")
            reject.click()
            wait_for("the run's end", lambda: page.get_by_text("Fixed it.").count(), 60)
            assert len(_sources(page)) == count and "print('never')" not in _sources(page)
            shots.take(page, "3-after-the-run")
            if other is not None:
                wait_for("the collaborator's view", lambda: "print(total)" in _sources(other), 30)
                assert _sources(other).count("**Fixed** <b>it</b>") == 1
                assert "print('never')" not in _sources(other)
                shots.take(other, "3b-the-collaborators-view")
            # JupyterLab's own undo: in the edited cell, and of the new cell (command mode)
            _editor(page, "print(total)").click()
            page.keyboard.press("Control+z")
            wait_for("the cell's undo", lambda: "print(totl)" in _sources(page), 10)
            page.keyboard.press("Control+Shift+z")
            wait_for("the cell's redo", lambda: "print(total)" in _sources(page), 10)
            page.keyboard.press("Escape")
            page.keyboard.press("z")
            wait_for("the notebook's undo", lambda: "**Fixed** <b>it</b>" not in _sources(page), 10)
            page.keyboard.press("Shift+z")
            wait_for("the notebook's redo", lambda: "**Fixed** <b>it</b>" in _sources(page), 10)
            # the person's own typing overtakes a proposal: it does not land
            _run(page, "%agent --new --notebook once more")
            accept = wait_for("the second run's card", lambda: _visible(page, ACCEPT), 90)
            _editor(page, "total = 3").click()
            page.keyboard.press("End")
            page.keyboard.type("  # mine")
            accept.click()
            wait_for(
                "the conflict", lambda: page.get_by_text("changed after the agent").count(), 30
            )
            assert "total = 3  # mine" in _sources(page) and "total = 4" not in _sources(page)
            diff = wait_for(
                "the conflict's diff",
                # the innermost block with the label and the diff: the card, live or static
                lambda: (
                    page.locator("div", has_text="as it is now").filter(has_text="+total = 4").last
                ),
                30,
            )
            assert "+total = 4" in diff.inner_text() and "-total = 3  # mine" in diff.inner_text()
            shots.take(page, "4-conflict", diff)
            # %agent undo: the first run's edits taken back, as one step
            _run(page, "%agent undo run-1", "Control+Enter")  # no new cell: nothing after ours
            wait_for("the undo", lambda: page.get_by_text("taken back").count(), 60)
            wait_for("the undone page", lambda: "print(totl)" in _sources(page), 30)
            assert "**Fixed** <b>it</b>" not in _sources(page)
            shots.take(page, "5-undone")
            page.keyboard.press("Escape")
            page.keyboard.press("z")  # JupyterLab's undo takes back nbagent's undo, in one step
            wait_for("undo of the undo", lambda: "**Fixed** <b>it</b>" in _sources(page), 10)
            assert "print(total)" in _sources(page)
            assert faint_text(page) == []
            # save, then reopen
            page.keyboard.press("Control+s")

            def saved() -> Any:
                cells = _saved(served).cells
                made = [c for c in cells if c.source == "**Fixed** <b>it</b>"]
                return made and any(c.source == "print(total)" for c in cells) and cells

            cells = wait_for("the saved notebook", saved, 60)
            nbformat.validate(_saved(served))
            fixed = next(c for c in cells if c.source == "print(total)")
            entry = fixed.metadata["nbagent_edit"]["edits"][-1]
            assert (entry["action"], entry["tool"], entry["accepted"]) == (
                "edited",
                "edit_cell",
                "as proposed",
            )
            made = next(c for c in cells if c.source == "**Fixed** <b>it</b>")
            assert made.metadata["nbagent_edit"]["edits"][-1]["action"] == "inserted"
            assert not [c for c in cells if c.source == "print('never')"]  # rejected: never made
            page.close()
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            _open(page, served)
            wait_for("the reopened notebook", lambda: "print(total)" in _sources(page), 60)
            assert _sources(page).count("**Fixed** <b>it</b>") == 1
            shots.take(page, "6-reopened")
        except Exception:
            shots.take(page, "failure")
            raise
        finally:
            browser.close()
