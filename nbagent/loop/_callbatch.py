"""The calls of one answer, as a batch: each checked, run or refused, and answered exactly once.

A call's arguments are validated against its tool's schema here (the model's text was already
parsed and bounded by :mod:`nbagent._history`); the repeat guard may hold it
(:mod:`nbagent.loop._repeats`); a valid call goes through hooks, approval and execution
(:mod:`nbagent.loop._calls`). Each call emits ToolCallReady, then ToolFinished with its result. The
calls run concurrently (at most ``Agent.max_concurrency`` at once); one that stops the run
(a tool raising ``KeyboardInterrupt`` …) cancels the others, which the run's repair answers.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from .._history import CheckedCall
from ..content import ToolResult, error_result
from ..errors import ArgumentsError
from ..events import ToolCallReady, ToolFinished
from ..messages import ToolResultPart
from ..tools import _json_type
from ._calls import run_valid_call
from ._ending import aborted
from ._execution import CANCEL_GRACE, Outcome, copy_json
from ._repeats import RepeatGuard

if TYPE_CHECKING:
    from ._loopstate import LoopState

__all__ = ["run_batch"]


async def run_batch(
    run: LoopState, repeats: RepeatGuard, step: int, calls: list[CheckedCall]
) -> list[tuple[ToolResultPart, ToolResult]]:
    """Each call's part for the history and its result, in the answer's order; ``repeats``
    is the run's repeat guard."""
    limit = run.agent.max_concurrency
    semaphore = asyncio.Semaphore(limit) if limit else None
    sequential: dict[str, asyncio.Lock] = {}
    if len(calls) == 1:  # the common case: no task to spawn and gather
        return [await _handle_call(run, repeats, step, calls[0], semaphore, sequential)]
    tasks = [
        asyncio.ensure_future(_handle_call(run, repeats, step, call, semaphore, sequential))
        for call in calls
    ]
    try:
        done = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=CANCEL_GRACE * 2)
        raise
    return list(done)


async def _handle_call(
    run: LoopState,
    repeats: RepeatGuard,
    step: int,
    checked: CheckedCall,
    semaphore: asyncio.Semaphore | None,
    sequential: dict[str, asyncio.Lock],
) -> tuple[ToolResultPart, ToolResult]:
    call = checked.call
    try:
        return await _handle_call_now(run, repeats, step, checked, semaphore, sequential)
    except (Exception, asyncio.CancelledError, GeneratorExit):
        raise
    except BaseException as exc:  # from a predicate, to_model_output …: never out as it is
        raise aborted(call.name, exc) from exc


async def _handle_call_now(
    run: LoopState,
    repeats: RepeatGuard,
    step: int,
    checked: CheckedCall,
    semaphore: asyncio.Semaphore | None,
    sequential: dict[str, asyncio.Lock],
) -> tuple[ToolResultPart, ToolResult]:
    started = time.monotonic()
    call = checked.call
    found = run.tools.get(call.name)
    input_value = checked.input
    outcome: Outcome | None = None
    if checked.problem is not None:
        outcome = Outcome(error_result(checked.problem), "invalid")
    else:
        try:
            if not isinstance(input_value, dict):
                raise ArgumentsError(
                    f"arguments of {call.name!r} must be a JSON object, "
                    f"got {_json_type(input_value)}"
                )
            if found is not None:
                run.agent._schemas[call.name].validate(input_value)
        except ArgumentsError as exc:
            outcome = Outcome(
                error_result(
                    f"Invalid arguments for {call.name}, nothing was run; "
                    f"fix them and call again.\n{exc}"
                ),
                "invalid",
            )
    if run._heard:  # the timeline does not read it: nobody else, no event (nor its copy)
        run.emit(ToolCallReady(step, call, copy_json(input_value)))
    outcome = await repeats.hold(run, step, checked) or outcome
    if outcome is None:
        outcome = await run_valid_call(run, found, call, input_value, semaphore, sequential)
    result, original = repeats.seen(step, checked, outcome)  # and the limits
    part = ToolResultPart(call.id, call.name, result.content, result.is_error)
    run._finished[call.id] = part
    elapsed = time.monotonic() - started
    repeats.fold(run.emit, checked)
    run.emit(
        ToolFinished(
            call, result, outcome.status, elapsed, outcome.trace, outcome.abandoned, original
        )
    )
    if outcome.raised is not None:
        raise aborted(call.name, outcome.raised) from outcome.raised
    return part, result
