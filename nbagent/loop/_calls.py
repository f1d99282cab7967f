"""One valid call, from hooks to result: before-tool hooks, approval (with the tool's preview
and the person's edit), execution, after-tool hooks, and what the model reads about it.

The order is what makes approvals mean something: before hooks run first, so a person approves
the arguments that will really run; an edit or a hook's rewrite passes the same checks as the
model's arguments (:mod:`nbagent.approvals._edits`); the call runs with exactly the arguments its
decision is bound to; the model reads its result with a note naming who changed the arguments and
what they became, while the person sees the tool's own result (``ToolFinished.original``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from ..approvals._edits import arguments_note, checked_arguments, with_note
from ..approvals.approval import arguments_hash
from ..approvals.hooks import Veto
from ..content import ToolResult, error_result, to_tool_result, validate_result
from ..errors import ArgumentsError
from ..events import ToolArgumentsChanged, ToolHookApplied, ToolStarted
from ..tools import Tool, ToolCall
from ._decide import decide_call
from ._execution import Outcome, copy_json, execute_tool
from ._previews import Previews
from ._usercode import UserCodeFailed, call_user, describe

if TYPE_CHECKING:
    from ._loopstate import RunState

__all__ = ["run_valid_call"]

#: Decisions made by a rule or a policy rather than a person (see Decision.by).
POLICIES = frozenset({"auto", "deny", "rule", "script", "error", "always", "timeout"})
#: Statuses after which the tool's function ran and after-tool hooks see its result.
_RAN = frozenset({"done", "error"})
#: Longest hook detail (a veto's reason, an error) an event carries; the model reads it whole,
#: within Limits.max_result_chars.
_DETAIL = 1_000


async def run_valid_call(
    run: RunState,
    found: Tool | None,
    call: ToolCall,
    input_value: Any,
    semaphore: asyncio.Semaphore | None,
    sequential: dict[str, asyncio.Lock],
) -> Outcome:
    """A call whose arguments fit: unknown tool, provider's tool, vetoed, denied, or run."""
    if found is None:
        available = ", ".join(sorted(run.tools)) or "none"
        text = f"Unknown tool {call.name!r}. Available tools: {available}."
        return Outcome(error_result(text), "invalid")
    if found.execute is None:
        text = f"Tool {call.name!r} is run by the provider, not by this agent."
        return Outcome(error_result(text), "invalid")
    agent = run.agent
    schema = agent._schemas.get(call.name)

    def checker(value: Any) -> Any:
        return checked_arguments(value, call.name, schema, run.limits)

    changed_by: list[str] = []
    arguments = input_value
    for hook in list(agent.before_tool_hooks):
        name = describe(hook)
        try:
            verdict = await call_user(hook, call, copy_json(arguments), timeout=agent.hook_timeout)
        except UserCodeFailed as exc:
            run.emit(ToolHookApplied(call.id, "before", name, "failed", _short(str(exc))))
            text = (
                f"This call to {call.name} was not run: the before-tool hook {name} failed ({exc})."
            )
            return Outcome(error_result(text), "error")
        if isinstance(verdict, Veto):
            run.emit(ToolHookApplied(call.id, "before", name, "vetoed", _short(verdict.reason)))
            text = (
                f"This call to {call.name} was not run: vetoed by the hook {name}: {verdict.reason}"
            )
            return Outcome(error_result(text), "denied")
        if verdict is None:
            continue
        try:
            if not isinstance(verdict, Mapping):
                raise ArgumentsError(
                    "a before-tool hook returns None, new arguments (a dict) or veto(reason), "
                    f"not {type(verdict).__name__}"
                )
            rewritten = checker(dict(verdict))
        except ArgumentsError as exc:
            detail = _short(f"its arguments were refused: {exc}")
            run.emit(ToolHookApplied(call.id, "before", name, "failed", detail))
            text = (
                f"This call to {call.name} was not run: the before-tool hook {name} gave "
                f"arguments that were refused: {exc}"
            )
            return Outcome(error_result(text), "invalid")
        if arguments_hash(rewritten) != arguments_hash(arguments):
            run.emit(
                ToolArgumentsChanged(
                    call.id, "hook", copy_json(rewritten), copy_json(arguments), name
                )
            )
            changed_by.append(f"by the before-tool hook {name}")
            arguments = rewritten

    decided = await decide_call(
        found,
        call,
        arguments,
        run.approver,
        agent.approval_timeout,
        run.emit,
        run_id=run.id,
        checker=checker,
        previews=_previews(run, found, call, arguments, checker),
        schema=schema.schema if schema is not None else None,
        rule_timeout=agent.hook_timeout,
    )
    if decided is not None:
        decision = decided.decision
        if not decision.approved:
            reason = decision.reason or "no reason given"
            if decision.by == "rule" and decision.reason and decision.reason.startswith("deny "):
                text = f"This call to {call.name} was not run: the rule `{reason}` denies it"
            elif decision.by in POLICIES:
                text = f"This call to {call.name} was not run: {reason}"
            else:
                text = f"The person denied this call to {call.name}: {reason}"
            return Outcome(error_result(text), "denied")
        if decided.edited:
            changed_by.append("by the person who approved it")
            arguments = decided.arguments

    outcome = await _execute(run, found, call, arguments, semaphore, sequential)
    original = outcome.result
    result = original
    if outcome.status in _RAN and outcome.raised is None:
        for after in list(agent.after_tool_hooks):
            result = await _after(run, after, call, arguments, result)
    if changed_by:
        result = with_note(result, arguments_note(changed_by, arguments, run.limits))
    if result is original:
        return outcome
    return Outcome(
        result, outcome.status, outcome.trace, outcome.abandoned, outcome.raised, original
    )


