"""The course as a teacher uses it: Run All in JupyterLab on the last six lessons (providers,
record and replay, many runs, a real tiny model, the agent in your kernel, step and fork),
clicking what asks and going on at each step-mode pause; what is checked:
test_course_in_jupyterlab.py, which runs the first six.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .course import NOTEBOOKS, browser, lab, run_all_cells  # noqa: F401 (fixtures)
from .lab import Lab

LESSONS = NOTEBOOKS[6:]


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_run_all_cells(lab: Lab, browser: Any, path: Path) -> None:  # noqa: F811
    run_all_cells(lab, browser, path)
