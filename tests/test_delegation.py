"""Agents as tools (``helper.as_tool``): the helper's answer as the tool's result, its typed
answer, its events inside the caller's, and the caller's stop, budget, timeouts and approvals
reaching it; helpers nesting too deep, and failing helpers, are error results."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from nbagent import Agent, Budget
from nbagent.approvals.approval import ScriptedApprover, approve, deny
from nbagent.errors import ToolDefinitionError
from nbagent.events import HelperEvent, RunStarted, ToolFinished
from nbagent.generation import Request, Usage
from nbagent.messages import AssistantMessage, ToolMessage, UserMessage
from nbagent.models import Call, FunctionModel, Turn
from nbagent.tools import tool


@dataclasses.dataclass
class Plan:
    steps: list[str]


def last_user(request: Request) -> str:
    users = [m for m in request.messages if isinstance(m, UserMessage)]
    return users[-1].text if users else ""


def answered(request: Request) -> list[str]:
    return [r.text for m in request.messages if isinstance(m, ToolMessage) for r in m.results]


def caller_model(tool_name: str = "researcher", prompt: str = "find the capital of France"):
    def decide(request: Request) -> Any:
        results = answered(request)
        if not results:
            return Turn(Call(tool_name, {"prompt": prompt}))
        return f"The helper said: {results[-1]}"

    return FunctionModel(decide)


def helper_model(answer: str = "Paris") -> FunctionModel:
    return FunctionModel(lambda request: f"{answer} (asked: {last_user(request)})")


async def test_the_helpers_answer_is_the_tools_result(history_valid: Any) -> None:
    helper = Agent(helper_model())
    caller = Agent(caller_model(), [helper.as_tool(name="researcher", description="Looks up.")])
    seen: list[Any] = []
    async for event in caller.stream("capital?"):
        seen.append(event)
    result = seen[-1].result
    assert result.text == "The helper said: Paris (asked: find the capital of France)"
    inner = [e for e in seen if isinstance(e, HelperEvent)]
    assert inner and {e.tool_name for e in inner} == {"researcher"}
    assert isinstance(inner[0].event, RunStarted) and inner[0].depth == 1
    assert inner[0].call_id == next(e.call.id for e in seen if isinstance(e, ToolFinished))
    history_valid(caller.messages)
    assert helper.messages == []  # each call runs in a fork: the helper itself is untouched


async def test_a_typed_helper_answers_with_its_value() -> None:
    def plans(request: Request) -> Any:
        return Turn(Call("final_answer", {"steps": ["a", "b"]}))

    planner = Agent(FunctionModel(plans))
    tool_ = planner.as_tool(name="planner", description="Plans.", output=Plan)
    caller = Agent(caller_model("planner"), [tool_])
    result = await caller.run("plan it")
    assert result.text == 'The helper said: {"steps": ["a", "b"]}'


async def test_an_agent_registered_where_a_tool_goes() -> None:
    helper = Agent(helper_model("Bern"), name="geographer", description="Knows capitals.")
    caller = Agent(caller_model("geographer"), [helper])
    assert caller.tools["geographer"].description == "Knows capitals."
    result = await caller.run("capital?")
    assert "Bern" in result.text
    with pytest.raises(ToolDefinitionError, match="needs a name"):
        Agent(caller_model(), [Agent(helper_model())])


async def test_a_failing_helper_is_the_tools_error_and_the_caller_goes_on() -> None:
    def broken(request: Request) -> Any:
        raise RuntimeError("the helper's model fell over")

    helper = Agent(FunctionModel(broken))
    caller = Agent(caller_model(), [helper.as_tool(name="researcher", description="x")])
    result = await caller.run("capital?")
    assert result.stop_reason == "finished"
    assert "researcher failed" in result.text and "fell over" in result.text


async def test_a_helper_that_reaches_itself_stops_at_the_depth_limit() -> None:
    def always_delegate(request: Request) -> Any:
        results = answered(request)
        if not results:
            return Turn(Call("myself", {"prompt": "again"}))
        return f"got: {results[-1]}"

    agent = Agent(FunctionModel(always_delegate))
    agent.add_tool(agent.as_tool(name="myself", description="Me again.", max_depth=3))
    result = await asyncio.wait_for(agent.run("go"), 30)  # a bound, never a hang
    assert "helpers would nest 4 deep, more than the limit of 3" in result.text


async def test_the_helpers_tokens_count_against_the_callers_budget() -> None:
    async def costly(request: Request) -> Any:
        from nbagent.generation import Finish, TextDelta

        yield TextDelta("spent")
        yield Finish("stop", Usage(40, 10))

    helper = Agent(FunctionModel(costly))
    caller_requests: list[Request] = []

    def decide(request: Request) -> Any:
        caller_requests.append(request)
        return Turn(Call("researcher", {"prompt": "go"}))  # it would go on forever

    caller = Agent(FunctionModel(decide), [helper.as_tool(name="researcher", description="x")])
    result = await caller.run("go", budget=Budget(tokens=120))
    assert result.stop_reason == "budget"
    # each helper run costs 50 tokens, on top of the caller's own turns: 3 runs pass 120
    own = sum(e.usage.total_tokens for e in result.exchanges)
    assert result.usage.total_tokens == 150 + own and len(caller_requests) == 3


def waiting_helper(started: asyncio.Event) -> Agent:
    """A helper whose first call waits a minute (``started`` is set once it waits)."""

    @tool
    async def slow(seconds: float) -> str:
        """Wait."""
        started.set()
        await asyncio.sleep(seconds)
        return "done"

    def helper_decide(request: Request) -> Any:
        if not answered(request):
            return Turn(Call("slow", {"seconds": 60}))
        return "finished waiting"

    return Agent(FunctionModel(helper_decide), [slow])


async def test_stopping_the_caller_stops_the_helper_with_every_call_answered(
    history_valid: Any,
) -> None:
    started = asyncio.Event()
    helper_runs: list[Any] = []
    helper = waiting_helper(started)
    helper.observe(lambda run_id, event: helper_runs.append(event))
    caller = Agent(caller_model(), [helper.as_tool(name="researcher", description="x")])
    run = caller.start("capital?")
    await asyncio.wait_for(started.wait(), 10)
    run.cancel()
    result = await run.result()
    assert result.stop_reason == "cancelled"
    history_valid(caller.messages)
    ended = [e for e in helper_runs if type(e).__name__ == "RunCancelled"]
    assert len(ended) == 1
    history_valid(ended[0].result.messages)  # the helper's own history: every call answered


async def test_the_callers_tool_timeout_bounds_the_helper() -> None:
    @tool
    async def slow() -> str:
        """Wait."""
        await asyncio.sleep(60)
        return "done"

    def helper_decide(request: Request) -> Any:
        return Turn(Call("slow", {})) if not answered(request) else "late"

    helper = Agent(FunctionModel(helper_decide), [slow])
    ends: list[str] = []
    helper.observe(lambda run_id, event: ends.append(type(event).__name__))
    caller = Agent(
        caller_model(), [helper.as_tool(name="researcher", description="x")], tool_timeout=0.2
    )
    result = await asyncio.wait_for(caller.run("capital?"), 30)
    assert "researcher did not finish within 0.2 s and was stopped" in result.text
    assert ends[-1] == "RunCancelled"  # the helper's run was stopped with the call


async def test_the_helpers_calls_go_to_the_callers_approver() -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    def helper_decide(request: Request) -> Any:
        results = answered(request)
        return Turn(Call("delete", {"path": "a.txt"})) if not results else results[-1]

    helper = Agent(FunctionModel(helper_decide), [delete])
    approver = ScriptedApprover({"delete": deny("not that file")})
    caller = Agent(
        caller_model(), [helper.as_tool(name="researcher", description="x")], approver=approver
    )
    result = await caller.run("clean up")
    assert ran == [] and [r.tool_name for r in approver.requests] == ["delete"]
    assert "not that file" in result.text
    approver = ScriptedApprover({"delete": approve()})
    caller = Agent(
        caller_model(), [helper.as_tool(name="researcher", description="x")], approver=approver
    )
    await caller.run("clean up")
    assert ran == ["a.txt"]


def test_bad_helper_settings_are_refused_at_once() -> None:
    helper = Agent(helper_model())
    with pytest.raises(ToolDefinitionError, match="max_depth"):
        helper.as_tool(name="h", description="x", max_depth=0)

    class Opaque:
        pass

    with pytest.raises(ToolDefinitionError, match="cannot be an answer type"):
        helper.as_tool(name="h", description="x", output=Opaque)
    with pytest.raises(ToolDefinitionError, match="name"):
        helper.as_tool(name="not a name!", description="x")


async def test_a_typed_input_is_the_helpers_prompt() -> None:
    @dataclasses.dataclass
    class Question:
        city: str

    helper = Agent(FunctionModel(lambda r: f"asked {last_user(r)}"))
    tool_ = helper.as_tool(name="h", description="x", input=Question)
    assert tool_.definition.input_schema["required"] == ["city"]

    def decide(request: Request) -> Any:
        results = answered(request)
        return Turn(Call("h", {"city": "Bern"})) if not results else results[-1]

    result = await Agent(FunctionModel(decide), [tool_]).run("go")
    assert result.text == 'asked {"city": "Bern"}'
    assert isinstance(result.messages[-1], AssistantMessage)


async def test_a_recorded_nested_run_replays_with_no_model(history_valid: Any) -> None:
    from nbagent.recording import Recording, RecordingGenerator, ReplayGenerator

    helper = Agent(helper_model("Rome"))
    caller = Agent(
        RecordingGenerator(caller_model()), [helper.as_tool(name="researcher", description="x")]
    )
    first = await caller.run("capital?")
    recording = caller.generator.recording  # type: ignore[attr-defined]
    assert len(recording.steps) == 3  # caller, helper, caller: in the order they went out
    text = recording.to_json()

    def no_model(request: Request) -> Any:
        raise AssertionError("a replay asked a model")

    offline_helper = Agent(FunctionModel(no_model))
    replayer = ReplayGenerator(Recording.from_json(text))
    again = Agent(replayer, [offline_helper.as_tool(name="researcher", description="x")])
    replayed = await again.run("capital?")
    assert replayed.text == first.text and "Rome" in replayed.text
    assert replayer.finished
    history_valid(again.messages)
