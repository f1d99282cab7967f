"""What the course's browser tests share: the lessons, the text each must show, a JupyterLab
with the course copied in and a chromium (module fixtures: each test module starts its own, so
that pytest-xdist can run the modules side by side), and Run All as a person does it.

The course is tested in three modules: Run All on the first six lessons
(test_course_in_jupyterlab.py), on the last six (test_course_later_lessons.py), and a run saved,
reopened and exported, and the dark theme (test_course_saved_and_themed.py).
"""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .lab import (
    BUTTONS,
    CHROMIUM,
    Lab,
    cells_done,
    faint_text,
    mark_cells,
    menu,
    open_notebook,
    running_lab,
    short_ids,
    skip_unless_browser,
)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SHOTS = ROOT / "test-output"
TIMEOUT = 120

#: Text each notebook must show once Run All is done (from prints and from %agent runs).
EXPECTED = {
    "01_quickstart": [
        "Paris: sunny, 21 °C",
        "finished after 2 steps",
        "Watering the plants in the kitchen.",
    ],
    "02_defining_tools": ["age set to 42", "Customer C-200 is on the Silver plan."],
    "03_approvals": [
        "deleted old.log",
        "approved by you",
        "preview: would delete 2 orders: A-2, A-3",
        "It ran with these arguments, not the ones you sent",
    ],
    "04_rich_results": ["6 cities; warmest is Pune at 31 °C.", "⚙ sketch", "⚙ temperatures"],
    "05_streaming_and_control": [
        "412 birds counted on the north coast",
        "stopped: cancelled",
        "⚙ survey",
        "timeline: 2 steps, 3 tool calls",
    ],
    "06_generator_vs_agent": ["Customer C-100 is on the Gold plan."],
    "07_providers": ["2 + 3 = 5."],
    "08_record_and_replay": [
        "replayed: finished | the model said: A kilo of apples costs 3.20 EUR today.",
        "replay of ScriptedModel:scripted",
        "diverged at step 2",
        "failed | ReplayDivergedError",
    ],
    "09_many_runs": [
        "nbagent map · finished · quiz",
        "5/5 · done 5 · failed 0",
        "6 points out of 10",
        "the second batch ran only: ['Oslo | Oslo']",
    ],
    "10_a_real_tiny_model": [
        "replay of LocalChat:smollm2",
        "50 is greater than the maximum of 30",
        "calls that need approval are denied in this run",
        "Sint Maarten: no data for this city",
        "run stopped: max_steps after 3 model turns",
    ],
    "11_the_agent_in_your_kernel": [
        "replay of ScriptedModel:stand-in",
        "finished · 5 steps",
        "Namespace",
        "Undid run-1 · step 4.",
        "still there: ['fig', 'ax']",  # undo cannot vouch for a figure
        "# nbagent run-1 · step 3: flag the unusual months",
    ],
    "12_step_and_fork": [
        "What the model saw, step by step (2 requests)",
        "the model read at step 2: ['Paris: sunny, 21 °C', 'Oslo: rain, 9 °C']",
        "step 1: paused before the model request, then went on to the next step",
        "Oslo: rain, 9 °C. Bring a coat.",
        "Then no coat needed. | the model read: Oslo: sunny, 25 °C | edited: True",
        "Paris is fine; for Oslo, pack a raincoat and boots.",
        "they first differ at step 2",
    ],
    "13_running_a_course": [
        "This is an exam: AI is off",
        "ai_off: True | requests sent: 0",
        "AI use in this notebook",
        "2 run(s): 0 live, 0 replayed, 2 offline, 0 refused",
        "student-exam-run/exams/final.ipynb [ai_off]",
        "to look at: run-1 (nbagent-recordings/run-1-852cd718417880f5.json): the answer",
        "17 notebook(s), 29 run(s), 6 flagged",
    ],
    "14_typed_answers_and_helpers": [
        "Booking(guest='Ann Berg', nights=3, city='Oslo')",
        "/nights: 'three' is not of type 'integer'",
        "research: its own run",
        "research answered: Oslo: rain, 9 °C today.",
        "the planner said: Pack a raincoat: Oslo has rain and 9 °C today.",
    ],
    "15_the_agent_fixes_a_notebook": [
        """[3] code report: 'print(f"Total: {total:.2f}")'""",
        "'accepted': 'as proposed'",  # clicked Accept: by the person
        "the rule `deny insert_cell` denies it",
        "edit of cell 3 (id report): taken back",
        '"tool": "edit_cell"',
        "is a markdown cell",  # the open notebook read through the page: the cell above
    ],
}
#: How many step-mode pauses a person meets in each lesson under Run All (each gets Next).
PAUSES = {"12_step_and_fork": 3}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    skip_unless_browser()
    home = tmp_path_factory.mktemp("course-lab")
    work = home / "work"
    shutil.copytree(ROOT / "notebooks", work)
    with running_lab(work, home) as server:
        yield server


@pytest.fixture(scope="module")
def browser(lab: Lab) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


