"""A tools module for the terminal tests of helper agents (``agent.as_tool``): a caller whose
model hands the task to a ``cleaner`` helper, whose own model calls ``remove`` (which asks
for approval) and then says what it did. Used through ``--tools MODULE:cleaner`` in real
subprocesses (the caller's model is ``nbagent_model``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from nbagent import Agent, tool
from nbagent.generation import Finish, Request, StreamEvent, TextDelta, Usage
from nbagent.messages import ToolMessage, UserMessage
from nbagent.models import FunctionModel

from .scripted_tools import _call, _play


@tool(needs_approval=True)
def remove(path: str) -> str:
    """Remove a file (pretend)."""
    return f"removed {path}"


def _model(who: str, says: str, act: Callable[[str], tuple[str, dict[str, str]]]) -> FunctionModel:
    """A model that says ``says`` and makes the call ``act(prompt)``; after the results, says
    what they were (``who says: …``)."""

    def decide(request: Request) -> AsyncIterator[StreamEvent]:
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            said = "; ".join(r.text for r in last.results)
            return _play([TextDelta(f"{who} says: {said}"), Finish("stop", Usage(4, 2))])
        asked = next(m.text for m in reversed(request.messages) if isinstance(m, UserMessage))
        name, arguments = act(asked)
        events = [TextDelta(says), *_call(name, json.dumps(arguments))]
        return _play([*events, Finish("tool_calls", Usage(4, 2))])

    return FunctionModel(decide, model=f"{who}-test")


def _remove(asked: str) -> tuple[str, dict[str, str]]:
    return "remove", {"path": asked.removeprefix("remove ")}


def _delegate(asked: str) -> tuple[str, dict[str, str]]:
    return "cleaner", {"prompt": asked}


helper = _model("helper", "helper will remove it", _remove)
cleaner = Agent(helper, [remove]).as_tool(name="cleaner", description="Removes files.")
nbagent_model = _model("caller", "asking the cleaner", _delegate)
