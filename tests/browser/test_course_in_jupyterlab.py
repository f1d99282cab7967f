"""The course as a teacher uses it: Run All in JupyterLab on the first six lessons (quickstart,
tools, approvals, rich results, streaming and control, generator vs agent), clicking what asks.

Every course notebook runs with Run > Run All Cells in headless Chromium; each approval it meets
is approved; no cell may show an error, every cell's expected output must be there, and no
output may be a widget that a saved notebook cannot show. The last six lessons:
test_course_later_lessons.py; a run saved, reopened and exported, and the dark theme:
test_course_saved_and_themed.py (tests/browser/course.py holds what they share).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .course import NOTEBOOKS, browser, lab, run_all_cells  # noqa: F401 (fixtures)
from .lab import Lab

LESSONS = NOTEBOOKS[:6]


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_run_all_cells(lab: Lab, browser: Any, path: Path) -> None:  # noqa: F811
    run_all_cells(lab, browser, path)
