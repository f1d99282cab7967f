"""``result.exchanges[k].helpers[call_id]``: the run of each helper agent a step's calls
started, under that step, with its own exchanges (and its helpers' under its calls), for a
finished helper, a helper of a helper, and a helper stopped with its caller."""

from __future__ import annotations

import asyncio
import pickle

from nbagent import Agent
from nbagent.events import RunResult
from tests.test_delegation import caller_model, helper_model, last_user, waiting_helper


async def test_a_steps_helper_runs_are_under_its_exchange() -> None:
    helper = Agent(helper_model())
    caller = Agent(caller_model(), [helper.as_tool(name="researcher", description="Looks up.")])
    result = await caller.run("capital?")
    first, second = result.exchanges
    (call,) = first.answer.tool_calls
    inner = first.helpers[call.id]
    assert isinstance(inner, RunResult) and inner.stop_reason == "finished"
    assert inner.text == "Paris (asked: find the capital of France)"
    assert last_user(inner.exchanges[0].request) == "find the capital of France"
    assert second.helpers == {}  # the step that made no call started no helper
    again = pickle.loads(pickle.dumps(result))  # a result travels with its helpers' runs
    assert again.exchanges[0].helpers[call.id].text == inner.text


async def test_a_helpers_helper_is_under_the_helpers_own_exchange() -> None:
    leaf = Agent(helper_model("Bern"))
    middle = Agent(
        caller_model("leaf", "the capital of Switzerland"),
        [leaf.as_tool(name="leaf", description="Knows.")],
    )
    top = Agent(caller_model("middle"), [middle.as_tool(name="middle", description="Asks.")])
    result = await top.run("go")
    step = result.exchanges[0]
    inner = step.helpers[step.answer.tool_calls[0].id]
    deeper = inner.exchanges[0].helpers[inner.exchanges[0].answer.tool_calls[0].id]
    assert last_user(deeper.exchanges[0].request) == "the capital of Switzerland"
    assert deeper.text.startswith("Bern")


async def test_a_helper_stopped_with_its_caller_is_there_as_it_stopped() -> None:
    started = asyncio.Event()
    helper = waiting_helper(started)
    caller = Agent(caller_model(), [helper.as_tool(name="researcher", description="x")])
    run = caller.start("capital?")
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()
    result = await run.result()
    step = result.exchanges[0]
    inner = step.helpers[step.answer.tool_calls[0].id]
    assert inner.stop_reason == "cancelled"
    assert [c.name for c in inner.exchanges[0].answer.tool_calls] == ["slow"]
