"""The agent loop against the contract: every rule here would fail if it broke."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from nbagent import (
    Agent,
    AnswerIncompleteError,
    Decision,
    InteractiveApprover,
    RunResult,
    SchemaError,
    ScriptedApprover,
    Tool,
    ToolContext,
    errors,
    text_result,
)
from nbagent.content import error_result
from nbagent.errors import RunFailedError, RunInProgressError
from nbagent.events import (
    ApprovalRequested,
    ApprovalResolved,
    RunCancelled,
    RunFailed,
    ToolArgumentsDelta,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from nbagent.generation import (
    Answer,
    Finish,
    NamedToolChoice,
    Options,
    StreamError,
    TextDelta,
    ToolCallReceived,
)
from nbagent.messages import AssistantMessage, ToolMessage
from nbagent.models import Call, Fail, FunctionModel, Pause, ScriptedModel, Text, Turn
from nbagent.tools import ToolCall

from .conftest import assert_history_valid

OBJ = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


def recording_tool(
    name: str = "echo",
    log: list[Any] | None = None,
    schema: dict[str, Any] | None = None,
    **kw: Any,
) -> Tool:
    calls = log if log is not None else []

    async def run(ctx: ToolContext) -> Any:
        calls.append(ctx.input)
        return f"{name} got {ctx.input}"

    return Tool(name=name, input_schema=schema or OBJ, execute=run, **kw)


def results_of(message: Any) -> list[tuple[str, bool]]:
    assert isinstance(message, ToolMessage)
    return [(r.text, r.is_error) for r in message.results]


async def test_plain_answer_without_tools() -> None:
    model = ScriptedModel([Turn(Text("Hello there", chunks=3))])
    result = await Agent(model).run("hi")
    assert result.text == "Hello there"
    assert result.stop_reason == "finished"
    assert result.steps == 1
    assert model.requests[0].messages[0].text == "hi"  # type: ignore[union-attr]


async def test_tool_round_trip_feeds_result_back() -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("echo", {"x": 1}, chunks=4)), "done"])
    agent = Agent(model, [recording_tool(log=log)])
    result = await agent.run("go")
    assert log == [{"x": 1}]
    assert result.text == "done"
    second = model.requests[1].messages
    assert results_of(second[-1]) == [("echo got {'x': 1}", False)]
    assert_history_valid(agent.messages)


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ('{"x": "123"}', "'123' is not of type 'integer'"),  # no coercion
        ("[1, 2]", "must be a JSON object"),
        ('{"x": 1', "not valid JSON"),
        ("{}", "'x' is a required property"),
        ('{"x": true}', "is not of type 'integer'"),
    ],
)
async def test_invalid_arguments_never_execute(arguments: str, fragment: str) -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("echo", arguments)), "ok"])
    agent = Agent(model, [recording_tool(log=log)])
    await agent.run("go")
    assert log == []
    [(text, is_error)] = results_of(model.requests[1].messages[-1])
    assert is_error and fragment in text and "nothing was run" in text


async def test_format_is_an_annotation_only() -> None:
    schema = {"type": "object", "properties": {"to": {"type": "string", "format": "email"}}}
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("mail", {"to": "not-an-email"})), "ok"])
    await Agent(model, [recording_tool("mail", log, schema)]).run("go")
    assert log == [{"to": "not-an-email"}]


async def test_defaults_are_not_applied() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 5}}}
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("t", {})), "ok"])
    await Agent(model, [recording_tool("t", log, schema)]).run("go")
    assert log == [{}]


async def test_unknown_tool_gets_error_result() -> None:
    model = ScriptedModel([Turn(Call("nope", {})), "ok"])
    agent = Agent(model, [recording_tool()])
    await agent.run("go")
    [(text, is_error)] = results_of(model.requests[1].messages[-1])
    assert is_error and "Unknown tool 'nope'" in text and "echo" in text


async def test_bad_schema_fails_at_construction() -> None:
    bad = Tool(name="bad", input_schema={"$id": "https://x", "type": "object"}, execute=print)
    with pytest.raises(SchemaError) as info:
        Agent(ScriptedModel([]), [bad])
    assert "/$id" in str(info.value) and "bad" in str(info.value)


async def test_tool_exception_becomes_error_result_with_traceback() -> None:
    def boom(ctx: ToolContext) -> str:
        raise ValueError("broken widget")

    model = ScriptedModel([Turn(Call("boom", {"x": 1})), "sorry"])
    agent = Agent(model, [Tool(name="boom", input_schema=OBJ, execute=boom)])
    events = [e async for e in agent.stream("go")]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert finished[0].status == "error"
    assert "ValueError: broken widget" in finished[0].result.text
    assert finished[0].traceback and "Traceback" in finished[0].traceback
    assert agent.messages[-1].text == "sorry"  # type: ignore[union-attr]


# --- rule 7: terminate -----------------------------------------------------------------


def terminating(name: str, *, fail: bool = False, terminate: bool = True) -> Tool:
    async def run(ctx: ToolContext) -> Any:
        if fail:
            return error_result("failed")
        return text_result("ok", terminate=terminate)

    return Tool(name=name, input_schema=OBJ, execute=run)


@pytest.mark.parametrize(
    ("tools", "stops"),
    [
        ([terminating("a"), terminating("b")], True),
        ([terminating("a"), terminating("b", fail=True)], False),  # an error sibling
        ([terminating("a"), terminating("b", terminate=False)], False),  # an ordinary sibling
    ],
)
async def test_terminate_only_when_every_call_terminates(tools: list[Tool], stops: bool) -> None:
    model = ScriptedModel([Turn(Call("a", {"x": 1}), Call("b", {"x": 2})), "after"])
    result = await Agent(model, tools).run("go")
    assert result.stop_reason == ("terminated" if stops else "finished")
    assert len(model.requests) == (1 if stops else 2)


async def test_error_result_with_terminate_does_not_stop() -> None:
    async def run(ctx: ToolContext) -> Any:
        return error_result("bad")

    model = ScriptedModel([Turn(Call("a", {"x": 1})), "after"])
    tool_ = Tool(name="a", input_schema=OBJ, execute=run)
    assert (await Agent(model, [tool_]).run("go")).stop_reason == "finished"


# --- rule 6: progress ------------------------------------------------------------------


async def test_progress_updates_are_events_only_and_late_ones_ignored() -> None:
    keep: list[ToolContext] = []

    async def slow(ctx: ToolContext) -> Any:
        ctx.update("half way")
        ctx.update(text_result("provisional", terminate=True))
        keep.append(ctx)
        return "final"

    model = ScriptedModel([Turn(Call("slow", {"x": 1})), "done"])
    agent = Agent(model, [Tool(name="slow", input_schema=OBJ, execute=slow)])
    events = [e async for e in agent.stream("go")]
    keep[0].update("too late")
    progress = [e.update for e in events if isinstance(e, ToolProgress)]
    assert [p.text for p in progress] == ["half way", "provisional"]
    assert not any(p.terminate for p in progress)
    assert results_of(agent.messages[2]) == [("final", False)]
    assert agent.messages[-1].text == "done"  # type: ignore[union-attr]  # provisional terminate ignored


async def test_sync_tool_progress_from_a_thread() -> None:
    def work(ctx: ToolContext) -> str:
        for i in range(3):
            ctx.update(i / 2)
        return "done"

    model = ScriptedModel([Turn(Call("w", {"x": 1})), "ok"])
    events = [
        e async for e in Agent(model, [Tool(name="w", input_schema=OBJ, execute=work)]).stream("go")
    ]
    assert [e.update.text for e in events if isinstance(e, ToolProgress)] == ["0%", "50%", "100%"]
    order = [type(e).__name__ for e in events]
    assert order.index("ToolProgress") < order.index("ToolFinished")


# --- rule 8: only finished answers hand out calls ----------------------------------------


async def test_length_stopped_answer_calls_are_not_executed() -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("echo", {"x": 1}), finish="length")])
    agent = Agent(model, [recording_tool(log=log)])
    result = await agent.run("go")
    assert log == []
    assert result.stop_reason == "length"
    assert_history_valid(agent.messages)


async def test_failed_stream_calls_are_not_executed() -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(Text("partial"), Call("echo", {"x": 1}), Fail("dropped"))])
    agent = Agent(model, [recording_tool(log=log)])
    events = [e async for e in agent.stream("go")]
    assert log == []
    assert isinstance(events[-1], RunFailed)
    assert "dropped" in str(events[-1].error)
    assert_history_valid(agent.messages)
    assert agent.messages[-1].text == "partial"  # type: ignore[union-attr]


async def test_a_retried_stream_voids_what_came_before() -> None:
    """A provider that restarts a broken response: the partial text and the complete-looking
    call before the retry are forgotten; nothing runs, and front ends are told why."""
    from nbagent.events import StepRetried
    from nbagent.generation import StreamRetry, ToolInputDelta, ToolInputStart

    log: list[Any] = []
    turns = [0]

    async def decide(request: Any) -> Any:
        turns[0] += 1
        if turns[0] == 1:
            yield TextDelta("half an ans")
            yield ToolInputStart("c1", "echo")
            yield ToolInputDelta("c1", '{"x": 1}')
            yield ToolCallReceived(ToolCall("c1", "echo", '{"x": 1}'))
            yield StreamRetry("the connection dropped", 1, 0.5)
        yield TextDelta("the whole answer")
        yield Finish("stop")

    agent = Agent(FunctionModel(decide), [recording_tool(log=log)])
    events = [e async for e in agent.stream("go")]
    retried = [e for e in events if isinstance(e, StepRetried)]
    assert [(e.step, e.reason, e.attempt, e.delay) for e in retried] == [
        (1, "the connection dropped", 1, 0.5)
    ]
    assert log == []
    assert [m.text for m in agent.messages[1:]] == ["the whole answer"]  # type: ignore[union-attr]
    assert_history_valid(agent.messages)


def test_answer_refuses_calls_unless_finished() -> None:
    answer = Answer()
    answer.add(ToolCallReceived(ToolCall("1", "t", "{}")))
    with pytest.raises(AnswerIncompleteError):
        answer.tool_calls()
    answer.add(Finish("length"))
    with pytest.raises(AnswerIncompleteError):
        answer.tool_calls()
    ok = Answer()
    ok.add(TextDelta("x"))
    ok.add(ToolCallReceived(ToolCall("1", "t", "{}")))
    ok.end()  # no finish event: failed
    with pytest.raises(AnswerIncompleteError):
        ok.tool_calls()
    good = Answer()
    good.add(ToolCallReceived(ToolCall("1", "t", "{}")))
    good.add(Finish("tool_calls"))
    assert [c.id for c in good.tool_calls()] == ["1"]


@pytest.mark.parametrize(
    "ending",
    [
        [StreamError(errors.StreamError("broke")), Finish("stop")],  # an error is final
        [Finish("length"), Finish("stop")],  # a length stop is not undone
        [Finish("stop"), Finish("length")],  # the worst ending wins
        [Finish("stop"), ToolCallReceived(ToolCall("2", "t", "{}"))],  # nothing after the end
        [Finish("tool_calls"), TextDelta("more")],
    ],
)
async def test_an_answer_that_ended_badly_or_went_on_after_its_end_runs_no_call(
    ending: list[Any],
) -> None:
    ran: list[str] = []

    def run(ctx: ToolContext) -> str:
        ran.append(ctx.call.id)
        return "ran"

    turns = iter([[ToolCallReceived(ToolCall("1", "t", "{}")), *ending]])

    async def decide(request: Any) -> Any:
        for event in next(turns, [TextDelta("done"), Finish("stop")]):
            yield event

    agent = Agent(FunctionModel(decide), [Tool(name="t", input_schema={}, execute=run)])
    with contextlib.suppress(RunFailedError):
        await agent.run("go")
    assert ran == []
    assert_history_valid(agent.messages)


# --- rule 10: approval -----------------------------------------------------------------


async def test_denied_call_and_approved_sibling() -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("echo", {"x": 1}), Call("echo", {"x": 2})), "ok"])
    approver = ScriptedApprover([Decision(False, "not that one"), True])
    agent = Agent(model, [recording_tool(log=log, needs_approval=True)], approver=approver)
    await agent.run("go")
    assert log == [{"x": 2}]
    results = results_of(model.requests[1].messages[-1])
    assert results[0][1] and "denied" in results[0][0] and "not that one" in results[0][0]
    assert results[1] == ("echo got {'x': 2}", False)


async def test_approval_predicate_sync_and_async() -> None:
    log: list[Any] = []

    async def big(value: Any) -> bool:
        return bool(value["x"] > 10)

    model = ScriptedModel([Turn(Call("echo", {"x": 1}), Call("echo", {"x": 50})), "ok"])
    approver = ScriptedApprover([])  # denies anything it is asked
    await Agent(model, [recording_tool(log=log, needs_approval=big)], approver=approver).run("go")
    assert log == [{"x": 1}]
    assert [r.call.arguments for r in approver.requests] == ['{"x": 50}']


async def test_default_approver_denies_and_says_why() -> None:
    model = ScriptedModel([Turn(Call("echo", {"x": 1})), "ok"])
    await Agent(model, [recording_tool(needs_approval=True)]).run("go")
    [(text, is_error)] = results_of(model.requests[1].messages[-1])
    assert is_error and "no approver" in text
    assert "was not run" in text and "The person" not in text  # a policy, not a person


async def test_interactive_approval_bound_to_call_and_idempotent() -> None:
    log: list[Any] = []
    approver = InteractiveApprover()
    model = ScriptedModel([Turn(Call("echo", {"x": 7}, id="c1")), "ok"])
    agent = Agent(model, [recording_tool(log=log, needs_approval=True)], approver=approver)
    run = agent.start("go")
    request = None
    async for event in run.events():
        if isinstance(event, ApprovalRequested):
            request = event.request
            assert log == []  # nothing runs before the decision
            assert not approver.resolve("c1", Decision(True), fingerprint="wrong")
            assert approver.resolve("c1", Decision(True), fingerprint=request.fingerprint)
            assert not approver.resolve("c1", Decision(False, "too late"))  # second click
    result = await run.result()
    assert request is not None and log == [{"x": 7}] and result.stop_reason == "finished"
    assert not approver.resolve("c1", Decision(False))  # after the run ended


async def test_always_allow_skips_later_requests() -> None:
    approver = InteractiveApprover()
    model = ScriptedModel([Turn(Call("echo", {"x": 1})), Turn(Call("echo", {"x": 2})), "ok"])
    agent = Agent(model, [recording_tool(needs_approval=True)], approver=approver)
    asked = 0
    async for event in agent.stream("go"):
        if isinstance(event, ApprovalRequested):
            asked += 1
            approver.resolve(event.request.call.id, Decision(True, always=True))
    assert asked == 1


async def test_broken_approval_predicate_denies() -> None:
    def broken(value: Any) -> bool:
        raise RuntimeError("oops")

    log: list[Any] = []
    model = ScriptedModel([Turn(Call("echo", {"x": 1})), "ok"])
    await Agent(model, [recording_tool(log=log, needs_approval=broken)]).run("go")
    assert log == []


# --- concurrency, modes, timeouts ------------------------------------------------------


def sleeper(name: str, seconds: float, log: list[tuple[str, float, float]], **kw: Any) -> Tool:
    async def run(ctx: ToolContext) -> str:
        start = time.monotonic()
        await asyncio.sleep(seconds)
        log.append((ctx.call.id, start, time.monotonic()))
        return ctx.call.id

    return Tool(name=name, input_schema=OBJ, execute=run, **kw)


async def test_calls_run_concurrently_and_results_keep_call_order() -> None:
    log: list[tuple[str, float, float]] = []
    calls = [Call("s", {"x": i}, id=f"c{i}") for i in range(4)]
    model = ScriptedModel([Turn(*calls), "ok"])
    started = time.monotonic()
    await Agent(model, [sleeper("s", 0.3, log)]).run("go")
    assert time.monotonic() - started < 0.9
    assert [t for t, _ in results_of(model.requests[1].messages[-1])] == ["c0", "c1", "c2", "c3"]


async def test_sequential_tools_never_overlap() -> None:
    log: list[tuple[str, float, float]] = []
    model = ScriptedModel([Turn(*[Call("s", {"x": i}) for i in range(3)]), "ok"])
    await Agent(model, [sleeper("s", 0.05, log, execution_mode="sequential")]).run("go")
    spans = sorted((a, b) for _, a, b in log)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))


async def test_concurrency_cap() -> None:
    running = 0
    peak = 0

    async def run(ctx: ToolContext) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "ok"

    model = ScriptedModel([Turn(*[Call("t", {"x": i}) for i in range(20)]), "ok"])
    agent = Agent(model, [Tool(name="t", input_schema=OBJ, execute=run)], max_concurrency=3)
    await agent.run("go")
    assert peak == 3


async def test_timeout_and_a_tool_that_swallows_cancellation() -> None:
    async def stubborn(ctx: ToolContext) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            await asyncio.sleep(10)  # swallows the cancel and keeps going
        return "never"

    model = ScriptedModel([Turn(Call("t", {"x": 1})), "ok"])
    agent = Agent(model, [Tool(name="t", input_schema=OBJ, execute=stubborn, timeout=0.2)])
    started = time.monotonic()
    result = await agent.run("go")
    assert time.monotonic() - started < 3
    [(text, is_error)] = results_of(agent.messages[2])
    assert is_error and "did not finish within 0.2 s" in text
    assert result.stop_reason == "finished"


async def test_step_limit() -> None:
    model = FunctionModel(lambda request: Turn(Call("echo", {"x": 1})))
    agent = Agent(model, [recording_tool()], max_steps=3)
    result = await agent.run("loop forever")
    assert result.stop_reason == "max_steps" and result.steps == 3
    assert_history_valid(agent.messages)


# --- rule 12: cancellation -------------------------------------------------------------


async def cancel_when(agent: Agent, prompt: str, predicate: Any) -> RunResult:
    run = agent.start(prompt)
    async for event in run.events():
        if predicate(event):
            run.cancel()
    result = await run.result()
    assert result.stop_reason == "cancelled"
    return result


async def second_run_is_valid(agent: Agent, model: ScriptedModel) -> None:
    model.add("second answer")
    result = await agent.run("again")
    assert result.text == "second answer"
    assert_history_valid(model.requests[-1].messages)


async def test_cancel_during_tool() -> None:
    log: list[tuple[str, float, float]] = []
    model = ScriptedModel([Turn(Call("s", {"x": 1}), Call("fast", {"x": 2}))])
    fast = recording_tool("fast")
    agent = Agent(model, [sleeper("s", 30, log), fast])
    await cancel_when(agent, "go", lambda e: isinstance(e, ToolFinished))
    assert_history_valid(agent.messages)
    texts = results_of(agent.messages[-1])
    assert texts[0][1] and "cancelled" in texts[0][0]
    assert texts[1] == ("fast got {'x': 2}", False)  # the finished sibling keeps its result
    await second_run_is_valid(agent, model)


async def test_cancel_during_approval() -> None:
    log: list[Any] = []
    model = ScriptedModel([Turn(Call("echo", {"x": 1}))])
    agent = Agent(
        model, [recording_tool(log=log, needs_approval=True)], approver=InteractiveApprover()
    )
    await cancel_when(agent, "go", lambda e: isinstance(e, ApprovalRequested))
    assert log == []
    assert_history_valid(agent.messages)
    await second_run_is_valid(agent, model)


async def test_cancel_mid_stream() -> None:
    model = ScriptedModel([Turn(Text("thinking about it"), Pause(30), Call("echo", {"x": 1}))])
    agent = Agent(model, [recording_tool()])
    await cancel_when(agent, "go", lambda e: type(e).__name__ == "AssistantTextDelta")
    assert_history_valid(agent.messages)
    assert agent.messages[-1].text == "thinking about it"  # type: ignore[union-attr]
    await second_run_is_valid(agent, model)


async def test_cancelling_the_awaiting_task_cancels_the_run() -> None:
    model = ScriptedModel([Turn(Pause(30), Text("never"))])
    agent = Agent(model)
    task = asyncio.ensure_future(agent.run("go"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not agent._running
    await second_run_is_valid(agent, model)


async def test_leaving_stream_early_cancels_cleanly() -> None:
    model = ScriptedModel([Turn(Text("a"), Pause(30), Text("b"))])
    agent = Agent(model)
    async with contextlib.aclosing(agent.stream("go")) as events:
        async for _ in events:
            break
    assert not agent._running
    await second_run_is_valid(agent, model)


# --- rule 11: input streaming callbacks; rule 9: tool choice ----------------------------


async def test_input_streaming_callbacks() -> None:
    seen: list[tuple[str, Any]] = []
    tool_ = recording_tool(
        on_input_start=lambda i: seen.append(("start", i.call_id)),
        on_input_delta=lambda i: seen.append(("delta", i.partial)),
        on_input_available=lambda i: seen.append(("available", i.partial)),
    )
    model = ScriptedModel([Turn(Call("echo", {"x": 12345}, id="k", chunks=3)), "ok"])
    events = [e async for e in Agent(model, [tool_]).stream("go")]
    assert seen[0] == ("start", "k")
    assert seen[-1] == ("available", {"x": 12345})
    assert len([s for s in seen if s[0] == "delta"]) == 3
    deltas = [e for e in events if isinstance(e, ToolArgumentsDelta)]
    assert deltas[-1].partial == {"x": 12345}


async def test_an_input_callback_that_hangs_or_raises_is_stopped_once_and_never_holds_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An async ``on_input_delta`` that never returns gets ``hook_timeout`` once, not once per
    fragment; one that raises is not called again. Both runs end, with the calls run."""
    calls = {"hang": 0, "raise": 0}

    async def hang(info: Any) -> None:
        calls["hang"] += 1
        await asyncio.sleep(3600)

    def explode(info: Any) -> None:
        calls["raise"] += 1
        raise RuntimeError("display broke")

    for name, callback in (("hang", hang), ("raise", explode)):
        tool_ = recording_tool(on_input_delta=callback)
        turn = Turn(
            Call("echo", {"x": 1}, id="a", chunks=5), Call("echo", {"x": 2}, id="b", chunks=5)
        )
        model = ScriptedModel([turn, "ok"])
        agent = Agent(model, [tool_], hook_timeout=0.2)
        result = await asyncio.wait_for(agent.run("go"), 30)
        assert result.stop_reason == "finished" and result.text == "ok"
        assert calls[name] == 1, calls  # 10 fragments, one call: then it is left alone
        assert_history_valid(agent.messages)
    messages = [r.getMessage() for r in caplog.records]
    assert any("took longer than 0.2 s" in m for m in messages), messages
    assert any("failed; it is not called again" in m for m in messages), messages


