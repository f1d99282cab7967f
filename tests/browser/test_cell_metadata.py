"""A run's provenance in its cell's own metadata, as JupyterLab 4 and Notebook 7 save it.

The kernel cannot write cell metadata; the run's view can, through the widget manager's
document context (see ``nbagent/notebook/static/presence.js``). One notebook: a setup cell with
a scripted model, one ``%agent`` cell. Run both, save, and read the saved file: the ``%agent``
cell's ``metadata["nbagent"]`` is the same provenance record its final output carries, the
file validates, and (JupyterLab) the property inspector shows it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from nbagent.course.provenance import Provenance, from_metadata

from .lab import (
    CHROMIUM,
    KERNELSPEC,
    Lab,
    Shots,
    cells_done,
    mark_cells,
    menu,
    missing,
    open_in_notebook7,
    open_notebook,
    running_lab,
    wait_for,
)

NOTEBOOK = "cellmeta.ipynb"
SETUP = (
    "%load_ext nbagent\n"
    "import nbagent.notebook\n"
    "from nbagent.models import ScriptedModel\n"
    "nbagent.notebook.current_session().set_model(ScriptedModel(['Hello from the cell.']))"
)
RUN = "%agent say hello"


@pytest.fixture(scope="module", params=["jupyterlab", "notebook"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Lab]:
    reason = missing()
    if reason is None and request.param == "notebook":
        try:
            import notebook  # noqa: F401
        except ImportError:
            reason = "Notebook 7 is not installed (pip install notebook)"
    if reason:
        print(f"browser test skipped: {reason}")
        pytest.skip(reason)
    home = tmp_path_factory.mktemp(f"cellmeta-{request.param}")
    work = home / "work"
    work.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(SETUP), nbformat.v4.new_code_cell(RUN)]
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, work / NOTEBOOK)
    with running_lab(work, home, app=request.param) as server:
        server.app = request.param  # type: ignore[attr-defined]
        yield server


def _output_record(cell: Any) -> dict[str, Any] | None:
    for output in cell.get("outputs", []):
        mine = output.get("metadata", {}).get("nbagent")
        if isinstance(mine, dict) and isinstance(mine.get("provenance"), dict):
            return dict(mine["provenance"])
    return None


@pytest.mark.timeout(300)
def test_a_runs_record_is_in_its_cells_metadata_once_saved(served: Lab, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    app = served.app  # type: ignore[attr-defined]
    shots = Shots(tmp_path)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page: Any = browser.new_page(viewport={"width": 1300, "height": 900})
        try:
            if app == "jupyterlab":
                open_notebook(page, served, NOTEBOOK)
            else:
                open_in_notebook7(page, served, NOTEBOOK)
            page.locator(".jp-CodeCell").first.wait_for()
            mark_cells(page)  # Shift+Enter on the last cell adds an empty one below
            page.locator(".jp-CodeCell").first.click()
            page.keyboard.press("Shift+Enter")
            page.keyboard.press("Shift+Enter")
            wait_for("both cells to run", lambda: cells_done(page), 60)
            wait_for(
                "the run's final output",
                lambda: page.locator(
                    ".jp-OutputArea-output", has_text="Hello from the cell."
                ).count(),
                120,
            )
            page.keyboard.press("Control+s")
            path = served.root / NOTEBOOK

            def saved_record() -> Any:
                time.sleep(0.2)
                cells = _read_saved(path).cells
                return len(cells) > 1 and _output_record(cells[1]) and cells

            cells = wait_for("the saved notebook with the run's output", saved_record, 60)
            saved = nbformat.read(path, as_version=4)
            nbformat.validate(saved)
            in_output = _output_record(cells[1])
            in_cell = cells[1].metadata.get("nbagent")
            assert in_cell == in_output, (in_cell, in_output)
            run = from_metadata(in_cell)
            assert isinstance(run, Provenance) and run.prompt == "say hello"
            assert "nbagent" not in cells[0].metadata  # the setup cell ran no agent
            page.locator(".jp-CodeCell").nth(1).click()
            if app == "jupyterlab":
                page.locator(".jp-SideBar.jp-mod-right li[title*='Property Inspector']").click()
                tools = page.locator(".jp-NotebookTools .jp-Collapse-header", has_text="Advanced")
                if tools.count():
                    tools.first.click()
                page.locator(".jp-NotebookTools", has_text=run.run_id).first.wait_for(
                    timeout=30_000
                )
                shots.take(page, "property-inspector")
            # outputs cleared: the cell no longer claims the run
            menu(page, "Edit", "Clear Cell Output")
            page.keyboard.press("Control+s")

            def cleared() -> bool:
                time.sleep(0.2)
                cells = _read_saved(path).cells
                return (
                    len(cells) > 1 and not cells[1].outputs and "nbagent" not in cells[1].metadata
                )

            wait_for("the cleared cell saved without the record", cleared, 60)
        except Exception:
            shots.take(page, f"{app}-failure")
            raise
        finally:
            browser.close()


def _read_saved(path: Any) -> Any:
    """The saved notebook, or an empty one while JupyterLab is still writing the file (read
    mid-save, it is empty or cut short: the caller's wait tries again)."""
    try:
        return nbformat.read(path, as_version=4)
    except (ValueError, nbformat.reader.NotJSONError):  # JSONDecodeError is a ValueError
        return nbformat.v4.new_notebook()
