"""The sample course opened in JupyterLab, as a teacher opens it (no API key): an exam from a
student's folder is AI off, its ``%agent`` cell refused in the words it was saved with; a
homework replays its answers; and the class report over the notebooks as JupyterLab saved them
flags nothing an untouched notebook would not have."""

from __future__ import annotations

from typing import Any

from nbagent.course import read_class
from nbagent.course.policy import load_policy

from .course import (
    SHOTS,
    browser,
    forget_kernel,
    lab,
    output_text,
    page_problems,
    run_all,
    save_and_close,
)
from .lab import Lab, open_notebook

__all__ = ["browser", "lab"]  # the fixtures, shared with the lessons' tests

EXAM = "sample-course/submissions/student-001/exams/final.ipynb"
HOMEWORK = "sample-course/submissions/student-003/homework-1.ipynb"


def _run(lab: Lab, browser: Any, name: str, shot: str) -> str:
    forget_kernel(lab, name)
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    try:
        open_notebook(page, lab, name)
        run_all(page)  # returns once every cell is done and its display settled
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / shot), full_page=True)
        assert page_problems(page) == []
        shown = output_text(page)
        save_and_close(page, lab, name)
    except Exception:
        SHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SHOTS / f"failure-{shot}"), full_page=True)
        page.close()
        raise
    return shown


def test_an_exam_from_a_students_folder_refuses_as_it_did_and_asks_for_no_key(
    lab: Lab, browser: Any
) -> None:
    import nbformat

    def refusal() -> Any:  # nbformat joins the lines JupyterLab saves a text as
        return nbformat.read(lab.root / EXAM, as_version=4).cells[2].outputs[0]["data"]

    before = refusal()
    shown = _run(lab, browser, EXAM, "sample-exam-run-all.png")
    assert (
        "nbagent: AI is off here: This is an exam: AI is off (rule notebooks[1].ai = false in "
        "../../../nbagent-course.toml); nothing was sent."
    ) in shown, shown
    assert "API key" not in shown and "OPENAI_API_KEY" not in shown
    assert refusal() == before  # the product's refusal is the sample's, word for word


def test_a_homework_replays_and_the_report_over_what_jupyterlab_saved_agrees(
    lab: Lab, browser: Any
) -> None:
    shown = _run(lab, browser, HOMEWORK, "sample-homework-run-all.png")
    assert "replay of" in shown and "API key" not in shown, shown
    course = lab.root / "sample-course"
    rows = read_class([course / "submissions"], policy=load_policy(course / "nbagent-course.toml"))
    by_path = {r.path: r for r in rows}
    homework = by_path[str(lab.root / HOMEWORK)]
    exam = by_path[str(lab.root / EXAM)]
    assert homework.flags == "" and homework.replayed == homework.runs >= 2, homework
    assert exam.flags == "" and exam.refused == 1, exam