async def test_tool_choice_reaches_the_model() -> None:
    model = ScriptedModel(["ok"])
    options = Options(tool_choice=NamedToolChoice("echo"))
    await Agent(model, [recording_tool()], options=options).run("go")
    assert model.requests[0].options.tool_choice == NamedToolChoice("echo")
    assert [d.name for d in model.requests[0].tools] == ["echo"]


# --- conversation state, run_sync ------------------------------------------------------


async def test_conversation_carries_over_and_resets() -> None:
    model = ScriptedModel(["one", "two", "three"])
    agent = Agent(model)
    await agent.run("a")
    twin = agent.fork()
    await agent.run("b")
    assert [m.text for m in model.requests[1].messages] == ["a", "one", "b"]  # type: ignore[union-attr]
    assert len(twin.messages) == 2
    agent.reset()
    await agent.run("c")
    assert [m.text for m in model.requests[2].messages] == ["c"]  # type: ignore[union-attr]


async def test_second_run_while_running_is_refused() -> None:
    model = ScriptedModel([Turn(Pause(0.2), Text("x")), "y"])
    agent = Agent(model)
    run = agent.start("a")
    with pytest.raises(RunInProgressError):
        agent.start("b")
    await run.result()
    await agent.run("b")


async def test_a_run_refused_after_leaving_a_stream_says_how_to_close_it() -> None:
    agent = Agent(ScriptedModel([Turn(Text("a"), Pause(5), Text("b")), "c"]))
    events = agent.stream("go")
    async for _ in events:
        break  # the newcomer's way: the iterator is not closed yet, so neither is the run
    with pytest.raises(RunInProgressError, match=r"contextlib\.aclosing"):
        agent.start("again")
    await events.aclose()  # what aclosing(...) does on leaving the loop
    assert (await agent.run("again")).text == "c"


