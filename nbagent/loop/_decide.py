"""Whether one call may run: its tool's rule, then the approver, bounded in time.

Whatever the rule or the approver does (raise, return something that is not a Decision, never
answer), the outcome is a decision about this one call: a failure or a timeout denies it with a
reason the model reads, and the run goes on. While a person is asked, the tool's preview runs
beside the question (it never holds up the decision). An approval with edited arguments is
checked against the tool's schema (refused edits deny the call, saying why), and the decision
is bound to the run, the call id and the hash of the arguments that will run.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..approvals.approval import (
    ApprovalBinding,
    ApprovalRequest,
    Approver,
    Decision,
    arguments_hash,
)
from ..errors import ArgumentsError
from ..events import AgentEvent, ApprovalRequested, ApprovalResolved, ToolArgumentsChanged
from ..tools import Tool, ToolCall
from ._execution import ToolRaised, contained, copy_json
from ._previews import Previews
from ._usercode import UserCodeFailed, call_user

__all__ = ["Decided", "decide_call"]


@dataclass(frozen=True)
class Decided:
    """The decision about one call, and the arguments it is about (edited ones, if approved
    with an edit that passed the schema)."""

    decision: Decision
    arguments: Any
    edited: bool = False


async def decide_call(
    found: Tool,
    call: ToolCall,
    input_value: Any,
    approver: Approver,
    timeout: float | None,
    emit: Callable[[AgentEvent], None],
    *,
    run_id: str = "",
    checker: Callable[[Any], Any] | None = None,
    previews: Previews | None = None,
    schema: Mapping[str, Any] | None = None,
    rule_timeout: float | None = None,
) -> Decided | None:
    """None when the call needs no approval; else the decision for exactly this call.

    The rule and the approver each get their own copy of the input. ``checker`` turns edited
    arguments into the ones that run (raising ArgumentsError to refuse them); ``previews``, when
    the tool has a preview, are started once a person is asked and stopped once they answer.
    ``rule_timeout`` bounds the tool's ``needs_approval`` function, which runs off the loop
    (one that fails or takes too long denies the call).
    """
    rule = found.needs_approval
    if isinstance(rule, bool):  # no rule to run: no copy for it, no coroutine
        needed = rule
    else:
        try:
            needed = await _approval_needed(found, copy_json(input_value), rule_timeout)
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except BaseException as exc:  # a broken rule must not let the call through, nor stop
            text = f"the approval rule of {call.name} failed: {exc}"
            return _bound(Decision(False, text, by="error"), input_value, call, run_id, emit)
    if not needed:
        denied = await _forbidden(approver, call, input_value, run_id, rule_timeout)
        if denied is None:
            return None
        return _bound(denied, input_value, call, run_id, emit)
    shown = previews if found.preview is not None else None
    request = ApprovalRequest.for_call(
        call,
        copy_json(input_value),
        found.title,
        run_id=run_id,
        timeout=timeout,
        preview=found.preview is not None and previews is not None,
        checker=checker,
        schema=schema,
        previews=shown,
    )
    known = getattr(approver, "known_decision", None)
    if known is not None:
        # Rules' predicates are user code: off the loop, bounded like a hook.
        try:
            decision = await call_user(known, request, timeout=rule_timeout)
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except BaseException as exc:  # even KeyboardInterrupt: it denies this call only
            decision = _failed(exc)
        if decision is not None:  # e.g. "always allow": nobody needs to be asked
            return await _settle(
                _as_decision(decision),
                input_value,
                call,
                run_id,
                checker,
                emit,
                approver,
                rule_timeout,
            )
    try:
        decision = await _ask(approver, request, timeout, emit, shown)
    finally:
        if shown is not None:
            shown.close()
    return await _settle(decision, input_value, call, run_id, checker, emit, approver, rule_timeout)


async def _settle(
    decision: Decision,
    proposed: Any,
    call: ToolCall,
    run_id: str,
    checker: Callable[[Any], Any] | None,
    emit: Callable[[AgentEvent], None],
    approver: Approver,
    rule_timeout: float | None,
) -> Decided:
    """Check an edit, bind the decision to what will run, and say so in events."""
    if not decision.approved or decision.arguments is None:
        return _bound(replace(decision, arguments=None), proposed, call, run_id, emit)
    try:
        edited = checker(decision.arguments) if checker is not None else decision.arguments
    except ArgumentsError as exc:
        refused = Decision(
            False,
            f"the edited arguments were refused, so the call was not run: {exc}",
            by="error",
        )
        return _bound(refused, proposed, call, run_id, emit)
    if arguments_hash(edited) == arguments_hash(proposed):
        return _bound(replace(decision, arguments=None), proposed, call, run_id, emit)
    denied = await _forbidden(approver, call, edited, run_id, rule_timeout)
    if denied is not None:  # a deny rule holds over what would run, whoever chose it
        return _bound(denied, proposed, call, run_id, emit)
    emit(ToolArgumentsChanged(call.id, "person", copy_json(edited), copy_json(proposed)))
    decided = _bound(replace(decision, arguments=copy_json(edited)), edited, call, run_id, emit)
    return Decided(decided.decision, edited, edited=True)


class _Verdict:
    """What a sync ``needs_approval`` returned, carried out of its thread as it is (it may be
    an awaitable, to be awaited on the loop)."""

    def __init__(self, value: Any) -> None:
        self.value = value


async def _approval_needed(found: Tool, value: Any, timeout: float | None) -> bool:
    """``found.needs_approval`` for ``value``: a sync function runs on a thread of its own and
    an async one as a task, both bounded by ``timeout`` (user code must not hold the loop)."""
    rule = found.needs_approval
    if isinstance(rule, bool):
        return rule
    if inspect.iscoroutinefunction(rule):
        return bool(await call_user(rule, value, timeout=timeout))
    boxed = await call_user(lambda v: _Verdict(rule(v)), value, timeout=timeout)
    verdict = boxed.value
    if inspect.isawaitable(verdict):
        try:
            verdict = await asyncio.wait_for(asyncio.ensure_future(verdict), timeout)
        except asyncio.TimeoutError:
            assert timeout is not None
            raise UserCodeFailed(f"it did not finish within {timeout:g} s") from None
    return bool(verdict)


async def _forbidden(
    approver: Approver, call: ToolCall, arguments: Any, run_id: str, timeout: float | None
) -> Decision | None:
    """A denial the approver holds for every call (a deny rule), or None; one that fails or
    overruns ``timeout`` denies, saying why."""
    forbidden = getattr(approver, "forbidden", None)
    if forbidden is None:
        return None
    request = ApprovalRequest.for_call(call, copy_json(arguments), run_id=run_id)
    try:
        decision = await call_user(forbidden, request, timeout=timeout)
    except (asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:
        return _failed(exc)
    if decision is None or (isinstance(decision, Decision) and decision.approved):
        return None  # only a denial is read here
    return _as_decision(decision)


def _bound(
    decision: Decision,
    arguments: Any,
    call: ToolCall,
    run_id: str,
    emit: Callable[[AgentEvent], None],
) -> Decided:
    try:
        digest = arguments_hash(arguments)
    except (TypeError, ValueError):
        digest = arguments_hash(call.arguments)
    bound = replace(decision, binding=ApprovalBinding(run_id, call.id, digest))
    emit(ApprovalResolved(call.id, bound))
    return Decided(bound, arguments)


async def _ask(
    approver: Approver,
    request: ApprovalRequest,
    timeout: float | None,
    emit: Callable[[AgentEvent], None],
    previews: Previews | None = None,
) -> Decision:
    """``approver.decide(request)`` on its own task, so that its failures stay its own.

    ApprovalRequested is emitted once ``decide`` has begun (an interactive approver has then
    registered the request), so a reader may answer it as soon as it sees the event. The
    previews run beside the question and stop when it is answered.
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
        if previews is not None and request.preview and not asked.done():
            previews.start()
        done, _ = await asyncio.wait({asked}, timeout=timeout)
    except asyncio.CancelledError:
        stopping = True
        asked.cancel()
        raise
    finally:
        if previews is not None:
            previews.close()
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
    if isinstance(exc, UserCodeFailed):
        if exc.raised is None:  # it overran its time: the message says so
            return Decision(False, f"the approver failed: {exc}", by="error")
        exc = exc.raised
    return Decision(False, f"the approver failed: {type(exc).__name__}: {exc}", by="error")


def _as_decision(value: Any) -> Decision:
    if isinstance(value, Decision):
        return value
    shown = type(value).__name__
    return Decision(False, f"the approver returned a {shown}, not a Decision", by="error")
