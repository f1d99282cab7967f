"""A tool's preview: computed while its call waits for approval, reported as ToolPreviewed, never
in the conversation, and never in the way of a decision (raising or hanging included)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from nbagent import Agent, InteractiveApprover, ScriptedApprover, tool
from nbagent.approvals.approval import Decision
from nbagent.errors import ToolDefinitionError
from nbagent.events import ApprovalRequested, ToolPreviewed
from nbagent.messages import ToolMessage
from nbagent.models import Call, ScriptedModel, Turn

ROWS = {"users": ["ada", "bob", "cy"]}
deleted: list[str] = []


def rows_to_delete(arguments: Any) -> str:
    return "\n".join(r for r in ROWS[arguments["table"]] if r.startswith(arguments["prefix"]))


@tool(needs_approval=True, preview=rows_to_delete)
def delete_rows(table: str, prefix: str) -> str:
    """Delete the rows whose name starts with prefix."""
    deleted.append(prefix)
    return "deleted"


@pytest.fixture(autouse=True)
def _clear() -> None:
    deleted.clear()


def model() -> ScriptedModel:
    return ScriptedModel([Turn(Call("delete_rows", {"table": "users", "prefix": "b"})), "ok"])


async def ask_and_answer(
    agent: Agent, approver: InteractiveApprover, answer: Decision, *, wait_preview: bool
) -> list[Any]:
    """Run; answer the approval (after the preview arrived, or at once)."""
    events: list[Any] = []
    run = agent.start("go")
    request = None
    async for event in run.events():
        events.append(event)
        if isinstance(event, ApprovalRequested):
            request = event.request
            if not wait_preview:
                approver.resolve(request.call.id, answer, fingerprint=request.fingerprint)
        if isinstance(event, ToolPreviewed) and request is not None and wait_preview:
            approver.resolve(request.call.id, answer, fingerprint=request.fingerprint)
    await run.result()
    return events


async def test_the_preview_arrives_while_the_call_waits_and_stays_out_of_the_history() -> None:
    approver = InteractiveApprover()
    agent = Agent(model(), [delete_rows], approver=approver)
    events = await ask_and_answer(agent, approver, Decision(True), wait_preview=True)
    request = next(e for e in events if isinstance(e, ApprovalRequested)).request
    assert request.preview is True
    preview = next(e for e in events if isinstance(e, ToolPreviewed))
    assert (preview.status, preview.result.text) == ("done", "bob")
    assert deleted == ["b"]
    texts = [r.text for m in agent.messages if isinstance(m, ToolMessage) for r in m.results]
    assert texts == ["deleted"]  # the preview never reached the model


@pytest.mark.parametrize("kind", ["raises", "hangs", "hangs-async"])
async def test_a_broken_preview_says_so_and_never_blocks_deny(kind: str) -> None:
    release = threading.Event()

    def raises(arguments: Any) -> Any:
        raise LookupError("no such table")

    def hangs(arguments: Any) -> Any:
        release.wait(5)

    async def hangs_async(arguments: Any) -> Any:
        await asyncio.sleep(5)

    chosen = {"raises": raises, "hangs": hangs, "hangs-async": hangs_async}[kind]

    @tool(needs_approval=True, preview=chosen)
    def delete_rows(table: str, prefix: str) -> str:
        """Delete rows."""
        deleted.append(prefix)
        return "deleted"

    approver = InteractiveApprover()
    agent = Agent(model(), [delete_rows], approver=approver, preview_timeout=0.1)
    events = await ask_and_answer(agent, approver, Decision(False, "no"), wait_preview=True)
    preview = next(e for e in events if isinstance(e, ToolPreviewed))
    if kind == "raises":
        assert preview.status == "error" and "LookupError: no such table" in preview.result.text
    else:
        assert preview.status == "timeout" and "did not finish within 0.1 s" in preview.result.text
    assert preview.result.is_error and deleted == []
    release.set()


async def test_a_decision_before_the_preview_cancels_it() -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    async def slow(arguments: Any) -> str:
        started.set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    @tool(needs_approval=True, preview=slow)
    def delete_rows(table: str, prefix: str) -> str:
        """Delete rows."""
        return "deleted"

    approver = InteractiveApprover()
    agent = Agent(model(), [delete_rows], approver=approver)
    run = agent.start("go")
    events = []
    async for event in run.events():
        events.append(event)
        if isinstance(event, ApprovalRequested):
            await started.wait()
            request = event.request
            approver.resolve(request.call.id, Decision(True), fingerprint=request.fingerprint)
    await run.result()
    await asyncio.sleep(0)
    assert cancelled == [True]
    assert not [e for e in events if isinstance(e, ToolPreviewed)]


async def test_no_preview_without_a_person_to_ask() -> None:
    calls: list[Any] = []

    @tool(needs_approval=True, preview=lambda args: calls.append(args))
    def delete_rows(table: str, prefix: str) -> str:
        """Delete rows."""
        return "deleted"

    agent = Agent(model(), [delete_rows], approver=ScriptedApprover([True]))
    events = [e async for e in agent.stream("go")]
    assert calls == [] and not [e for e in events if isinstance(e, ToolPreviewed)]


async def test_previews_render_like_results_and_are_bounded() -> None:
    from nbagent.limits import Limits

    @tool(needs_approval=True, preview=lambda args: {"rows": ["x" * 50] * 10})
    def delete_rows(table: str, prefix: str) -> str:
        """Delete rows."""
        return "deleted"

    approver = InteractiveApprover()
    agent = Agent(model(), [delete_rows], approver=approver, limits=Limits(max_result_chars=100))
    events = await ask_and_answer(agent, approver, Decision(False), wait_preview=True)
    preview = next(e for e in events if isinstance(e, ToolPreviewed))
    assert preview.result.text.startswith('{"rows": ["xxx')
    assert "more characters were cut" in preview.result.text
    assert preview.result.value == {"rows": ["x" * 50] * 10}  # the value, for a table or a plot


def test_a_preview_must_be_a_function() -> None:
    with pytest.raises(ToolDefinitionError, match="preview"):

        @tool(preview="the rows")  # type: ignore[arg-type]
        def nope() -> None:
            """Nothing."""


class _SlowText:
    """What an async preview returns: turning it into text blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __str__(self) -> str:
        self.release.wait(10)
        return "slow"

    __repr__ = __str__


