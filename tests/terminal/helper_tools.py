"""A tools module for the terminal tests of helper agents (``agent.as_tool``): a caller whose
model hands the task to a ``cleaner`` helper, whose own model calls ``remove`` (which asks
for approval) and then says what it did. Used through ``--tools`` in real subprocesses."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from nbagent import Agent, tool
from nbagent.generation import (
    Finish,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from nbagent.messages import ToolMessage, UserMessage
from nbagent.models import FunctionModel
from nbagent.tools import ToolCall

_ids = iter(range(1, 10_000))


@tool(needs_approval=True)
def remove(path: str) -> str:
    """Remove a file (pretend)."""
    return f"removed {path}"


def _call(name: str, arguments: dict[str, str]) -> list[StreamEvent]:
    call_id = f"call_{next(_ids)}"
    text = json.dumps(arguments)
    return [
        ToolInputStart(call_id, name),
        ToolInputDelta(call_id, text),
        ToolInputEnd(call_id),
        ToolCallReceived(ToolCall(call_id, name, text)),
    ]


async def _play(events: list[StreamEvent]) -> AsyncIterator[StreamEvent]:
    for event in events:
        yield event


def _asked(request: Request) -> str:
    return next((m.text for m in reversed(request.messages) if isinstance(m, UserMessage)), "")


def _helper(request: Request) -> AsyncIterator[StreamEvent]:
    last = request.messages[-1]
    usage = Usage(4, 2)
    if isinstance(last, ToolMessage):
        said = "; ".join(r.text for r in last.results)
        return _play([TextDelta(f"helper says: {said}"), Finish("stop", usage)])
    path = _asked(request).removeprefix("remove ")
    return _play(
        [
            TextDelta("helper will remove it"),
            *_call("remove", {"path": path}),
            Finish("tool_calls", usage),
        ]
    )


def _caller(request: Request) -> AsyncIterator[StreamEvent]:
    last = request.messages[-1]
    usage = Usage(10, 5)
    if isinstance(last, ToolMessage):
        said = "; ".join(r.text for r in last.results)
        return _play([TextDelta(f"caller says: {said}"), Finish("stop", usage)])
    prompt = _asked(request)
    return _play(
        [
            TextDelta("asking the cleaner"),
            *_call("cleaner", {"prompt": prompt}),
            Finish("tool_calls", usage),
        ]
    )


cleaner = Agent(FunctionModel(_helper, model="helper-test"), [remove]).as_tool(
    name="cleaner", description="Removes files."
)
nbagent_model = FunctionModel(_caller, model="caller-test")
