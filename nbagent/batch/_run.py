"""One input, run to a row: its own conversation, a time limit, and retries when the provider
was only busy.

Every run gets a fork of one prepared agent (same model, tools, settings; a conversation of its
own), so runs never share a history and the caller's agent is never touched. A run that failed
for a reason that may pass (429 rate limit, 5xx, a dropped connection: errors marked
``retryable``) is tried again after a backoff, up to ``retries`` times; a 429 also pauses the
start of every other run for that long, so a batch that hits the provider's rate limit slows
down instead of failing row after row. Any other failure is the row's error.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import RateLimitError
from ..output._spec import OutputSpec, to_json
from ._inputs import Item
from ._rows import BatchRow, describe_error

if TYPE_CHECKING:
    from ..approvals.approval import Approver
    from ..events import RunResult
    from ..generation import Generator, Options
    from ..limits import Limits
    from ..loop.run import Run
    from ..messages import Message
    from ..tools import Tool

__all__ = ["Gate", "MappedAgent", "RunPlan", "run_item"]


class MappedAgent(Protocol):
    """The agent a batch runs once per input, as the batch uses it (:class:`~nbagent.Agent` is
    the one; ``Agent.map`` hands itself over): forked for each run and started, and read for
    the checkpoint's fingerprint and the spec Dask workers rebuild it from. The batch names this
    Protocol, not the class, so the agent may import the batch and not the other way round."""

    generator: Generator
    tools: dict[str, Tool]
    instructions: str | None
    messages: list[Message]
    approver: Approver
    options: Options
    limits: Limits
    max_steps: int
    max_concurrency: int | None
    tool_timeout: float | None
    approval_timeout: float | None

    def fork(self) -> MappedAgent: ...

    def add_tool(self, new: Tool) -> None: ...

    def start(
        self,
        prompt: str,
        *,
        approver: Approver | None = None,
        max_steps: int | None = None,
        tools: Iterable[str] | None = None,
        options: Options | None = None,
        output: Any = None,
    ) -> Run: ...


#: Longest pause between two attempts of one row, whatever the backoff says.
MAX_RETRY_DELAY = 60.0


class Gate:
    """Holds back the start of runs while the provider asked everyone to slow down."""

    def __init__(self) -> None:
        self.until = 0.0
        self.pauses = 0

    def pause(self, seconds: float) -> None:
        self.until = max(self.until, time.monotonic() + seconds)
        self.pauses += 1

    async def wait(self) -> None:
        while True:
            delay = self.until - time.monotonic()
            if delay <= 0:
                return
            await asyncio.sleep(delay)


@dataclass
class RunPlan:
    """How each input runs: the prepared agent and the per-run settings."""

    agent: MappedAgent
    approver: Approver
    max_steps: int | None = None
    tools: list[str] | None = None
    options: Options | None = None
    timeout: float | None = None
    retries: int = 3
    retry_delay: float = 2.0
    output: OutputSpec | None = None
    keep_history: bool = False

    def fresh_agent(self) -> MappedAgent:
        agent = self.agent.fork()
        if not self.keep_history:
            agent.messages = []
        return agent


async def run_item(plan: RunPlan, item: Item, gate: Gate | None = None) -> BatchRow:
    """Run one input to its row. Never raises for a failed run; a cancel makes a "cancelled"
    row (the caller stopped the batch) unless it arrived before the run began."""
    if item.problem is not None:
        return BatchRow(item.position, item.key, item.prompt, "failed", error=item.problem)
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        if gate is not None:
            await gate.wait()
        result, timed_out = await _attempt(plan, item)
        error = result.error
        retryable = (
            result.stop_reason == "failed" and bool(getattr(error, "retryable", False))
        ) and attempts <= plan.retries
        if not retryable:
            break
        delay = min(MAX_RETRY_DELAY, plan.retry_delay * 2 ** (attempts - 1))
        delay *= 0.75 + random.random() / 2  # spread the retries of runs that failed together
        if gate is not None and isinstance(error, RateLimitError):
            gate.pause(delay)
        await asyncio.sleep(delay)
    return _row(plan, item, result, attempts, time.monotonic() - started, timed_out)


async def _attempt(plan: RunPlan, item: Item) -> tuple[RunResult, bool]:
    agent = plan.fresh_agent()
    run = agent.start(
        item.prompt,
        approver=plan.approver,
        max_steps=plan.max_steps,
        tools=plan.tools,
        options=plan.options,
        output=plan.output,  # the run's own typed answer: natively, or its answer tool
    )
    run.discard_events()
    try:
        if plan.timeout is None:
            return await run.result(), False
        return await asyncio.wait_for(run.result(), plan.timeout), False
    except asyncio.TimeoutError:
        final = run.final
        assert final is not None  # the run was cancelled and waited for
        return final, True
    except asyncio.CancelledError:
        final = run.final
        if final is None:
            raise
        return final, False


def _row(
    plan: RunPlan,
    item: Item,
    result: RunResult,
    attempts: int,
    seconds: float,
    timed_out: bool,
) -> BatchRow:
    usage = result.usage
    stop = result.stop_reason
    error: str | None = None
    status = "done"
    output = output_json = None
    answered = False
    if timed_out:
        status, error = "failed", f"timed out after {plan.timeout:g} s (the run was cancelled)"
    elif stop == "cancelled":
        status, error = "cancelled", "stopped before the run ended"
    elif stop == "failed":
        status, error = "failed", describe_error(result.error) or "the run failed"
    elif stop == "budget":
        detail = result.stop_detail or "its budget was spent"
        if not result.exchanges:  # refused before its first request: it never ran
            status, error = "not run", detail
        else:
            status, error = "failed", f"the run stopped before it answered: {detail}"
    elif plan.output is not None:
        # a typed run finishes only on an accepted answer; it may also end on a tool's
        # terminate, with or without one
        found = stop == "finished" or (
            stop == "terminated" and plan.output.extract(result.messages)[0]
        )
        if not found:
            status = "failed"
            error = f"no structured answer: the run ended ({stop}) without one"
        else:
            output, output_json = result.output, to_json(result.output)
            answered = True
    elif stop in ("max_steps", "length", "repeated_call"):
        why = {
            "max_steps": "at the step limit",
            "length": "at the model's token limit",
            "repeated_call": "after the model repeated the same call without progress",
        }[stop]
        status, error = "failed", f"the run stopped {why} before it answered"
    return BatchRow(
        item.position,
        item.key,
        item.prompt,
        status,  # type: ignore[arg-type]
        text=result.text,
        output=output,
        output_json=output_json,
        has_output=answered,
        steps=result.steps,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        seconds=seconds,
        stop_reason=stop,
        error=error,
        attempts=attempts,
        result=_portable(result),
    )


def _portable(result: RunResult) -> RunResult:
    """The result with an error that survives pickling (it may travel back from a worker)."""
    import pickle

    error = result.error
    if error is None:
        return result
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        from dataclasses import replace

        from ..errors import NbagentError

        return replace(result, error=NbagentError(describe_error(error) or "the run failed"))
    return result
