"""Provenance in cells' own metadata, as JupyterLab 4 and Notebook 7 save it.

The kernel cannot write cell metadata; the page can, through the widget manager's document
context: a run's view (``nbagent/notebook/live/presence.js``), and for a refused cell and the
cell ``%agent cells`` inserts, a widget never displayed (``live/cellnote.js``). One notebook
beside a course policy that allows only Anthropic models: a setup cell with a scripted model,
an ``%agent`` run, an ``%agent`` cell the policy refuses, a run with the kernel tools, and
``%agent cells``. Run all, save, and read the saved file: the run's cell and the refused cell
hold the records their outputs carry, the inserted cell holds the ``%agent cells`` record, the
file validates, and (JupyterLab) the property inspector shows them. Cleared outputs take the
run's and the refusal's record away; the inserted cell keeps its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from nbagent.course import notebook_report
from nbagent.course.provenance import (
    Provenance,
    StepRecord,
    follow_up_from_metadata,
    from_metadata,
    sha256_digest,
)

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
REFUSED = "%agent -m openai:gpt-4.1-mini what is 2 + 2?"
KERNEL_SETUP = (
    "from nbagent.models import Call, Turn\n"
    "nbagent.notebook.current_session().set_model(ScriptedModel(\n"
    "    [Turn(Call('run_python', {'code': 'made = 6 * 7'})), 'Made it.']))"
)
KERNEL_RUN = "%agent --new --kernel --approve auto make it"
CELLS = "%agent cells"
POLICY = 'models = ["anthropic:*"]\n'


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
    nb.cells = [
        nbformat.v4.new_code_cell(code)
        for code in (SETUP, RUN, REFUSED, KERNEL_SETUP, KERNEL_RUN, CELLS)
    ]
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, work / NOTEBOOK)
    (work / "nbagent-course.toml").write_text(POLICY, encoding="utf-8")
    with running_lab(work, home, app=request.param) as server:
        server.app = request.param  # type: ignore[attr-defined]
        yield server


def _refusal_record(cell: Any) -> dict[str, Any] | None:
    for output in cell.get("outputs", []):
        mine = output.get("metadata", {}).get("nbagent")
        if isinstance(mine, dict) and isinstance(mine.get("refused"), str):
            return dict(mine)
    return None


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
            mark_cells(page)  # Run All does not run the cell %agent cells inserts
            page.locator(".jp-CodeCell").first.click()
            menu(page, "Run", "Run All Cells")
            wait_for("every cell to run", lambda: cells_done(page), 120)
            wait_for(
                "the run's final output",
                lambda: page.locator(
                    ".jp-OutputArea-output", has_text="Hello from the cell."
                ).count(),
                120,
            )
            wait_for("the cell %agent cells inserts", lambda: page.locator(
                ".jp-CodeCell").count() == 7, 60)  # fmt: skip
            page.keyboard.press("Control+s")
            path = served.root / NOTEBOOK

            def saved_records() -> Any:
                time.sleep(0.2)
                cells = _read_saved(path).cells
                return (
                    len(cells) == 7
                    and _output_record(cells[1])
                    and "nbagent" in cells[2].metadata
                    and "nbagent" in cells[6].metadata
                    and cells
                )

            cells = wait_for("the saved notebook with every record", saved_records, 60)
            saved = nbformat.read(path, as_version=4)
            nbformat.validate(saved)
            in_output = _output_record(cells[1])
            in_cell = cells[1].metadata.get("nbagent")
            assert in_cell == in_output, (in_cell, in_output)
            run = from_metadata(in_cell)
            assert isinstance(run, Provenance) and run.prompt == "say hello"
            assert run.policy_digest == sha256_digest(POLICY)
            for n in (0, 3, 5):  # setup cells, and the command (its output holds its record)
                assert "nbagent" not in cells[n].metadata, (n, cells[n].metadata)
            # the refused cell: the record its output carries, with the rule and the time
            refusal = cells[2].metadata["nbagent"]
            assert refusal == _refusal_record(cells[2]), (refusal, _refusal_record(cells[2]))
            refused = from_metadata(refusal)
            assert refused.rule == "models" and refused.at and refused.refused
            assert refused.run_id.startswith("refused-") and "openai:gpt-4.1-mini" in (
                refused.refused
            )
            # the inserted cell: made by the agent, which run and step, kept, under the policy
            made = follow_up_from_metadata(cells[6].metadata["nbagent"])
            kernel_run = from_metadata(cells[4].metadata["nbagent"])
            assert made.action == "cells" and made.runs == (kernel_run.run_id,)
            assert made.steps == (StepRecord(kernel_run.run_id, 1, True, None),)
            assert made.policy_digest == sha256_digest(POLICY)
            assert made.code_digest == sha256_digest(cells[6].source.rstrip() + "\n")
            assert "made = 6 * 7" in cells[6].source
            report = notebook_report(path)
            assert report.agent_cells == 1 and report.agent_cells_edited == 0, str(report)
            assert [r.refused is not None for r in report.runs] == [False, True, False]
            if app == "jupyterlab":
                page.locator(".jp-SideBar.jp-mod-right li[title*='Property Inspector']").click()
                tools = page.locator(".jp-NotebookTools .jp-Collapse-header", has_text="Advanced")
                if tools.count():
                    tools.first.click()
                for n, shown, name in (
                    (1, run.run_id, "property-inspector"),
                    (2, refused.run_id, "property-inspector-refused"),
                    (6, '"action": "cells"', "property-inspector-inserted"),
                ):
                    page.locator(".jp-CodeCell").nth(n).click()
                    page.locator(".jp-NotebookTools", has_text=shown).first.wait_for(timeout=30_000)
                    shots.take(page, name)
            # outputs cleared: the cells no longer claim the run or the refusal; the cell the
            # agent made keeps its record (it is that cell's origin, not an output's)
            for n in (1, 2):
                page.locator(".jp-CodeCell").nth(n).click()
                menu(page, "Edit", "Clear Cell Output")
            page.keyboard.press("Control+s")

            def cleared() -> bool:
                time.sleep(0.2)
                cells = _read_saved(path).cells
                return (
                    len(cells) == 7
                    and not cells[1].outputs
                    and not cells[2].outputs
                    and "nbagent" not in cells[1].metadata
                    and "nbagent" not in cells[2].metadata
                )

            wait_for("the cleared cells saved without their records", cleared, 60)
            after = nbformat.read(path, as_version=4)
            nbformat.validate(after)
            assert after.cells[6].metadata["nbagent"] == cells[6].metadata["nbagent"]
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
