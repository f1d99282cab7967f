"""Edit, then approve: the call runs with exactly the edited arguments, the model is told, the
events and the decision carry both, and nothing can slip through a bad edit or a stale click."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from nbagent import Agent, InteractiveApprover, ScriptedApprover, ToolContext, approve, tool
from nbagent.approvals.approval import ApprovalRequest, Decision, arguments_hash
from nbagent.errors import ArgumentsError
from nbagent.events import (
    ApprovalRequested,
    ApprovalResolved,
    ToolArgumentsChanged,
    ToolCallReady,
    ToolFinished,
    ToolStarted,
)
from nbagent.limits import Limits
from nbagent.messages import ToolMessage
from nbagent.models import Call, ScriptedModel, Turn
from nbagent.tools import Tool, ToolCall

from .conftest import assert_history_valid

ran: list[Any] = []


@tool(needs_approval=True)
def delete_rows(table: str, where: str, limit: int = 10) -> str:
    """Delete rows from a table."""
    ran.append({"table": table, "where": where, "limit": limit})
    return f"deleted from {table} where {where} (at most {limit})"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def one_call(arguments: dict[str, Any] | None = None) -> ScriptedModel:
    args = arguments or {"table": "users", "where": "age > 0"}
    return ScriptedModel([Turn(Call("delete_rows", args, id="c1")), "done"])


async def test_an_edited_approval_runs_the_edit_and_tells_the_model() -> None:
    model = one_call()
    edit = {"table": "users", "where": "age > 90", "limit": 1}
    approver = ScriptedApprover([approve(arguments=edit)])
    agent = Agent(model, [delete_rows], approver=approver)
    events = [e async for e in agent.stream("clean up")]

    assert ran == [edit]  # exactly the edited arguments, once
    ready = next(e for e in events if isinstance(e, ToolCallReady))
    changed = next(e for e in events if isinstance(e, ToolArgumentsChanged))
    started = next(e for e in events if isinstance(e, ToolStarted))
    resolved = next(e for e in events if isinstance(e, ApprovalResolved))
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert ready.input == {"table": "users", "where": "age > 0"}  # proposed
    assert (changed.by, changed.previous, changed.arguments) == ("person", ready.input, edit)
    assert started.input == edit  # executed
    binding = resolved.decision.binding
    assert binding is not None and binding.call_id == "c1" and binding.run_id.startswith("run-")
    assert binding.arguments_hash == arguments_hash(edit)
    assert resolved.decision.arguments == edit
    # the model reads a note first, then the result; the person sees the tool's own result
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage)
    text = sent.results[0].text
    assert text.startswith("[Note: the arguments of this call were changed before it ran (by the")
    assert json.dumps(edit) in text and text.endswith("(at most 1)")
    assert finished.original is not None
    assert finished.original.text == "deleted from users where age > 90 (at most 1)"
    # the model's own call stays as it sent it: the history tells what it asked for
    call = model.requests[1].messages[-2].tool_calls[0]  # type: ignore[union-attr]
    assert json.loads(call.arguments) == {"table": "users", "where": "age > 0"}
    assert_history_valid(agent.messages)


async def test_an_edit_equal_to_the_proposal_is_no_edit() -> None:
    model = one_call()
    approver = ScriptedApprover([approve(arguments={"where": "age > 0", "table": "users"})])
    agent = Agent(model, [delete_rows], approver=approver)
    events = [e async for e in agent.stream("go")]
    assert not [e for e in events if isinstance(e, ToolArgumentsChanged)]
    assert model.requests[1].messages[-1].results[0].text.startswith("deleted")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ({"table": "users"}, "'where' is a required property"),
        ({"table": "users", "where": "x", "limit": "10"}, "is not of type 'integer'"),
        ({"table": "users", "where": "x", "extra": 1}, "extra"),
        (["not", "an", "object"], "must be a JSON object"),
        ({"table": "users", "where": float("nan")}, "not JSON"),
        ({"table": "users", "where": "x" * 300}, "more than the limit of 200"),
    ],
)
async def test_a_bad_edit_never_runs_and_says_why(edit: Any, why: str) -> None:
    model = one_call()
    approver = ScriptedApprover([approve(arguments=edit)])
    limits = Limits(max_argument_bytes=200)
    strict = Tool(
        name="delete_rows",
        input_schema={
            "type": "object",
            "properties": {
                "table": {"type": "string"},
                "where": {"type": "string"},
                "limit": {"type": "integer"},
            },
            "required": ["table", "where"],
            "additionalProperties": False,
        },
        execute=lambda ctx: ran.append(ctx.input),
        needs_approval=True,
    )
    agent = Agent(model, [strict], approver=approver, limits=limits)
    events = [e async for e in agent.stream("go")]
    assert ran == []
    resolved = next(e for e in events if isinstance(e, ApprovalResolved))
    assert not resolved.decision.approved and resolved.decision.by == "error"
    assert why in (resolved.decision.reason or "")
    result = model.requests[1].messages[-1].results[0]  # type: ignore[union-attr]
    assert result.is_error and "edited arguments were refused" in result.text
    assert_history_valid(agent.messages)


async def test_an_edit_cannot_change_which_tool_runs() -> None:
    other: list[Any] = []

    @tool
    def other_tool(table: str, where: str) -> str:
        """Something else."""
        other.append(table)
        return "other"

    model = one_call()
    approver = ScriptedApprover(
        [approve(arguments={"name": "other_tool", "table": "t", "where": "w"})]
    )
    agent = Agent(model, [delete_rows, other_tool], approver=approver)
    await agent.run("go")
    assert other == [] and ran == []  # "name" is just an argument, and delete_rows refuses it


async def test_interactive_refuses_a_bad_edit_and_keeps_waiting() -> None:
    approver = InteractiveApprover()
    agent = Agent(one_call(), [delete_rows], approver=approver)
    run = agent.start("go")
    async for event in run.events():
        if isinstance(event, ApprovalRequested):
            request = event.request
            with pytest.raises(ArgumentsError, match="required"):
                request.check_arguments({"table": "users"})
            bad = Decision(True, by="person", arguments={"table": "users"})
            assert not approver.resolve("c1", bad, fingerprint=request.fingerprint)
            assert approver.pending() == [request]  # still waiting for a valid answer
            good = Decision(True, by="person", arguments={"table": "t", "where": "w"})
            assert approver.resolve("c1", good, fingerprint=request.fingerprint)
            assert not approver.resolve("c1", good, fingerprint=request.fingerprint)  # twice
    result = await run.result()
    assert result.stop_reason == "finished"
    assert ran == [{"table": "t", "where": "w", "limit": 10}]


async def test_a_stale_card_of_an_earlier_run_cannot_approve_a_later_call() -> None:
    """Call ids repeat across conversations (a new one after a reset, scripted models, some
    servers): the run is part of what a decision is bound to."""
    approver = InteractiveApprover()
    seen: list[ApprovalRequest] = []
    for _ in range(2):
        model = ScriptedModel([Turn(Call("delete_rows", {"table": "a", "where": "x"}, id="same"))])
        run = Agent(model, [delete_rows], approver=approver).start("go", max_steps=1)
        async for event in run.events():
            if not isinstance(event, ApprovalRequested):
                continue
            seen.append(event.request)
            assert event.request.call.id == "same"
            if len(seen) == 1:
                first = seen[0].fingerprint
                assert approver.resolve("same", Decision(False, "no"), fingerprint=first)
            else:
                stale, fresh = seen[0].fingerprint, seen[1].fingerprint
                assert stale != fresh
                assert not approver.resolve("same", Decision(True), fingerprint=stale)
                assert approver.resolve("same", Decision(False), fingerprint=fresh)
        await run.result()
    assert ran == []


async def test_approve_after_stop_does_nothing() -> None:
    approver = InteractiveApprover()
    agent = Agent(one_call(), [delete_rows], approver=approver)
    run = agent.start("go")
    request = None
    async for event in run.events():
        if isinstance(event, ApprovalRequested):
            request = event.request
            run.cancel()
    result = await run.result()
    assert request is not None and result.stop_reason == "cancelled"
    assert not approver.resolve("c1", Decision(True), fingerprint=request.fingerprint)
    await asyncio.sleep(0)
    assert ran == []
    assert_history_valid(agent.messages)


async def test_timeout_is_on_the_request_and_answers_the_call() -> None:
    approver = InteractiveApprover()
    agent = Agent(one_call(), [delete_rows], approver=approver, approval_timeout=0.05)
    events = [e async for e in agent.stream("go")]
    request = next(e for e in events if isinstance(e, ApprovalRequested)).request
    assert request.timeout == 0.05 and request.run_id
    resolved = next(e for e in events if isinstance(e, ApprovalResolved)).decision
    assert resolved.by == "timeout" and "approval timed out" in (resolved.reason or "")
    assert ran == []


def test_a_request_made_by_hand_checks_json_only() -> None:
    request = ApprovalRequest.for_call(ToolCall("c", "t", "{}"), {})
    assert request.check_arguments({"a": [1, {"b": None}]}) == {"a": [1, {"b": None}]}
    with pytest.raises(ArgumentsError):
        request.check_arguments({"a": object()})


async def test_the_tool_reads_a_copy_the_editor_cannot_change() -> None:
    edit: dict[str, Any] = {"table": "t", "where": "w"}
    seen: list[Any] = []

    async def run(ctx: ToolContext) -> str:
        edit["where"] = "changed after approval"  # the editor still holds its dict
        await asyncio.sleep(0)
        seen.append(dict(ctx.input))
        return "ok"

    slow = Tool(
        name="delete_rows", input_schema=delete_rows.input_schema, execute=run, needs_approval=True
    )
    agent = Agent(one_call(), [slow], approver=ScriptedApprover([approve(arguments=edit)]))
    await agent.run("go")
    assert seen == [{"table": "t", "where": "w"}]


@pytest.mark.parametrize("kind", ["sync", "async", "sync returning an awaitable"])
async def test_a_needs_approval_function_that_hangs_denies_its_call_and_never_holds_the_loop(
    kind: str,
) -> None:
    release = threading.Event()
    ran: list[str] = []

    def stuck(arguments: Any) -> bool:
        release.wait(10)
        return False

    async def stuck_async(arguments: Any) -> bool:
        await asyncio.sleep(10)
        return False

    rule: Any = {
        "sync": stuck,
        "async": stuck_async,
        "sync returning an awaitable": lambda arguments: stuck_async(arguments),
    }[kind]
    tool = Tool(
        name="t",
        input_schema={"type": "object"},
        execute=lambda ctx: ran.append("t") or "ran",
        needs_approval=rule,
    )
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    model = ScriptedModel([Turn(Call("t", {})), "ok"])
    agent = Agent(model, [tool], approver=ScriptedApprover([approve()]), hook_timeout=0.3)
    try:
        await asyncio.wait_for(agent.run("go"), 5)
    finally:
        release.set()
        ticker.cancel()
    assert ran == []
    assert ticks >= 5  # the loop kept running while the function was stuck
    assert_history_valid(agent.messages)
    [message] = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert message.results[0].is_error and "did not finish within 0.3 s" in message.results[0].text


async def test_a_needs_approval_function_still_decides_sync_async_or_awaitable() -> None:
    async def later(arguments: Any) -> bool:
        return bool(arguments.get("risky"))

    for rule in (lambda a: bool(a.get("risky")), later, lambda a: later(a)):
        tool = Tool(
            name="t",
            input_schema={"type": "object"},
            execute=lambda ctx: "ran",
            needs_approval=rule,
        )
        model = ScriptedModel([Turn(Call("t", {"risky": False}), Call("t", {"risky": True})), "ok"])
        asked = ScriptedApprover([Decision(False, "no")])
        agent = Agent(model, [tool], approver=asked)
        await agent.run("go")
        assert [r.input for r in asked.requests] == [{"risky": True}]


async def test_two_runs_whose_calls_share_an_id_each_wait_for_their_own_decision() -> None:
    @tool(needs_approval=True)
    def act(x: str) -> str:
        """Act."""
        return f"did {x}"

    approver = InteractiveApprover()
    agents = [
        Agent(ScriptedModel([Turn(Call("act", {"x": x}, id="c1")), "ok"]), [act], approver=approver)
        for x in ("a", "b")
    ]
    runs = [agent.start(x) for agent, x in zip(agents, "ab", strict=True)]
    for _ in range(100):
        if len(approver.pending()) == 2:
            break
        await asyncio.sleep(0.01)
    waiting = approver.pending()
    assert sorted(r.input["x"] for r in waiting) == ["a", "b"]
    first, second = waiting
    assert approver.resolve("c1", Decision(True), fingerprint=second.fingerprint)
    assert approver.resolve("c1", Decision(False, "no"), fingerprint=first.fingerprint)
    assert not approver.resolve("c1", Decision(True))  # nothing left to decide
    results = await asyncio.wait_for(asyncio.gather(*(run.result() for run in runs)), 5)
    for agent in agents:
        assert_history_valid(agent.messages)
    texts = {r.messages[2].results[0].text for r in results}  # type: ignore[union-attr]
    assert f"did {second.input['x']}" in texts
    assert any("denied" in t for t in texts)