async def test_turning_an_async_previews_value_into_text_never_blocks_the_loop() -> None:
    slow = _SlowText()

    async def preview(arguments: Any) -> Any:
        return slow

    @tool(needs_approval=True, preview=preview)
    def delete_rows(table: str, prefix: str) -> str:
        """Delete rows."""
        return "deleted"

    approver = InteractiveApprover()
    agent = Agent(model(), [delete_rows], approver=approver, preview_timeout=0.3)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    try:
        events = await asyncio.wait_for(
            ask_and_answer(agent, approver, Decision(True), wait_preview=True), 5
        )
    finally:
        slow.release.set()
        ticker.cancel()
    assert ticks >= 5  # the loop kept running while str() was stuck
    [previewed] = [e for e in events if isinstance(e, ToolPreviewed)]
    assert previewed.status == "timeout"


async def test_an_edit_is_previewed_only_if_it_fits_and_only_while_the_call_waits() -> None:
    from nbagent.errors import ArgumentsError

    approver = InteractiveApprover()
    agent = Agent(model(), [delete_rows], approver=approver)
    run = agent.start("go")
    seen: list[ToolPreviewed] = []
    request = None
    async for event in run.events():
        if isinstance(event, ApprovalRequested):
            request = event.request
            assert request.previews is not None
            with pytest.raises(ArgumentsError, match="prefix"):
                request.previews.ask({"table": "users"})  # refused: nothing is previewed
            assert request.previews.ask({"table": "users", "prefix": "c"}) == 1
            first = await request.previews.wait(0)
            assert first is not None and first.result.text == "bob"
            edited = await request.previews.wait(1)
            assert edited is not None and edited.result.text == "cy"
            assert edited.arguments == {"table": "users", "prefix": "c"}
            approver.resolve(request.call.id, Decision(False, "no"))
        if isinstance(event, ToolPreviewed):
            seen.append(event)
    await run.result()
    assert [(e.revision, e.result.text) for e in seen] == [(0, "bob"), (1, "cy")]
    assert request is not None and request.previews is not None
    assert request.previews.ask({"table": "users", "prefix": "a"}) is None  # answered: too late
    assert await request.previews.wait(2) is None


@pytest.mark.parametrize("sync", [True, False])
async def test_a_callback_approver_can_wait_for_the_preview(sync: bool) -> None:
    from nbagent import CallbackApprover
    from nbagent.approvals.approval import ApprovalRequest

    shown: list[str] = []

    def ask(request: ApprovalRequest) -> bool:
        assert request.previews is not None
        found = request.previews.wait_blocking(timeout=30)
        shown.append(found.result.text if found is not None else "none")
        return True

    async def ask_async(request: ApprovalRequest) -> bool:
        assert request.previews is not None
        found = await request.previews.wait()
        shown.append(found.result.text if found is not None else "none")
        return False

    approver = CallbackApprover(ask if sync else ask_async)
    agent = Agent(model(), [delete_rows], approver=approver)
    await agent.run("go")
    assert shown == ["bob"]
    assert deleted == (["b"] if sync else [])
