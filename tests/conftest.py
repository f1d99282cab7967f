"""Shared helpers: a history checker every provider's rules agree on; the tiers' marks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from nbagent.messages import AssistantMessage, Message, ToolMessage, UserMessage

from .tiers import SPREAD, by_cost, marks_for


def assert_history_valid(messages: Sequence[Message]) -> None:
    """Every call answered exactly once, in the next message; no result without its call."""
    pending: list[str] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            ids = [r.call_id for r in message.results]
            assert ids == pending, f"message {index}: results {ids} do not answer calls {pending}"
            pending = []
            continue
        assert not pending, f"message {index}: calls {pending} were never answered"
        if isinstance(message, AssistantMessage):
            pending = [c.id for c in message.tool_calls]
        else:
            assert isinstance(message, UserMessage)
    assert not pending, f"calls {pending} at the end were never answered"


@pytest.fixture
def history_valid():  # type: ignore[no-untyped-def]
    return assert_history_valid


_HERE = Path(__file__).parent


@pytest.hookimpl(wrapper=True)  # around the other hooks: before -m deselects, after pytest sorts
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    """Mark each test with its tier and, under pytest-xdist, put each module's tests in one
    xdist_group (one worker), but those of the modules tests/tiers.py lets be spread. Then,
    on a pytest-xdist worker (the workers collect; the controller hands their modules out in
    the order collected, scripts/test passing --no-loadscope-reorder), order the modules
    costliest first, each module's tests in the order pytest gave them by their fixtures."""
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        path = item.path.relative_to(_HERE).as_posix()
        name = getattr(item, "originalname", item.name)
        params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
        for mark in marks_for(path, name, params):
            item.add_marker(mark)
        if xdist and path not in SPREAD:
            item.add_marker(pytest.mark.xdist_group(path))
    yield
    if hasattr(config, "workerinput"):
        items[:] = by_cost(items, lambda item: item.path.relative_to(_HERE).as_posix())
