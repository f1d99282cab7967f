"""Agents as tools of other agents: ``helper.as_tool(name=..., description=...)``.

The tool's input is a prompt (``{"prompt": "..."}``), or a typed input (``input=T``: its JSON
is the helper's prompt); its result is the helper's answer: its text, or with ``output=T`` its
typed answer as JSON (the decoded value is the result's ``value``). Each call runs the helper
in a conversation of its own (a fork of it: calls never share a history, and parallel calls
never find it busy), and everything the caller's run is bound by reaches it:

* **stop**: cancelling the caller cancels the helper's run; both histories end with every
  call answered;
* **budget**: the helper spends from the caller's account (:mod:`nbagent._ground.spending`): each
  of its requests reserves from the caller's :class:`~nbagent.Budget` (tokens, requests and
  dollars) before it is sent, so helpers running in parallel share what is left rather than
  each getting all of it; a helper's own budget bounds it too;
* **timeouts**: the call is a tool call, so the caller's ``tool_timeout`` (or the tool's own
  ``timeout=``) bounds the whole of the helper's run;
* **approvals**: the helper's calls go to the caller's approver (the same person; rules
  apply by the inner tool's name);
* **depth**: helpers of helpers nest at most ``max_depth`` deep (an agent that reaches itself
  through its helpers gets a clear error, never a hang).

A helper that fails gives the caller an error result saying why, and the caller goes on. A
run that is recorded records its helpers' requests too, in order among its own, and its
replay replays them (through both loops, with no model); helpers called in parallel record in
the order their requests went out, which a replay may not meet again (it then diverges,
saying so). The
helper's events reach whoever reads the caller's, each wrapped in a
:class:`~nbagent.events.HelperEvent` naming the call it runs in (a helper of a helper: one
wrapper per level), so a front end can show the inner run inside the call's card.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from typing import Any, Protocol

from ._ground.spending import spending_account
from .content import TextPart, ToolResult, error_result
from .errors import ToolDefinitionError
from .events import HelperEvent
from .generation import Usage
from .tools import Tool, ToolContext, validate_tools


class Run(Protocol):
    """The caller's run, as a helper's call reads it (:class:`~nbagent.loop.run.Run` is the
    one; named by what is read, so this room imports no loop)."""

    id: str
    approver: Any
    agent: Any
    _usage: Usage
    _requests: int
    exchanges: list[Any]

    def emit(self, event: Any) -> None: ...


#: The helper: an Agent (named by what it does, not its class, so this imports no agent).
Agent = Any

__all__ = ["MAX_DEPTH", "agent_tool", "current_run", "helper_call"]

#: How deep helpers of helpers may nest by default (the caller's own run is depth 0).
MAX_DEPTH = 4
#: How long a stopped caller waits for its helper's run to wind down (seconds).
_STOP_WAIT = 5.0

_RUN: contextvars.ContextVar[Run | None] = contextvars.ContextVar("nbagent_run", default=None)
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("nbagent_helper_depth", default=0)
_CALL: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "nbagent_helper_call", default=None
)

_PROMPT_SCHEMA = {
    "type": "object",
    "properties": {
        "prompt": {
            "type": "string",
            "description": "The task for this agent, with everything it needs to know.",
        }
    },
    "required": ["prompt"],
    "additionalProperties": False,
}


def current_run() -> Run | None:
    """The run whose step is executing (set by each run for its own task and its tools)."""
    return _RUN.get()


def helper_call() -> tuple[str, str] | None:
    """In a helper's run: the caller's run id and the id of the call that runs it."""
    return _CALL.get()


def enter_run(run: Run) -> None:
    """Called by a run as it begins, in its own task (the context is the task's copy)."""
    _RUN.set(run)


def agent_tool(
    helper: Agent,
    *,
    name: str,
    description: str,
    input: Any = None,
    output: Any = None,
    max_steps: int | None = None,
    max_depth: int = MAX_DEPTH,
    needs_approval: bool = False,
    timeout: float | None = None,
) -> Tool:
    """The tool that runs ``helper`` (see the module docs); checked now, before any run."""
    from .output import output_spec

    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise ToolDefinitionError(f"max_depth must be a whole number of at least 1: {max_depth!r}")
    if max_steps is not None and max_steps < 1:
        raise ToolDefinitionError("max_steps must be at least 1")
    given = None
    schema: dict[str, Any] = dict(_PROMPT_SCHEMA)
    if input is not None:
        given = output_spec(input, error=ToolDefinitionError)
        schema = given.schema
    if output is not None:
        output_spec(output, error=ToolDefinitionError)  # refused now, not at the first call

    async def run_helper(context: ToolContext) -> ToolResult | str:
        arguments = context.input
        if given is None:
            prompt = str(arguments.get("prompt", ""))
        else:
            value = arguments["value"] if given.wrapped else arguments
            prompt = json.dumps(value, ensure_ascii=False)
        return await _delegate(helper, name, prompt, context.call.id, output, max_steps, max_depth)

    made = Tool(
        name=name,
        description=description,
        input_schema=schema,
        execute=run_helper,
        needs_approval=needs_approval,
        timeout=timeout,
    )
    validate_tools([made])  # a bad name or schema is refused now
    return made


async def _delegate(
    helper: Agent,
    name: str,
    prompt: str,
    call_id: str,
    output: Any,
    max_steps: int | None,
    max_depth: int,
) -> ToolResult | str:
    caller = current_run()
    depth = _DEPTH.get() + 1
    if depth > max_depth:
        return error_result(
            f"{name} was not run: helpers would nest {depth} deep, more than the limit of "
            f"{max_depth} (does an agent reach itself through its helpers?)"
        )
    account = spending_account()  # the caller's: the helper's requests reserve from it
    spent = account.refusal() if account is not None else None
    if spent is not None:
        return error_result(f"{name} was not run: {spent}")
    worker = helper.fork()
    worker.messages = []  # each call is a conversation of its own
    worker.generator = _recorded(caller, worker.generator)
    token = _DEPTH.set(depth)
    called = _CALL.set((caller.id, call_id) if caller is not None else None)
    try:  # the helper's task copies this context: its helpers see the depth, its spans the call
        run = worker.start(
            prompt,
            approver=caller.approver if caller is not None else None,
            max_steps=max_steps,
            output=output,
        )
    finally:
        _CALL.reset(called)
        _DEPTH.reset(token)
    try:
        async for event in run.events():
            if caller is not None:
                caller.emit(HelperEvent(call_id, name, depth, run.id, event))
        result = await run.result()
    except asyncio.CancelledError:
        run.cancel()
        task = run._task
        if task is not None:  # its history repaired, its calls answered (bounded: never a hang)
            await asyncio.wait({task}, timeout=_STOP_WAIT)
        if task is not None and task.done() and caller is not None:
            for event in run._queue.drain():  # what it said while stopping, to its end
                caller.emit(HelperEvent(call_id, name, depth, run.id, event))
        _charge(caller, run)
        _attach(caller, call_id, run.final)
        raise
    _charge(caller, run)
    _attach(caller, call_id, result)
    return _answer(name, result, output is not None)


def _recorded(caller: Run | None, own: Any) -> Any:
    """The helper's model as the caller's run uses its own: recorded into the same recording
    (the inner requests in order among the outer ones), or replayed from it (one replay,
    so both loops read its steps in the order they were recorded)."""
    from .recording import RecordingGenerator, ReplayGenerator

    outer = caller.agent.generator if caller is not None else None
    if isinstance(outer, RecordingGenerator):
        return RecordingGenerator(own, outer.recording)
    if isinstance(outer, ReplayGenerator) and (outer.diverged is None or outer.fallback is None):
        return outer
    return own


def _charge(caller: Run | None, run: Any) -> None:
    """The helper's tokens and requests count in the caller's result (its account has had
    them since each request was reserved)."""
    final = run.final
    if caller is None or final is None:
        return
    caller._usage = caller._usage + final.usage
    caller._requests += run._requests


def _attach(caller: Run | None, call_id: str, result: Any) -> None:
    """The helper's result under the caller's exchange whose answer made the call."""
    if caller is None or result is None:
        return
    for exchange in reversed(caller.exchanges):
        if any(call.id == call_id for call in exchange.answer.tool_calls):
            exchange.helpers[call_id] = result
            return


def _answer(name: str, result: Any, typed: bool) -> ToolResult | str:
    stop = result.stop_reason
    if stop == "failed":
        error = result.error
        why = f"{type(error).__name__}: {error}" if error is not None else "unknown error"
        from .redact import redact_secrets

        return error_result(f"{name} failed: {redact_secrets(why)[:2_000]}")
    if stop == "cancelled":
        return error_result(f"{name} was stopped before it answered")
    detail = result.stop_detail or stop.replace("_", " ")
    if typed:
        if stop not in ("finished", "terminated") or not result.has_output:
            # has_output, never ``output is None``: a valid answer may be None itself
            return error_result(f"{name} stopped ({detail}) without a typed answer")
        from .output import to_json

        text = json.dumps(to_json(result.output), ensure_ascii=False)
        return ToolResult((TextPart(text),), value=result.output)
    text = result.text or f"({name} gave no answer)"
    if stop in ("max_steps", "length", "budget", "repeated_call"):
        text += f"\n\n({name} stopped early: {detail})"
    return text  # plain text: the loop turns it into the result without a thread
