"""Whether one call may run: its tool's rule, then the approver, bounded in time.

Whatever the rule or the approver does (raise, return something that is not a Decision, never
answer), the outcome is a decision about this one call: a failure or a timeout denies it with a
reason the model reads, and the run goes on.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from ._execution import ToolRaised, contained, copy_json
from .approval import ApprovalRequest, Approver, Decision
from .events import AgentEvent, ApprovalRequested, ApprovalResolved
from .tools import Tool, ToolCall

__all__ = ["decide_call"]


async def decide_call(
    found: Tool,
    call: ToolCall,
    input_value: Any,
    approver: Approver,
    timeout: float | None,
    emit: Callable[[AgentEvent], None],
) -> Decision | None:
    """None when the call needs no approval; else the decision for exactly this call.

    The rule and the approver each get their own copy of the input.
    """
    try:
        needed = await found.approval_needed(copy_json(input_value))
    except (asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:  # a broken rule must not let the call through, nor stop the run
        return Decision(False, f"the approval rule of {call.name} failed: {exc}", by="error")
    if not needed:
        return None
    request = ApprovalRequest.for_call(call, copy_json(input_value), found.title)
    known = getattr(approver, "known_decision", None)
    if known is not None:
        try:
            decision = known(request)
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except BaseException as exc:  # even KeyboardInterrupt: it denies this call only
            decision = _failed(exc)
        if decision is not None:  # e.g. "always allow": nobody needs to be asked
            decision = _as_decision(decision)
            emit(ApprovalResolved(call.id, decision))
            return decision
    decision = await _ask(approver, request, timeout, emit)
    emit(ApprovalResolved(call.id, decision))
    return decision


async def _ask(
    approver: Approver,
    request: ApprovalRequest,
    timeout: float | None,
    emit: Callable[[AgentEvent], None],
) -> Decision:
    """``approver.decide(request)`` on its own task, so that its failures stay its own.

    ApprovalRequested is emitted once ``decide`` has begun (an interactive approver has then
    registered the request), so a reader may answer it as soon as it sees the event.
    """
    try:
        pending: Any = approver.decide(request)
    except (asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:
        emit(ApprovalRequested(request))
        return _failed(exc)
    if not inspect.isawaitable(pending):
        emit(ApprovalRequested(request))
        return _as_decision(pending)
    stopping = False

    def cancel_requested() -> bool:
        return stopping

    asked = asyncio.ensure_future(contained(pending, cancel_requested=cancel_requested))
    try:
        await asyncio.sleep(0)  # let decide() run up to its first wait
        emit(ApprovalRequested(request))
        done, _ = await asyncio.wait({asked}, timeout=timeout)
    except asyncio.CancelledError:
        stopping = True
        asked.cancel()
        raise
    if not done:
        stopping = True
        asked.cancel()
        assert timeout is not None
        return Decision(False, f"approval timed out after {timeout:g} s", by="timeout")
    if asked.cancelled():
        return Decision(False, "the approver cancelled its decision", by="error")
    error = asked.exception()
    if isinstance(error, ToolRaised):
        return _failed(error.raised)
    if error is not None:
        return _failed(error)
    return _as_decision(asked.result())


def _failed(exc: BaseException) -> Decision:
    return Decision(False, f"the approver failed: {type(exc).__name__}: {exc}", by="error")


def _as_decision(value: Any) -> Decision:
    if isinstance(value, Decision):
        return value
    shown = type(value).__name__
    return Decision(False, f"the approver returned a {shown}, not a Decision", by="error")
