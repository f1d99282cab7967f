"""A --tools module whose model fails with an exception that will not say what it is: its
``__str__`` never returns (for tests/terminal/test_hostile.py)."""

from __future__ import annotations

from typing import Any

import nbagent._ground.formatting
from nbagent import tool
from nbagent.models import FunctionModel

nbagent._ground.formatting.FORMAT_TIMEOUT = 0.5  # quick, for the test


class Unspeakable(Exception):
    def __str__(self) -> str:
        while True:
            pass


def _decide(_request: Any) -> Any:
    raise Unspeakable()


@tool
def unused() -> str:
    """Never called."""
    return "unused"


nbagent_model = FunctionModel(_decide)