def test_start_without_a_loop_says_what_to_use_and_leaves_the_agent_usable() -> None:
    agent = Agent(ScriptedModel(["fine"]))
    with pytest.raises(errors.AgentError, match="run_sync"):
        agent.start("a")  # a script, no event loop
    assert agent.run_sync("b").text == "fine"


def test_runs_started_from_two_threads_at_once_never_overlap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    import nbagent.agent

    real = nbagent.agent.prompt_for_history

    def slow_prompt(message: Any) -> Any:
        time.sleep(0.2)  # both threads are between "is it idle?" and "it is mine" now
        return real(message)

    monkeypatch.setattr(nbagent.agent, "prompt_for_history", slow_prompt)
    agent = Agent(ScriptedModel([Turn(Pause(0.3), Text("x")), Turn(Pause(0.3), Text("y"))]))
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def run() -> None:
        start.wait()
        try:
            outcomes.append(agent.run_sync("go").text)
        except RunInProgressError:
            outcomes.append("refused")

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["refused", "x"]
    assert_history_valid(agent.messages)
    assert [m.text for m in agent.messages] == ["go", "x"]  # type: ignore[union-attr]


async def test_run_sync_inside_a_running_loop() -> None:
    model = ScriptedModel([Turn(Call("echo", {"x": 3})), "sync done"])
    agent = Agent(model, [recording_tool()])
    result = agent.run_sync("go")  # we are inside pytest-asyncio's running loop
    assert result.text == "sync done"


