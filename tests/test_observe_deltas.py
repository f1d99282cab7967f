"""``agent.observe`` hears every event of every later run: the streamed text and each call's
argument fragments too, whether the run is read (``stream``), read slowly (its queue merges
fragments for the reader, never for an observer) or not read at all (``run`` / ``run_sync``),
and in helpers' runs."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from nbagent import Agent
from nbagent.approvals.approval import AutoApprove
from nbagent.events import AssistantTextDelta, HelperEvent, ToolArgumentsDelta
from nbagent.generation import Request
from nbagent.limits import Limits
from nbagent.messages import ToolMessage
from nbagent.models import Call, FunctionModel, ScriptedModel, Text, Turn
from nbagent.tools import tool

ARGUMENTS = {"word": "a" * 40, "times": 3}


@tool
def echo(word: str, times: int) -> str:
    """Say a word again."""
    return word * times


def script() -> ScriptedModel:
    return ScriptedModel(
        [Turn(Text("Let me look.", chunks=4), Call("echo", ARGUMENTS, chunks=8)), "Done."]
    )


def heard(events: list[Any]) -> tuple[str, str, int]:
    deltas = [e for e in events if isinstance(e, ToolArgumentsDelta)]
    text = "".join(e.text for e in events if isinstance(e, AssistantTextDelta))
    return "".join(d.delta for d in deltas), text, len(deltas)


def test_run_sync_tells_observers_every_argument_fragment() -> None:
    events: list[Any] = []
    agent = Agent(script(), [echo], approver=AutoApprove())
    agent.observe(lambda run_id, event: events.append(event))
    agent.run_sync("go")
    arguments, text, count = heard(events)
    assert json.loads(arguments) == ARGUMENTS and count == 8
    assert text == "Let me look.Done."


async def test_await_run_tells_observers_every_argument_fragment() -> None:
    events: list[Any] = []
    agent = Agent(script(), [echo], approver=AutoApprove())
    agent.observe(lambda run_id, event: events.append(event))
    await agent.run("go")
    arguments, _, count = heard(events)
    assert json.loads(arguments) == ARGUMENTS and count == 8


async def test_a_slow_reader_gets_merged_fragments_and_an_observer_every_one() -> None:
    events: list[Any] = []
    agent = Agent(script(), [echo], approver=AutoApprove(), limits=Limits(event_backlog=1))
    agent.observe(lambda run_id, event: events.append(event))
    run = agent.start("go")
    await run.result()  # nobody read yet: the queue merged what the reader will get
    read = [event async for event in run.events()]
    assert heard(read)[2] < 8  # the reader's deltas were merged …
    arguments, text, count = heard(events)
    assert json.loads(arguments) == ARGUMENTS and count == 8  # … the observer's never
    assert text == "Let me look.Done."
    assert heard(read)[:2] == (arguments, text)  # and both rebuild the same arguments and text


async def test_observers_of_a_helper_and_of_its_caller_hear_the_helpers_fragments() -> None:
    helper_events: list[Any] = []
    caller_events: list[Any] = []
    # the helper's reader (its caller) may fall behind: its queue then merges, its observers'
    # events never are
    helper = Agent(script(), [echo], approver=AutoApprove(), limits=Limits(event_backlog=1))
    helper.observe(lambda run_id, event: helper_events.append(event))

    def decide(request: Request) -> Any:
        if isinstance(request.messages[-1], ToolMessage):
            return "thanks"
        return Turn(Call("helper", {"prompt": "echo it"}))

    caller = Agent(
        FunctionModel(decide),
        [helper.as_tool(name="helper", description="Echoes.")],
        approver=AutoApprove(),
    )
    caller.observe(lambda run_id, event: caller_events.append(event))
    await asyncio.wait_for(caller.run("go"), 30)
    arguments, _, count = heard(helper_events)
    assert json.loads(arguments) == ARGUMENTS and count == 8
    inner = [e.event for e in caller_events if isinstance(e, HelperEvent)]
    assert json.loads(heard(inner)[0]) == ARGUMENTS
