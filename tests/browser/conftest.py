"""The browser tests' bound on one test: a test starts JupyterLab (or Notebook 7) and Chromium,
runs a notebook and clicks through it, which on a loaded machine has taken longer than the
suite's 120 s for one test (pyproject.toml). A bound for a hang, never a speed check; a test
that sets its own keeps it."""

from __future__ import annotations

from pathlib import Path

import pytest

#: Seconds one browser test may take, its module's server start included.
BROWSER_TIMEOUT = 900

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents and not item.get_closest_marker(
            "timeout"
        ):
            item.add_marker(pytest.mark.timeout(BROWSER_TIMEOUT))