def test_run_sync_in_a_plain_script() -> None:
    assert Agent(ScriptedModel(["plain"])).run_sync("go").text == "plain"


async def test_provider_errors_end_the_run_cleanly() -> None:
    def decide(request: Any) -> Any:
        raise ConnectionError("server went away")

    agent = Agent(FunctionModel(decide))
    events = [e async for e in agent.stream("go")]
    assert isinstance(events[-1], RunFailed)
    assert "server went away" in str(events[-1].error)
    assert not agent._running
    assert_history_valid(agent.messages)


async def test_event_order_for_one_call() -> None:
    model = ScriptedModel([Turn(Call("echo", {"x": 1})), "ok"])
    agent = Agent(model, [recording_tool(needs_approval=True)], approver=ScriptedApprover([True]))
    names = [type(e).__name__ async for e in agent.stream("go")]
    expected = [
        "ToolCallStarted",
        "ToolArgumentsDelta",
        "StepFinished",
        "ToolCallReady",
        "ApprovalRequested",
        "ApprovalResolved",
        "ToolStarted",
        "ToolFinished",
    ]
    positions = [names.index(n) for n in expected]
    assert positions == sorted(positions)
    assert names[0] == "RunStarted" and names[-1] == "RunFinished"
    assert ApprovalResolved and ToolStarted and RunCancelled and AssistantMessage  # exported


