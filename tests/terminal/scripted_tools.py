"""A tools module for the terminal tests: slow tools, and a scripted model chosen by the prompt.

Used through ``--tools`` in real subprocesses; ``nbagent_model`` makes the terminal use the model
below instead of the offline one. Each prompt keyword plays one scene.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from nbagent import ToolContext, text_and_image_result, tool
from nbagent.generation import (
    Finish,
    ReasoningDelta,
    Request,
    StreamEvent,
    StreamRetry,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from nbagent.messages import AssistantMessage, ToolMessage, UserMessage
from nbagent.models import FunctionModel
from nbagent.tools import ToolCall

_ids = iter(range(1, 10_000))


@tool
def look() -> str:
    """Look around (the same answer every time)."""
    return "nothing has changed"


@tool(needs_approval=True)
def remove(path: str) -> str:
    """Remove a file (pretend)."""
    return f"removed {path}"


def _rows_to_drop(arguments: dict) -> object:
    """The preview of drop_rows: a table, a table with a picture, a failure, or a hang."""
    import pandas as pd
    from PIL import Image

    table = arguments["table"]
    rows = pd.DataFrame({"name": ["ada", "bob"], "age": [36, 41]})
    if table == "users":
        return rows
    if table == "pictures":
        return text_and_image_result("one picture would go", Image.new("RGB", (40, 30), "red"))
    if table == "broken":
        raise LookupError("no such table: broken")
    _wait_for_file(table)  # a path: hangs until the test creates it
    return rows


@tool(needs_approval=True, preview=_rows_to_drop)
def drop_rows(table: str) -> str:
    """Drop every row of a table (pretend)."""
    return f"dropped {table}"


@tool
async def slow_async(seconds: float, context: ToolContext) -> str:
    """Sleep, reporting progress; honours cancellation."""
    context.update("started")
    await asyncio.sleep(seconds)
    return "slept"


@tool
def slow_sync(seconds: float, context: ToolContext) -> str:
    """Sleep on a thread and ignore cancellation (the worst case)."""
    context.update("started")
    time.sleep(seconds)
    return "slept"


if os.environ.get("NBAGENT_TEST_CANCEL_GRACE"):  # a test that needs the run to wind down slowly
    import nbagent.loop._execution

    nbagent.loop._execution.CANCEL_GRACE = float(os.environ["NBAGENT_TEST_CANCEL_GRACE"])


@tool
async def stubborn(marker: str) -> str:
    """Ignores the first cancel (creating ``marker`` when it comes), so a run winds down slowly."""
    try:
        await asyncio.sleep(300)
    except asyncio.CancelledError:
        Path(marker).write_text("cancel received")  # noqa: ASYNC240 (a test's marker file)
        await asyncio.sleep(300)
    return "slept"


@tool
def broken(value: str) -> str:
    """Always fails."""
    raise RuntimeError(f"broken on {value}")


def _wait_for_file(path: str) -> None:
    """Block until the test creates ``path``: a hand-off in order, never a guess at timing."""
    deadline = time.monotonic() + 60
    while path and not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the test never created {path}")
        time.sleep(0.01)


@tool
def chatty(value: str, marker: str = "", after: str = "") -> str:
    """Once ``after`` exists, prints, then creates ``marker`` (so a test knows it has printed)."""
    _wait_for_file(after)
    print(f"chatty says {value}")
    if marker:
        with open(marker, "w") as file:
            file.write("printed")
    return "said it"


@tool
def stuck(release: str, context: ToolContext) -> str:
    """Ignores cancellation and runs on until the test creates ``release``."""
    context.update("started")
    _wait_for_file(release)
    return "released"


@tool
def halt(after: str) -> str:
    """Once ``after`` exists, raises SystemExit, which stops the whole run."""
    _wait_for_file(after)
    raise SystemExit(3)


def _history_ok(request: Request) -> bool:
    pending: list[str] = []
    for message in request.messages:
        if isinstance(message, ToolMessage):
            if [r.call_id for r in message.results] != pending:
                return False
            pending = []
        elif pending:
            return False
        elif isinstance(message, AssistantMessage):
            pending = [c.id for c in message.tool_calls]
        elif not isinstance(message, UserMessage):
            return False
    return not pending


def _call(name: str, arguments: str) -> list[StreamEvent]:
    call_id = f"call_{next(_ids)}"
    half = len(arguments) // 2
    return [
        ToolInputStart(call_id, name),
        ToolInputDelta(call_id, arguments[:half]),
        ToolInputDelta(call_id, arguments[half:]),
        ToolInputEnd(call_id),
        ToolCallReceived(ToolCall(call_id, name, arguments)),
    ]


def _text(text: str, pieces: int = 1) -> list[StreamEvent]:
    size = max(1, len(text) // pieces)
    return [TextDelta(text[i : i + size]) for i in range(0, len(text), size)]


async def _play(events: list[StreamEvent | float]) -> AsyncIterator[StreamEvent]:
    for event in events:
        if isinstance(event, float):
            await asyncio.sleep(event)
        else:
            yield event


def decide(request: Request) -> AsyncIterator[StreamEvent]:
    last = request.messages[-1]
    usage = Usage(10, 5)
    asked = next((m.text for m in reversed(request.messages) if isinstance(m, UserMessage)), "")
    if asked.startswith("loop") and len(request.messages) < 40:  # look, whatever it says
        return _play([*_call("look", "{}"), Finish("tool_calls", usage)])
    if isinstance(last, ToolMessage):
        text = "after tools: " + "; ".join(r.text for r in last.results)
        return _play([*_text(text), Finish("stop", usage)])
    prompt = last.text if isinstance(last, UserMessage) else ""
    verdict = "history ok" if _history_ok(request) else "history BROKEN"
    if prompt.startswith("instructions"):
        return _play([*_text(f"instructions: {request.instructions}"), Finish("stop", usage)])
    if prompt.startswith("check"):
        return _play([*_text(verdict), Finish("stop", usage)])
    if prompt.startswith("approve and chat "):
        folder = Path(prompt.removeprefix("approve and chat "))
        arguments = {
            "value": "hi",
            "marker": str(folder / "printed"),
            "after": str(folder / "asked"),
        }
        events = _call("remove", '{"path": "a.txt"}') + _call("chatty", json.dumps(arguments))
        return _play([*events, Finish("tool_calls", usage)])
    if prompt.startswith("approve and halt "):
        arguments = {"after": prompt.removeprefix("approve and halt ")}
        events = _call("remove", '{"path": "a.txt"}') + _call("halt", json.dumps(arguments))
        return _play([*events, Finish("tool_calls", usage)])
    if prompt.startswith("approve two"):
        events: list[StreamEvent | float] = [*_text("Removing two files now", 4), 0.05]
        events += _call("remove", '{"path": "a.txt"}') + _call("remove", '{"path": "b.txt"}')
        return _play([*events, Finish("tool_calls", usage)])
    if prompt.startswith("approve"):
        events = [*_text("I will remove the file", 5), 0.05, *_call("remove", '{"path": "a.txt"}')]
        return _play([*events, Finish("tool_calls", usage)])
    if prompt.startswith("drop "):
        arguments = json.dumps({"table": prompt.removeprefix("drop ")})
        return _play([*_call("drop_rows", arguments), Finish("tool_calls", usage)])
    if prompt.startswith("long"):
        arguments = '{"path": "' + "x" * 500 + 'END"}'
        return _play([*_call("remove", arguments), Finish("tool_calls", usage)])
    if prompt.startswith("stream forever"):
        return _play([*[x for i in range(600) for x in (TextDelta(f"w{i} "), 0.05)]])
    for name in ("slow_async", "slow_sync"):
        if prompt.startswith(name):
            events = [*_call(name, '{"seconds": 300}'), Finish("tool_calls", usage)]
            return _play(events)
    if prompt.startswith("stuck "):
        arguments = json.dumps({"release": prompt.removeprefix("stuck ")})
        return _play([*_call("stuck", arguments), Finish("tool_calls", usage)])
    if prompt.startswith("stubborn "):
        arguments = json.dumps({"marker": prompt.removeprefix("stubborn ")})
        return _play([*_call("stubborn", arguments), Finish("tool_calls", usage)])
    if prompt.startswith("retry"):
        events = [
            TextDelta("Half an ans"),
            *_call("remove", '{"path": "never.txt"}')[:2],
            StreamRetry("connection reset by peer", 1, 0.0),
            *_text("A whole answer."),
            Finish("stop", usage),
        ]
        return _play(events)
    if prompt.startswith("reason"):
        events = [
            ReasoningDelta("First I think.\nThen I think more."),
            *_text("The answer is 4."),
            Finish("stop", usage),
        ]
        return _play(events)
    if prompt.startswith("fail"):
        raise ConnectionError("the server hung up\nwith a second line")
    if prompt.startswith("broken"):
        return _play([*_call("broken", '{"value": "x"}'), Finish("tool_calls", usage)])
    if prompt.startswith("chatty"):
        return _play([*_call("chatty", '{"value": "hi"}'), Finish("tool_calls", usage)])
    if prompt.startswith("inject"):
        text = "red \x1b[31mtext\x1b[0m\rOVERWRITE \x1b]52;c;cHduZWQ=\x07 done"
        return _play([*_text(text), Finish("stop", usage)])
    return _play([*_text(f"echo: {prompt}"), Finish("stop", usage)])


nbagent_model = FunctionModel(decide, model="scripted-test")
