"""The course policy in JupyterLab: an exam notebook in ``exams/`` is refused in one line, the
policy's section found through the notebook's path that jupyter-server gives the kernel
(``JPY_SESSION_NAME``), and the refusal and its record survive saving."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nbagent.course.provenance import from_metadata, read_output

from .lab import CHROMIUM, KERNELSPEC, Lab, open_notebook, running_lab, skip_unless_browser

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-output"
POLICY = '[[notebooks]]\nmatch = "exams/*.ipynb"\nai = false\nmessage = "This is the exam."\n'
CELLS = ["%load_ext nbagent", "%agent policy", "%agent -m openai:gpt-4.1-mini what is 2 + 2?"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    skip_unless_browser()
    import nbformat

    home = tmp_path_factory.mktemp("lab-course")
    work = home / "work"
    (work / "exams").mkdir(parents=True)
    (work / "nbagent-course.toml").write_text(POLICY, encoding="utf-8")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(code) for code in CELLS]
    nb.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(nb, work / "exams" / "final.ipynb")
    with running_lab(work, home) as server:
        yield server


def wait_for(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_an_exam_notebook_is_refused_in_one_line_and_keeps_its_record(lab: Lab) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 1000})
        try:
            open_notebook(page, lab, "exams/final.ipynb")
            page.locator(".jp-Cell .jp-InputArea-editor .cm-content").first.click()
            for _ in CELLS:
                page.keyboard.press("Shift+Enter")
            outputs = page.locator(".jp-CodeCell .jp-OutputArea")
            wait_for("the refusal", lambda: "nothing was sent" in outputs.nth(2).inner_text())
            refusal = outputs.nth(2).inner_text().strip()
            shown = outputs.nth(1).inner_text()
            path = lab.root / "exams" / "final.ipynb"
            # the page writes the refusal's record into the cell just after its output
            # arrives: save once the property inspector shows it in the cell's metadata
            page.locator(".jp-CodeCell").nth(2).click()
            page.locator(".jp-SideBar.jp-mod-right li[title*='Property Inspector']").click()
            tools = page.locator(".jp-NotebookTools .jp-Collapse-header", has_text="Advanced")
            if tools.count():
                tools.first.click()
            page.locator(".jp-NotebookTools", has_text="refused-").first.wait_for(timeout=60_000)
            page.keyboard.press("Control+s")

            def saved_with_metadata() -> Any:
                try:
                    data = json.loads(path.read_text())
                except ValueError:  # read mid-save
                    return None
                cell = data["cells"][2]
                return cell["outputs"] and "nbagent" in cell["metadata"] and data

            saved = wait_for("the saved notebook with the refusal's record", saved_with_metadata)
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / "course-exam-refused.png"))
        finally:
            browser.close()
    assert refusal.startswith("nbagent: AI is off here: This is the exam")
    assert "notebooks[1].ai = false" in refusal and "../nbagent-course.toml" in refusal
    assert "\n" not in refusal  # one line
    assert "found by JPY_SESSION_NAME" in shown and "notebooks[1]" in shown
    digest = "sha256:" + hashlib.sha256(POLICY.encode()).hexdigest()
    assert digest in shown

    import nbformat

    nbformat.validate(nbformat.from_dict(saved))
    (output,) = saved["cells"][2]["outputs"]
    record = read_output(output["metadata"])
    assert record is not None and record.ai_off and record.policy_digest == digest
    # the cell's own metadata holds the same record: the notebook alone says it was refused
    assert saved["cells"][2]["metadata"]["nbagent"] == output["metadata"]["nbagent"]
    assert from_metadata(saved["cells"][2]["metadata"]["nbagent"]).rule == "ai"