async def _after(
    run: RunState, hook: Any, call: ToolCall, arguments: Any, result: ToolResult
) -> ToolResult:
    name = describe(hook)

    def converted(value: Any) -> Any:
        return None if value is None else validate_result(to_tool_result(value))

    try:
        value = await call_user(
            hook,
            call,
            copy_json(arguments),
            result,
            timeout=run.agent.hook_timeout,
            after=converted,
        )
    except UserCodeFailed as exc:
        run.emit(ToolHookApplied(call.id, "after", name, "failed", _short(str(exc))))
        return error_result(
            f"The result of this call was withheld: the after-tool hook {name} failed ({exc})."
        )
    if value is None or value == result:
        return result
    rewritten = ToolResult(value.content, value.is_error, result.terminate, value.value)
    detail = _short(value.text, 200)
    run.emit(ToolHookApplied(call.id, "after", name, "rewrote the result", detail))
    return rewritten


async def _execute(
    run: RunState,
    found: Tool,
    call: ToolCall,
    arguments: Any,
    semaphore: asyncio.Semaphore | None,
    sequential: dict[str, asyncio.Lock],
) -> Outcome:
    lock = (
        sequential.setdefault(call.name, asyncio.Lock())
        if found.execution_mode == "sequential"
        else None
    )
    timeout = found.timeout if found.timeout is not None else run.agent.tool_timeout
    if semaphore is None and lock is None:  # nothing to hold: no context managers to enter
        return await _run_tool(run, found, call, arguments, timeout)
    async with semaphore or nullcontext(), lock or nullcontext():
        return await _run_tool(run, found, call, arguments, timeout)


async def _run_tool(
    run: RunState, found: Tool, call: ToolCall, arguments: Any, timeout: float | None
) -> Outcome:
    run.emit(ToolStarted(call, copy_json(arguments)))
    return await execute_tool(
        found,
        call,
        copy_json(arguments),
        timeout,
        run._progress(call.id),
        run._abandon,
        run_id=run.id,
        step=run._steps,
    )


def _previews(
    run: RunState, found: Tool, call: ToolCall, arguments: Any, checker: Callable[[Any], Any]
) -> Previews | None:
    """The previews of this call (None when its tool has none), reported as ToolPreviewed."""
    if found.preview is None:
        return None
    return Previews(
        found.preview,
        call.id,
        call.name,
        arguments,
        emit=run.emit,
        limits=run.limits,
        timeout=run.agent.preview_timeout,
        checker=checker,
    )


def _short(text: str, limit: int = _DETAIL) -> str:
    """Text a hook gave (a reason, an error) as events carry it: bounded, for people."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
