"""A helper agent's run (``agent.as_tool``) inside the calling card, in-process on a recording
comm: its own calls and cards, its approval asked and answered in the nested card, Stop from
the caller's card stopping it, and every widget closed at the end."""

from __future__ import annotations

import asyncio
from typing import Any

from nbagent import Agent
from nbagent.approvals.approval import InteractiveApprover
from nbagent.events import AgentEvent, ApprovalRequested, HelperEvent, ToolStarted
from nbagent.generation import Request
from nbagent.messages import ToolMessage
from nbagent.models import Call, FunctionModel, Turn
from nbagent.notebook.core.runner import drive
from nbagent.notebook.live.view import RunView
from nbagent.tools import tool

from .conftest import Wire


def answered(request: Request) -> list[str]:
    return [r.text for m in request.messages if isinstance(m, ToolMessage) for r in m.results]


def agents(ran: list[str], approver: InteractiveApprover, tool_body: Any = None) -> Agent:
    @tool(needs_approval=True)
    async def delete(path: str) -> str:
        """Delete a file."""
        if tool_body is not None:
            await tool_body()
        ran.append(path)
        return f"deleted {path}"

    def helper_decide(request: Request) -> Any:
        results = answered(request)
        return Turn(Call("delete", {"path": "a.txt"})) if not results else results[-1]

    def caller_decide(request: Request) -> Any:
        results = answered(request)
        return Turn(Call("cleaner", {"prompt": "delete a.txt"})) if not results else results[-1]

    helper = Agent(FunctionModel(helper_decide), [delete], name="cleaner", description="Cleans.")
    return Agent(FunctionModel(caller_decide), [helper], approver=approver)


def watched(view: RunView, wanted: type, nested: bool = True) -> asyncio.Event:
    seen = asyncio.Event()
    original = view.handle

    def handle(event: AgentEvent) -> None:
        original(event)
        inner = event.event if isinstance(event, HelperEvent) else None
        if isinstance(inner, wanted) if nested else isinstance(event, wanted):
            seen.set()

    view.handle = handle  # type: ignore[method-assign]
    return seen


def click(wire: Wire, widget: Any) -> None:
    wire.comms[widget.model_id].deliver({"method": "custom", "content": {"event": "click"}})


async def test_the_helpers_approval_is_asked_in_the_nested_card(wire: Wire) -> None:
    ran: list[str] = []
    approver = InteractiveApprover()
    caller = agents(ran, approver)
    view = RunView("clean up", approver=approver)
    asked = watched(view, ApprovalRequested)
    run = caller.start("clean up")
    driving = asyncio.ensure_future(drive(run, view))
    await asyncio.wait_for(asked.wait(), 10)
    (outer_card,) = view.cards.values()
    (nested,) = view.nested.views.values()
    assert any(nested.widget in getattr(c, "children", ()) for c in outer_card.widget.children)
    (inner_card,) = nested.cards.values()
    assert inner_card.record.name == "delete" and inner_card.approval is not None
    assert outer_card.approval is None  # the caller's own call needed no approval
    click(wire, inner_card.approval.approve)
    result = await asyncio.wait_for(driving, 10)
    assert ran == ["a.txt"] and result.text == "deleted a.txt"
    (record,) = nested.transcript.calls.values()
    assert nested.finished and record.result is not None and record.result.text == "deleted a.txt"
    view.close()
    view.dispose()
    assert all(not getattr(w, "comm", None) for w in (nested.widget, inner_card.widget))


async def test_stop_on_the_callers_card_stops_the_helper(wire: Wire) -> None:
    ran: list[str] = []
    approver = InteractiveApprover()
    started = asyncio.Event()

    async def hang() -> None:
        started.set()
        await asyncio.Event().wait()

    caller = agents(ran, approver, hang)
    run_holder: list[Any] = []
    view = RunView("clean up", approver=approver, on_stop=lambda: run_holder[0].cancel())
    asked = watched(view, ApprovalRequested)
    running = watched(view, ToolStarted)
    run = caller.start("clean up")
    run_holder.append(run)
    driving = asyncio.ensure_future(drive(run, view))
    await asyncio.wait_for(asked.wait(), 10)
    (nested,) = view.nested.views.values()
    (inner_card,) = nested.cards.values()
    click(wire, inner_card.approval.approve)
    await asyncio.wait_for(running.wait(), 10)
    await asyncio.wait_for(started.wait(), 10)
    click(wire, view.stop)
    result = await asyncio.wait_for(driving, 10)
    assert result.stop_reason == "cancelled" and ran == []
    assert nested.finished and nested.transcript.stop_reason == "cancelled"
    view.close()
    view.dispose()
