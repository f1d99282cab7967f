"""Model output is untrusted: strict JSON arguments, size/depth/count caps, unique call ids."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nbagent import (
    Agent,
    ArgumentsError,
    Decision,
    InteractiveApprover,
    Limits,
    ScriptedApprover,
    Tool,
    ToolCall,
    ToolContext,
    decode_arguments,
    validate_arguments,
)
from nbagent.events import ApprovalRequested, ToolCallStarted, ToolFinished
from nbagent.generation import (
    Answer,
    Finish,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputStart,
)
from nbagent.messages import AssistantMessage, ToolMessage
from nbagent.models import Call, FunctionModel, ScriptedModel, Turn

from .conftest import assert_history_valid

ANY_OBJECT = {"type": "object"}
PATH = {"type": "object", "properties": {"path": {"type": "string"}}}


def logging_tool(log: list[Any], name: str = "t", schema: Any = None, **kw: Any) -> Tool:
    async def run(ctx: ToolContext) -> str:
        log.append(ctx.input)
        return "ran"

    return Tool(name=name, input_schema=schema or ANY_OBJECT, execute=run, **kw)


def history_calls(agent: Agent) -> list[ToolCall]:
    return [c for m in agent.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]


def history_results(agent: Agent) -> list[tuple[str, str, bool]]:
    return [
        (r.call_id, r.text, r.is_error)
        for m in agent.messages
        if isinstance(m, ToolMessage)
        for r in m.results
    ]


# --- 1. strict JSON ----------------------------------------------------------------------


BAD_JSON = {
    "NaN": ('{"n": NaN}', "NaN is not a JSON number"),
    "Infinity": ('{"n": Infinity}', "Infinity is not a JSON number"),
    "-Infinity": ('{"n": [-Infinity]}', "-Infinity is not a JSON number"),
    "overflow": ('{"n": 1e400}', "too large"),
    "duplicate key": ('{"path": "a.txt", "path": "/etc/passwd"}', "'path' appears twice"),
    "nested duplicate": ('{"a": [{"b": 1, "c": 2, "b": 3}]}', "'b' appears twice"),
    "escaped lone surrogate": ('{"s": "x\\ud800y"}', "lone surrogate"),
    "escaped low surrogate": ('{"s": "\\udc00"}', "lone surrogate"),
    "raw lone surrogate": ('{"s": "x\ud800"}', "lone surrogate"),
    "lone surrogate key": ('{"\\ud83d": 1}', "lone surrogate"),
}


@pytest.mark.parametrize("case", list(BAD_JSON))
async def test_lenient_json_is_refused_and_never_run(case: str) -> None:
    arguments, fragment = BAD_JSON[case]
    log: list[Any] = []
    approver = ScriptedApprover([True])
    model = ScriptedModel([Turn(Call("t", arguments, id="c1")), "ok"])
    agent = Agent(model, [logging_tool(log, needs_approval=True)], approver=approver)
    result = await agent.run("go")
    assert log == [] and approver.requests == []  # never run, never even shown for approval
    [(call_id, text, is_error)] = history_results(agent)
    assert call_id == "c1" and is_error
    assert "nothing was run" in text and fragment in text, text
    [kept] = history_calls(agent)
    assert kept.arguments == "{}"  # the history keeps a valid stand-in, not the lenient text
    assert result.stop_reason == "finished"
    assert_history_valid(agent.messages)


async def test_a_surrogate_pair_is_fine() -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("t", '{"s": "\\ud83d\\ude00", "n": 1.5e300}')), "ok"])
    await Agent(model, [logging_tool(log)]).run("go")
    assert log == [{"s": "😀", "n": 1.5e300}]


@pytest.mark.parametrize("case", ["NaN", "duplicate key", "escaped lone surrogate", "overflow"])
def test_helpers_agree_with_the_loop(case: str) -> None:
    call = ToolCall("c", "t", BAD_JSON[case][0])
    with pytest.raises(ArgumentsError):
        call.input  # noqa: B018
    with pytest.raises(ArgumentsError):
        validate_arguments(call)
    with pytest.raises(ArgumentsError):
        decode_arguments(call, dict)


def test_validate_arguments_within_limits() -> None:
    call = ToolCall("c", "t", '{"a": [[[1]]]}')
    assert validate_arguments(call) == {"a": [[[1]]]}
    with pytest.raises(ArgumentsError, match="deeper than 2 levels"):
        validate_arguments(call, limits=Limits(max_argument_depth=2))
    with pytest.raises(ArgumentsError, match="more than the limit of 5"):
        validate_arguments(call, limits=Limits(max_argument_bytes=5))


# --- 2. size, depth and count caps -------------------------------------------------------


async def test_oversized_arguments_are_refused_before_parsing_and_not_kept() -> None:
    log: list[Any] = []
    big = '{"path": "' + "x" * (2 * 1024 * 1024) + '"}'  # above the default 1 MiB
    model = ScriptedModel([Turn(Call("t", big, id="big")), "ok"])
    agent = Agent(model, [logging_tool(log, schema=PATH)])
    await agent.run("go")
    assert log == []
    [(_, text, is_error)] = history_results(agent)
    assert is_error and "2,097,164 bytes, more than the limit of 1,048,576" in text
    [kept] = history_calls(agent)
    assert kept.arguments == "{}"
    resent = model.requests[1].messages
    assert all(len(getattr(p, "arguments", "")) < 100 for m in resent for p in _parts(m))


def _parts(message: Any) -> list[Any]:
    return list(getattr(message, "content", ()))


async def test_argument_size_limit_is_configurable_and_counts_utf8_bytes() -> None:
    log: list[Any] = []
    arguments = '{"path": "' + "é" * 600 + '"}'  # 612 characters, 1,212 bytes
    model = ScriptedModel([Turn(Call("t", arguments)), "ok"])
    agent = Agent(model, [logging_tool(log, schema=PATH)], limits=Limits(max_argument_bytes=1000))
    await agent.run("go")
    assert log == []
    [(_, text, _)] = history_results(agent)
    assert "1,212 bytes, more than the limit of 1,000" in text


async def test_deep_nesting_is_refused_and_later_runs_still_work() -> None:
    log: list[Any] = []
    deep = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    model = ScriptedModel([Turn(Call("t", deep)), "ok", "second"])
    agent = Agent(model, [logging_tool(log)])
    await agent.run("go")
    assert log == []
    [(_, text, _)] = history_results(agent)
    assert "deeper than 64 levels" in text
    assert history_calls(agent)[0].arguments == "{}"
    assert (await agent.run("again")).text == "second"


async def test_extra_calls_in_one_turn_are_answered_and_never_start() -> None:
    running = peak = 0

    async def run(ctx: ToolContext) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0)
        running -= 1
        return "ran"

    calls = [Call("t", {"i": i}, id=f"c{i}") for i in range(200)]
    model = ScriptedModel([Turn(*calls), "ok"])
    agent = Agent(model, [Tool(name="t", input_schema=ANY_OBJECT, execute=run)])
    await agent.run("go")
    results = history_results(agent)
    assert [r[0] for r in results] == [f"c{i}" for i in range(200)]  # every call answered
    ran = [r for r in results if r[1] == "ran"]
    refused = [r for r in results if r[2]]
    assert len(ran) == 32 and peak <= 32
    assert len(refused) == 168
    assert "200 tool calls, more than the limit of 32 per turn" in refused[0][1]
    assert_history_valid(agent.messages)


async def test_calls_per_turn_is_configurable() -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(*[Call("t", {"i": i}) for i in range(5)]), "ok"])
    agent = Agent(model, [logging_tool(log)], limits=Limits(max_calls_per_turn=2))
    events = [e async for e in agent.stream("go")]
    assert log == [{"i": 0}, {"i": 1}]
    statuses = [e.status for e in events if isinstance(e, ToolFinished)]
    assert sorted(statuses) == ["done", "done", "invalid", "invalid", "invalid"]


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_calls_per_turn"):
        Limits(max_calls_per_turn=0)


async def test_a_name_no_tool_can_have_is_refused_even_if_it_looks_like_one() -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("t.x", {}, id="c"), Call("t", {}, id="d")), "ok"])
    agent = Agent(model, [logging_tool(log, name="t_x"), logging_tool(log, name="t")])
    await agent.run("go")
    assert log == [{}]  # only the call to "t" ran
    assert [c.name for c in history_calls(agent)] == ["t_x", "t"]
    [(_, text, is_error), _] = history_results(agent)
    assert is_error and "Unknown tool 't.x'" in text and "nothing was run" in text


# --- 3. call ids are unique ----------------------------------------------------------------


async def test_a_repeated_call_id_runs_each_call_once() -> None:
    log: list[Any] = []
    model = ScriptedModel(
        [Turn(Call("t", {"n": 1}, id="dup", chunks=2), Call("t", {"n": 2}, id="dup")), "ok"]
    )
    agent = Agent(model, [logging_tool(log)])
    events = [e async for e in agent.stream("go")]
    assert sorted(c["n"] for c in log) == [1, 2]  # each call ran exactly once
    assert [c.id for c in history_calls(agent)] == ["dup", "dup_2"]
    assert [r[0] for r in history_results(agent)] == ["dup", "dup_2"]
    started = [e.call_id for e in events if isinstance(e, ToolCallStarted)]
    assert started == ["dup", "dup_2"]  # front ends see two calls from the start
    assert_history_valid(agent.messages)


async def test_repeated_ids_waiting_for_approval_do_not_hang() -> None:
    approver = InteractiveApprover()
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("t", {"n": 1}, id="x"), Call("t", {"n": 2}, id="x")), "ok"])
    agent = Agent(model, [logging_tool(log, needs_approval=True)], approver=approver)
    run = agent.start("go")
    asked = []
    async for event in run.events():
        if isinstance(event, ApprovalRequested):
            asked.append(event.request.call.id)
            assert approver.resolve(event.request.call.id, Decision(True))
    result = await run.result()
    assert asked == ["x", "x_2"] and len(log) == 2 and result.stop_reason == "finished"


async def test_an_id_already_in_the_history_is_renamed() -> None:
    model = ScriptedModel([Turn(Call("t", {}, id="same")), Turn(Call("t", {}, id="same")), "ok"])
    agent = Agent(model, [logging_tool([])])
    await agent.run("go")
    assert [c.id for c in history_calls(agent)] == ["same", "same_2"]
    assert_history_valid(agent.messages)


async def test_empty_and_oversized_ids_are_replaced() -> None:
    async def decide(request: Any) -> Any:
        if len(request.messages) > 1:
            yield Finish("stop")
            return
        for call_id in ("", "i" * 500, ""):
            yield ToolInputStart(call_id, "t")
            yield ToolInputDelta(call_id, "{}")
            yield ToolCallReceived(ToolCall(call_id, "t", "{}"))
        yield Finish("tool_calls")

    agent = Agent(FunctionModel(decide), [logging_tool([])])
    await agent.run("go")
    assert [c.id for c in history_calls(agent)] == ["call_1", "call_2", "call_3"]
    assert_history_valid(agent.messages)


def test_answer_keeps_both_calls_of_a_repeated_id() -> None:
    answer = Answer(taken_ids={"old"})
    for call in (ToolCall("a", "t", '{"n": 1}'), ToolCall("a", "t", '{"n": 2}')):
        answer.add(ToolCallReceived(call))
    answer.add(ToolCallReceived(ToolCall("old", "t", "{}")))
    answer.add(Finish("tool_calls"))
    calls = answer.tool_calls()
    assert [(c.id, c.arguments) for c in calls] == [
        ("a", '{"n": 1}'),
        ("a_2", '{"n": 2}'),
        ("old_2", "{}"),
    ]
