"""One run of the agent loop: stream a turn, validate calls, approve, execute, repeat.

A :class:`Run` is a task on the running loop that emits :mod:`nbagent.events` into a queue.
It owns the cancellation rule: whatever point a cancel lands at, every call in the history ends
up with exactly one result.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import threading
import time
import traceback
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from .approval import ApprovalRequest, Approver, Decision
from .content import Part, TextPart, ToolResult, error_result, to_tool_result, validate_result
from .errors import AgentError, ArgumentsError
from .events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    AssistantTextDelta,
    CallStatus,
    ReasoningTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunResult,
    RunStarted,
    StepFinished,
    StepRetried,
    StepStarted,
    StopReason,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolCallStarted,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from .generation import (
    Answer,
    Options,
    ReasoningDelta,
    Request,
    StreamRetry,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputStart,
    Usage,
    parse_partial_json,
)
from .messages import AssistantMessage, ToolMessage, ToolResultPart, UserMessage
from .tools import Tool, ToolCall, ToolContext, ToolInput, validate_arguments

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["CANCEL_GRACE", "Run"]

log = logging.getLogger("nbagent")
_run_ids = itertools.count(1)
#: Decisions made by a rule rather than a person (see Decision.by).
_POLICIES = frozenset({"auto", "deny", "rule", "script", "error", "always"})
#: How long a cancelled or timed-out async tool may take to finish before it is abandoned.
CANCEL_GRACE = 1.0
#: Threads for sync tools. asyncio's default pool has min(32, CPUs + 4) threads (6 on two
#: cores), which would serialize a batch of eight slow sync tools into two rounds.
TOOL_THREADS = 64
_pool: ThreadPoolExecutor | None = None


def _tool_threads() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(TOOL_THREADS, thread_name_prefix="nbagent-tool")
    return _pool


class Run:
    """One run in progress: iterate :meth:`events`, ``await run.result()``, or :meth:`cancel`."""

    def __init__(
        self,
        agent: Agent,
        prompt: UserMessage,
        approver: Approver,
        max_steps: int,
        tools: dict[str, Tool],
        options: Options,
    ) -> None:
        self.agent = agent
        self.id = f"run-{next(_run_ids)}"
        self.prompt = prompt
        self.approver = approver
        self.max_steps = max_steps
        self.tools = tools
        self.options = options
        self.definitions = tuple(t.definition for t in tools.values())
        self._queue: asyncio.Queue[AgentEvent | None] = asyncio.Queue()
        self._task: asyncio.Task[RunResult] | None = None
        self._start_index = len(agent.messages)
        self._answer: Answer | None = None
        self._open_calls: tuple[ToolCall, ...] = ()
        self._finished: dict[str, ToolResultPart] = {}
        self._usage = Usage()
        self._steps = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.final: RunResult | None = None
        self._keep_events = True

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._main(), name=self.id)
        self._task.add_done_callback(self._after)

    def _after(self, task: asyncio.Task[RunResult]) -> None:
        """A task cancelled before its first step never ran ``_main``: end the run here."""
        if self.final is None:
            self.final = self._result("cancelled")
            self.emit(RunCancelled(self.final))
            self._close()

    def emit(self, event: AgentEvent) -> None:
        if self._keep_events:
            self._queue.put_nowait(event)

    def discard_events(self) -> None:
        """Nobody will read :meth:`events`: keep none (``Agent.run`` only wants the result)."""
        self._keep_events = False
        while not self._queue.empty():
            self._queue.get_nowait()

    def done(self) -> bool:
        return self._task is not None and self._task.done()

    def cancel(self) -> bool:
        """Ask the run to stop; safe from any thread and after the run ended."""
        task, loop = self._task, self._loop
        if task is None or loop is None or task.done():
            return False
        try:
            loop.call_soon_threadsafe(task.cancel)
        except RuntimeError:
            return False
        return True

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Every event of the run, ending after RunFinished / RunFailed / RunCancelled."""
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event

    async def result(self) -> RunResult:
        """Wait for the end; a cancelled run returns its result with ``stop_reason="cancelled"``.

        If the waiting task itself is cancelled, the run is cancelled too (and waited for).
        """
        task = self._task
        assert task is not None
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                if task.cancelled() and self.final is not None:
                    return self.final
                if not task.cancelled():
                    return task.result()
            else:
                task.cancel()
                await asyncio.wait({task}, timeout=CANCEL_GRACE * 2)
            raise

    # --- the loop ---------------------------------------------------------------------------

    async def _main(self) -> RunResult:
        agent = self.agent
        messages = agent.messages
        messages.append(self.prompt)
        model_name = getattr(agent.generator, "model", "")
        self.emit(RunStarted(self.id, self.prompt.text, str(model_name)))
        stop: StopReason = "max_steps"
        try:
            for step in range(1, self.max_steps + 1):
                self._steps = step
                self.emit(StepStarted(step))
                answer = await self._stream_turn(step)
                self._usage = self._usage + answer.usage
                if not answer.ok:
                    self._keep_answer_text(answer)
                    self.emit(StepFinished(step, answer.usage, _reason(answer), 0))
                    if answer.status == "length":
                        stop = "length"
                        break
                    error = answer.error or AgentError(
                        f"the model stopped abnormally ({_reason(answer)})"
                    )
                    return self._end_failed(error)
                calls = answer.tool_calls()
                messages.append(answer.message())
                self.emit(StepFinished(step, answer.usage, _reason(answer), len(calls)))
                if not calls:
                    if answer.finish is not None and answer.finish.reason == "pause":
                        continue  # send the paused turn back so the provider continues it
                    stop = "finished"
                    break
                self._open_calls = calls
                self._finished = {}
                results = await self._run_batch(step, calls)
                messages.append(ToolMessage(tuple(part for part, _ in results)))
                self._open_calls = ()
                if all(r.terminate and not r.is_error for _, r in results):
                    stop = "terminated"
                    break
        except asyncio.CancelledError:
            self._repair_after_cancel()
            result = self._result("cancelled")
            self.final = result
            self.emit(RunCancelled(result))
            self._close()
            raise
        except Exception as exc:  # a provider error, a bug in a callback: end cleanly, say why
            self._repair_after_cancel()
            return self._end_failed(exc)
        result = self.final = self._result(stop)
        self.emit(RunFinished(result))
        self._close()
        return result

    def _end_failed(self, error: BaseException) -> RunResult:
        result = self.final = self._result("failed", error)
        self.emit(RunFailed(error, result))
        self._close()
        return result

    def _close(self) -> None:
        self.agent._running = False
        self._queue.put_nowait(None)

    def _result(self, stop: StopReason, error: BaseException | None = None) -> RunResult:
        new = tuple(self.agent.messages[self._start_index :])
        text = ""
        for message in reversed(new):
            if isinstance(message, AssistantMessage) and message.text:
                text = message.text
                break
        return RunResult(text, new, self._steps, self._usage, stop, error)

    def _keep_answer_text(self, answer: Answer) -> None:
        """Keep what the person already saw of a broken answer, without its (unrunnable) calls."""
        partial = answer.message(with_calls=False)
        if any(isinstance(p, TextPart) and p.text for p in partial.content):
            self.agent.messages.append(
                AssistantMessage(tuple(p for p in partial.content if isinstance(p, TextPart)))
            )

    def _repair_after_cancel(self) -> None:
        """Leave a history every provider accepts: each call answered exactly once."""
        if self._answer is not None and self._answer.status == "streaming":
            self._answer.abort()
            self._keep_answer_text(self._answer)
        if self._open_calls:
            parts = []
            for call in self._open_calls:
                part = self._finished.get(call.id)
                if part is None:
                    part = ToolResultPart(
                        call.id,
                        call.name,
                        (TextPart("the run was cancelled before this call finished"),),
                        True,
                    )
                parts.append(part)
            self.agent.messages.append(ToolMessage(tuple(parts)))
            self._open_calls = ()
        self._answer = None

    # --- one model turn ---------------------------------------------------------------------

    async def _stream_turn(self, step: int) -> Answer:
        agent = self.agent
        request = Request(
            messages=tuple(agent.messages),
            model=getattr(agent.generator, "model", ""),
            tools=self.definitions,
            instructions=agent.instructions,
            options=self.options,
        )
        answer = Answer()
        self._answer = answer
        inputs: dict[str, str] = {}
        names: dict[str, str] = {}
        stream = agent.generator.stream(request)
        try:
            async for event in stream:
                answer.add(event)
                if isinstance(event, TextDelta):
                    if event.text:
                        self.emit(AssistantTextDelta(step, event.text))
                elif isinstance(event, ToolInputDelta):
                    text = inputs[event.call_id] = inputs.get(event.call_id, "") + event.delta
                    name = names.get(event.call_id, "")
                    delta_event = ToolArgumentsDelta(event.call_id, name, event.delta, text)
                    self.emit(delta_event)
                    await self._input_callback(
                        name, "on_input_delta", event.call_id, text, event.delta, delta_event
                    )
                elif isinstance(event, ToolInputStart):
                    names[event.call_id] = event.name
                    found = self.tools.get(event.name)
                    self.emit(
                        ToolCallStarted(
                            step,
                            event.call_id,
                            event.name,
                            found.title if found else None,
                            event.provider_executed,
                        )
                    )
                    await self._input_callback(event.name, "on_input_start", event.call_id, "", "")
                elif isinstance(event, ToolCallReceived):
                    call = event.call
                    await self._input_callback(
                        call.name, "on_input_available", call.id, call.arguments, ""
                    )
                elif isinstance(event, ReasoningDelta) and event.text:
                    self.emit(ReasoningTextDelta(step, event.text))
                elif isinstance(event, StreamRetry):
                    inputs.clear()
                    names.clear()
                    self.emit(StepRetried(step, event.reason, event.attempt, event.delay))
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        answer.end()
        self._answer = None
        return answer

    async def _input_callback(
        self,
        name: str,
        hook: str,
        call_id: str,
        text: str,
        delta: str,
        delta_event: ToolArgumentsDelta | None = None,
    ) -> None:
        found = self.tools.get(name)
        callback = getattr(found, hook, None) if found else None
        if callback is None:
            return
        if delta_event is not None:
            partial = delta_event.partial
        else:
            partial = parse_partial_json(text) if text else None
        info = ToolInput(call_id, name, text, delta, partial)
        try:
            outcome = callback(info)
            if asyncio.iscoroutine(outcome):
                await outcome
        except Exception:  # a display callback must never break the run
            log.exception("%s callback of tool %r failed", hook, name)

    # --- one batch of calls -----------------------------------------------------------------

    async def _run_batch(
        self, step: int, calls: tuple[ToolCall, ...]
    ) -> list[tuple[ToolResultPart, ToolResult]]:
        limit = self.agent.max_concurrency
        semaphore = asyncio.Semaphore(limit) if limit else None
        sequential: dict[str, asyncio.Lock] = {}
        if len(calls) == 1:  # the common case: no task to spawn and gather
            return [await self._handle_call(step, calls[0], semaphore, sequential)]
        tasks = [
            asyncio.ensure_future(self._handle_call(step, call, semaphore, sequential))
            for call in calls
        ]
        try:
            done = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=CANCEL_GRACE)
            raise
        return list(done)

    async def _handle_call(
        self,
        step: int,
        call: ToolCall,
        semaphore: asyncio.Semaphore | None,
        sequential: dict[str, asyncio.Lock],
    ) -> tuple[ToolResultPart, ToolResult]:
        started = time.monotonic()
        found = self.tools.get(call.name)
        input_value: Any = None
        status: CallStatus = "done"
        trace: str | None = None
        try:
            input_value = validate_arguments(call)
            if found is not None:
                self.agent._schemas[call.name].validate(input_value)
        except ArgumentsError as exc:
            result: ToolResult | None = error_result(
                f"Invalid arguments for {call.name}, nothing was run; "
                f"fix them and call again.\n{exc}"
            )
            status = "invalid"
        else:
            result = None
        self.emit(ToolCallReady(step, call, input_value))
        if found is None:
            result = error_result(
                f"Unknown tool {call.name!r}. Available tools: "
                f"{', '.join(sorted(self.tools)) or 'none'}."
            )
            status = "invalid"
        elif found.execute is None:
            result = error_result(f"Tool {call.name!r} is run by the provider, not by this agent.")
            status = "invalid"
        if result is None and found is not None:
            decision = await self._approve(found, call, input_value)
            if decision is not None and not decision.approved:
                reason = decision.reason or "no reason given"
                if decision.by in _POLICIES:
                    text = f"This call to {call.name} was not run: {reason}"
                else:
                    text = f"The person denied this call to {call.name}: {reason}"
                result = error_result(text)
                status = "denied"
        if result is None and found is not None:
            lock = (
                sequential.setdefault(call.name, asyncio.Lock())
                if (found.execution_mode == "sequential")
                else None
            )
            result, status, trace = await self._execute(found, call, input_value, semaphore, lock)
        assert result is not None
        part = ToolResultPart(call.id, call.name, result.content, result.is_error)
        self._finished[call.id] = part
        self.emit(ToolFinished(call, result, status, time.monotonic() - started, trace))
        return part, result

    async def _approve(self, found: Tool, call: ToolCall, input_value: Any) -> Decision | None:
        """None when no approval is needed; else the decision for exactly this call."""
        try:
            needed = await found.approval_needed(input_value)
        except Exception as exc:  # a broken predicate must not let the call through
            return Decision(False, f"the approval rule of {call.name} failed: {exc}", by="error")
        if not needed:
            return None
        request = ApprovalRequest.for_call(call, input_value, found.title)
        known = getattr(self.approver, "known_decision", None)
        decision: Decision | None = known(request) if known is not None else None
        if decision is not None:  # e.g. "always allow": nobody needs to be asked
            self.emit(ApprovalResolved(call.id, decision))
            return decision
        self.emit(ApprovalRequested(request))
        try:
            decision = await self.approver.decide(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            decision = Decision(False, f"the approver failed: {exc}", by="error")
        if not isinstance(decision, Decision):
            decision = Decision(False, "the approver returned no decision", by="error")
        self.emit(ApprovalResolved(call.id, decision))
        return decision

    async def _execute(
        self,
        found: Tool,
        call: ToolCall,
        input_value: Any,
        semaphore: asyncio.Semaphore | None,
        lock: asyncio.Lock | None,
    ) -> tuple[ToolResult, CallStatus, str | None]:
        async with semaphore or nullcontext(), lock or nullcontext():
            return await self._execute_now(found, call, input_value)

    async def _execute_now(
        self, found: Tool, call: ToolCall, input_value: Any
    ) -> tuple[ToolResult, CallStatus, str | None]:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        on_loop = threading.get_ident()

        def emit_progress(update: ToolResult) -> None:
            event = ToolProgress(call.id, update, time.monotonic() - started)
            if threading.get_ident() == on_loop:
                self.emit(event)
            else:
                loop.call_soon_threadsafe(lambda: None if context._done else self.emit(event))

        context = ToolContext(call, input_value, found, emit_progress)
        execute = found.execute
        assert execute is not None
        self.emit(ToolStarted(call))
        if asyncio.iscoroutinefunction(execute):
            work: asyncio.Future[Any] = asyncio.ensure_future(execute(context))
        else:
            ctx = contextvars.copy_context()
            work = loop.run_in_executor(_tool_threads(), ctx.run, execute, context)
        timeout = found.timeout if found.timeout is not None else self.agent.tool_timeout
        try:
            done, _ = await asyncio.wait({work}, timeout=timeout)
        except asyncio.CancelledError:
            context._request_cancel()
            work.cancel()
            await asyncio.wait({work}, timeout=CANCEL_GRACE)
            context._finish()
            raise
        if not done:
            context._request_cancel()
            work.cancel()
            await asyncio.wait({work}, timeout=CANCEL_GRACE)
            context._finish()
            return (
                error_result(f"{call.name} did not finish within {timeout:g} s and was stopped."),
                "timeout",
                None,
            )
        context._finish()
        try:
            value = work.result()
        except asyncio.CancelledError:
            return error_result(f"{call.name} was cancelled."), "cancelled", None
        except Exception as exc:
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            message = f"{call.name} failed: {type(exc).__name__}: {exc}"
            return error_result(message, value=exc), "error", trace
        try:
            result = self._model_output(found, value)
        except Exception as exc:
            trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            return error_result(f"{call.name} returned an unusable result: {exc}"), "error", trace
        return result, ("error" if result.is_error else "done"), None

    @staticmethod
    def _model_output(found: Tool, value: Any) -> ToolResult:
        if found.to_model_output is not None:
            converted = to_tool_result(found.to_model_output(value))
            result = ToolResult(converted.content, converted.is_error, converted.terminate, value)
        else:
            result = to_tool_result(value)
        return validate_result(result)


def _reason(answer: Answer) -> Any:
    return answer.finish.reason if answer.finish else None


def _as_user_message(prompt: str | UserMessage | Sequence[str | Part]) -> UserMessage:
    if isinstance(prompt, UserMessage):
        return prompt
    if isinstance(prompt, str):
        return UserMessage((TextPart(prompt),))
    return UserMessage(tuple(TextPart(p) if isinstance(p, str) else p for p in prompt))