async def test_paused_turn_is_sent_back_to_continue() -> None:
    model = ScriptedModel([Turn(Text("searching…"), finish="pause"), "found it"])
    agent = Agent(model)
    result = await agent.run("go")
    assert result.text == "found it" and result.steps == 2 and result.stop_reason == "finished"
    assert model.requests[1].messages[-1].text == "searching…"  # type: ignore[union-attr]


async def test_eight_slow_sync_tools_overlap() -> None:
    def nap(ctx: ToolContext) -> str:
        time.sleep(0.4)
        return "rested"

    model = ScriptedModel([Turn(*[Call("nap", {"x": i}) for i in range(8)]), "ok"])
    started = time.monotonic()
    await Agent(model, [Tool(name="nap", input_schema=OBJ, execute=nap)]).run("go")
    assert time.monotonic() - started < 0.75  # one round, not two (asyncio's pool has 6 here)


async def test_add_tool_replaces_by_name_and_keeps_the_rest() -> None:
    first, second = recording_tool("a"), recording_tool("b")
    agent = Agent(ScriptedModel(["ok"]), [first, second])
    replacement = recording_tool("a", schema={"type": "object", "properties": {}})
    agent.add_tool(replacement)
    assert list(agent.tools) == ["a", "b"] and agent.tools["a"] is replacement
    with pytest.raises(SchemaError):
        agent.add_tool(Tool(name="c", execute=print, input_schema={"type": "string"}))
    assert list(agent.tools) == ["a", "b"]