def run_all(page: Any, pauses: list[int] | None = None) -> int:
    """Run > Run All Cells, approving every call that asks and going on with **Next** at each
    step-mode pause (counted in ``pauses``); returns how many calls were approved."""
    mark_cells(page)
    menu(page, "Run", "Run All Cells")
    approved = 0
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        buttons = page.locator(BUTTONS, has_text=re.compile("^(Approve|Accept)$"))
        for index in range(buttons.count()):
            button = buttons.nth(index)
            if button.is_visible() and button.is_enabled():
                button.click()
                approved += 1
        steps = page.locator(f".nbagent-pause {BUTTONS.split()[-1]}", has_text="Next")
        for index in range(steps.count()):
            button = steps.nth(index)
            if button.is_visible() and button.is_enabled():
                button.click()
                if pauses is not None:
                    pauses.append(1)
        if cells_done(page):
            time.sleep(0.5)  # let the last display updates land
            if cells_done(page):
                return approved
        time.sleep(0.25)
    raise AssertionError("Run All did not finish")


def page_problems(page: Any) -> list[str]:
    """Errors a person would see: error outputs, and widgets that cannot be shown."""
    problems = [
        text[:500]
        for text in page.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        ).all_inner_texts()
    ]
    for words in ("model not found", "Error displaying widget"):
        if page.get_by_text(words).count():
            problems.append(words)
    return problems


#: Images wider than the output they are in (cut at its edge), as "alt: how many px past".
WIDE_IMAGES = """() => Array.from(
  document.querySelectorAll('.jp-OutputArea-output img')
).flatMap(img => {
  const over = img.getBoundingClientRect().right
    - img.closest('.jp-OutputArea-output').getBoundingClientRect().right;
  return over > 1 ? [`${img.alt || img.src.slice(0, 30)}: ${Math.round(over)} px`] : [];
})"""


def forget_kernel(lab: Lab, name: str) -> None:
    """Shut down the kernel an earlier test left to ``name``, so that it opens on a fresh one,
    as a teacher restarts before Run All: a lesson that replays a recording continues the
    session's conversation on a second Run All in the same kernel, and the replay then refuses
    (lesson 11, and any lesson whose %agent cells replay a recording)."""
    for session in lab.api("/api/sessions"):
        if session.get("path") == name:
            try:
                lab.api(f"/api/sessions/{session['id']}", method="DELETE")
            except urllib.error.HTTPError as error:
                if error.code != 404:
                    raise


def output_text(page: Any) -> str:
    """What the outputs say, each run's id in its short form (:func:`.lab.short_ids`)."""
    return short_ids("\n".join(page.locator(".jp-OutputArea-output").all_inner_texts()))


def run_all_cells(lab: Lab, browser: Any, path: Path) -> None:
    """Run All on one lesson: each pause met, no error, its expected text, pictures that fit,
    no widget left."""
    page = browser.new_page(viewport={"width": 1100, "height": 1000})
    try:
        open_notebook(page, lab, path.name)
        pauses: list[int] = []
        approved = run_all(page, pauses)
        assert len(pauses) == PAUSES.get(path.stem, 0)  # each pause met, and Next went on
        assert page_problems(page) == []
        shown = output_text(page)
        missing_texts = [t for t in EXPECTED[path.stem] if t not in shown]
        assert not missing_texts, f"not shown: {missing_texts}"
        if path.stem == "03_approvals":
            assert approved == 2  # the two %agent calls that ask
        if path.stem == "11_the_agent_in_your_kernel":
            assert approved == 2  # the two run_python snippets
        if path.stem == "15_the_agent_fixes_a_notebook":
            assert approved == 2  # the two fixes, each accepted
        if path.stem in ("04_rich_results", "11_the_agent_in_your_kernel"):
            assert page.locator(".jp-OutputArea-output img").count() >= 2
        assert faint_text(page) == []
        # every picture fits the notebook's width, here and at 760 px (the timeline did not)
        assert page.evaluate(WIDE_IMAGES) == []
        page.set_viewport_size({"width": 760, "height": 1000})
        assert page.evaluate(WIDE_IMAGES) == []
        # a finished run keeps no widget in the notebook
        assert page.locator(".jp-OutputArea-output .jupyter-widgets").count() == 0
    except Exception:
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / f"course-{path.stem}-failure.png"), full_page=True)
        raise
    finally:
        page.close()


def save_and_close(page: Any, lab: Lab, name: str) -> None:
    """File > Save, wait for the outputs on disk, shut the kernel down, close the page."""
    menu(page, "File", "Save Notebook")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            saved = json.loads((lab.root / name).read_text())
        except json.JSONDecodeError:  # read while JupyterLab was writing it
            saved = {"cells": []}
        if any(c.get("outputs") for c in saved["cells"]):
            break
        time.sleep(0.3)
    menu(page, "Kernel", "Shut Down Kernel")
    time.sleep(1.0)
    page.close()
