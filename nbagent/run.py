"""One run of the agent loop: stream a turn, validate calls, approve, execute, repeat.

A :class:`Run` is a task on the running loop that emits :mod:`nbagent.events` into a queue.
It owns two rules. Whatever point a cancel lands at, every call in the history ends up with
exactly one result. And nothing user code raises escapes the run: exceptions become error
results or a failed run, ``KeyboardInterrupt``/``SystemExit`` from a tool stop the run as
"failed" (see :mod:`nbagent._execution`), and the agent is left idle.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._calls import run_valid_call
from ._eventqueue import EventQueue
from ._execution import CANCEL_GRACE, Outcome, copy_json
from ._history import CheckedCall, check_calls, clean_text, history_message
from ._repeats import RepeatGuard
from ._textbuf import TextBuffer
from ._timing import TimelineBuilder
from .approval import Approver
from .content import Part, TextPart, ToolResult, error_result
from .errors import AgentError, ArgumentsError, RunAbortedError
from .events import (
    AbandonedCall,
    AgentEvent,
    AssistantTextDelta,
    ReasoningTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunResult,
    RunStarted,
    StepFinished,
    StepPaused,
    StepResumed,
    StepRetried,
    StepStarted,
    StopReason,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolCallStarted,
    ToolFinished,
    ToolProgress,
)
from .exchange import Exchange
from .generation import (
    Answer,
    Generator,
    Options,
    ReasoningDelta,
    Request,
    StreamRetry,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputStart,
    Usage,
)
from .messages import AssistantMessage, Message, ToolMessage, ToolResultPart, UserMessage
from .redact import redact_secrets
from .stepping import Resume, StepEditError, StepPause, edited_results
from .tools import Tool, ToolCall, ToolInput, _json_type

if TYPE_CHECKING:
    from ._loopstate import AgentState as Agent  # what a run reads from its agent
    from .limits import Budget

__all__ = ["CANCEL_GRACE", "Run"]

log = logging.getLogger("nbagent")
_run_ids = itertools.count(1)


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
        budget: Budget | None = None,
        *,
        step: bool = False,
        continuing: bool = False,
    ) -> None:
        self.agent = agent
        self.id = f"run-{next(_run_ids)}"
        self.prompt = prompt
        self.approver = approver
        self.max_steps = max_steps
        self.tools = tools
        self.options = options
        self.limits = agent.limits
        self.definitions = tuple(t.definition for t in tools.values())
        self._queue = EventQueue(self.limits.event_backlog)
        self._task: asyncio.Task[RunResult] | None = None
        self._start_index = len(agent.messages)
        self._answer: Answer | None = None
        self._open_calls: tuple[ToolCall, ...] = ()
        self._finished: dict[str, ToolResultPart] = {}
        self._abandoned: dict[str, AbandonedCall] = {}
        self._taken: set[str] = set()
        self._silenced: set[tuple[str, str]] = set()  # on_input_* callbacks that failed
        self._usage = Usage()
        self._steps = 0
        self._requests = 0  # model requests sent, retries included (what Budget counts)
        self._loop: asyncio.AbstractEventLoop | None = None
        self.final: RunResult | None = None
        self._keep_events = True
        self._timeline = TimelineBuilder()
        self._observers = tuple(agent.observers)
        self._budget = budget
        #: Each model request of the run and its answer, as they happen (see nbagent.exchange).
        self.exchanges: list[Exchange] = []
        #: Step mode: the approver's ``pause`` gives a Resume at each pause (nbagent.stepping).
        self._pauser: Callable[[StepPause], Any] | None = (
            getattr(approver, "pause", None) if step else None
        )
        self._continuing = continuing  # no new prompt: the run answers the history as it is
        self._repeats = RepeatGuard(self.limits, agent.generator)

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
        self._timeline.add(event)
        for observer in self._observers:
            try:
                observer(self.id, event)
            except Exception:  # an observer (telemetry, a log) must never break the run
                log.exception("an observer of %s failed on %s", self.id, type(event).__name__)
        if self._keep_events:
            self._queue.put(event)

    def discard_events(self) -> None:
        """Nobody will read :meth:`events`: keep none (``Agent.run`` only wants the result)."""
        self._keep_events = False
        self._queue.clear()

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
        """Every event of the run, ending after RunFinished / RunFailed / RunCancelled.

        A reader that falls behind gets consecutive deltas merged (see ``Limits.event_backlog``).
        """
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
        if not self._continuing:
            messages.append(self.prompt)
        self._taken = _call_ids(messages)
        model_name = getattr(agent.generator, "model", "")
        self.emit(RunStarted(self.id, self.prompt.text, str(model_name), agent.conversation_id))
        stop: StopReason = "max_steps"
        try:
            for step in range(1, self.max_steps + 1):
                if self._over_budget(step):
                    stop = "budget"
                    break
                self._steps = step
                self.emit(StepStarted(step))
                self._requests += 1
                try:
                    answer = await self._stream_turn(step)
                except _BudgetSpent as spent:  # a retry the budget cannot pay for: not sent
                    self._answer = None
                    self._usage = self._usage + spent.answer.usage
                    self._keep_answer_text(spent.answer)
                    self.emit(StepFinished(step, spent.answer.usage, None, 0))
                    stop = "budget"
                    break
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
                checked = check_calls(answer.tool_calls(), self.limits, self.tools)
                message = history_message(answer.message(), checked, self.limits)
                messages.append(message)
                self._taken |= _call_ids([message])
                self.emit(StepFinished(step, answer.usage, _reason(answer), len(checked)))
                if not checked:
                    if answer.finish is not None and answer.finish.reason == "pause":
                        continue  # send the paused turn back so the provider continues it
                    stop = "finished"
                    break
                self._open_calls = tuple(c.call for c in checked)
                self._finished = {}
                if self._pauser is not None:
                    calls = tuple(c.call for c in checked)
                    resume = await self._pause(StepPause(self.id, step, "calls", calls=calls))
                    if resume.action == "stop":
                        raise asyncio.CancelledError  # every open call is answered: _repair
                results = await self._run_batch(step, checked)
                messages.append(ToolMessage(tuple(part for part, _ in results)))
                self._open_calls = ()
                if self._repeats.stopped or all(r.terminate and not r.is_error for _, r in results):
                    stop = "repeated_call" if self._repeats.stopped else "terminated"
                    break
        except asyncio.CancelledError:
            self._repair("the run was cancelled")
            result = self._result("cancelled")
            self.final = result
            self.emit(RunCancelled(result))
            self._close()
            raise
        except RunAbortedError as exc:
            self._repair(f"the run was stopped: {exc}")
            return self._end_failed(exc)
        except Exception as exc:  # a provider error, a bug in a callback: end cleanly, say why
            self._repair(f"the run failed: {type(exc).__name__}")
            return self._end_failed(exc)
        except GeneratorExit:
            raise
        except BaseException as exc:  # KeyboardInterrupt, SystemExit … from a callback
            aborted = _aborted(None, exc)
            self._repair(f"the run was stopped: {aborted}")
            return self._end_failed(aborted)
        result = self.final = self._result(stop)
        self.emit(RunFinished(result))
        self._close()
        return result

    def _over_budget(self, step: int) -> bool:
        """Stop before a request the run's budget cannot pay for (see :class:`Budget`)."""
        budget = self._budget
        if budget is None:
            return False
        if budget.requests is not None and self._requests >= budget.requests:
            return True
        return budget.tokens is not None and self._usage.total_tokens >= budget.tokens

    def _end_failed(self, error: BaseException) -> RunResult:
        result = self.final = self._result("failed", error)
        self.emit(RunFailed(error, result))
        self._close()
        return result

    def _close(self) -> None:
        self.agent._running = False
        self._queue.put(None)

    def _result(self, stop: StopReason, error: BaseException | None = None) -> RunResult:
        new = tuple(self.agent.messages[self._start_index :])
        text = ""
        for message in reversed(new):
            if isinstance(message, AssistantMessage) and message.text:
                text = message.text
                break
        return RunResult(
            text,
            new,
            self._steps,
            self._usage,
            stop,
            error,
            self._timeline,
            tuple(self.exchanges),
            self.id,
            self.agent,
        )

    def _keep_answer_text(self, answer: Answer) -> None:
        """Keep what the person already saw of a broken answer, without its (unrunnable) calls."""
        partial = answer.message(with_calls=False)
        texts = tuple(
            TextPart(clean_text(p.text))
            for p in partial.content
            if isinstance(p, TextPart) and p.text
        )
        if texts:
            self.agent.messages.append(AssistantMessage(texts))

    def _repair(self, why: str) -> None:
        """Leave a history every provider accepts: each call answered exactly once."""
        if self._answer is not None and self._answer.status == "streaming":
            self._answer.abort()
            self._keep_answer_text(self._answer)
        if self._open_calls:
            parts = []
            for call in self._open_calls:
                part = self._finished.get(call.id)
                if part is None:
                    abandoned = self._abandoned.get(call.id)
                    text = f"{why} before this call finished"
                    if abandoned is not None:
                        text += "; its function is still running and its result will be ignored"
                    result = error_result(text + ".")
                    part = ToolResultPart(call.id, call.name, result.content, True)
                    self.emit(ToolFinished(call, result, "cancelled", 0.0, None, abandoned))
                parts.append(part)
            self.agent.messages.append(ToolMessage(tuple(parts)))
            self._open_calls = ()
        self._answer = None

    # --- one model turn ---------------------------------------------------------------------

    async def _stream_turn(self, step: int) -> Answer:
        agent = self.agent
        generator: Generator = agent.generator
        request = Request(
            messages=tuple(agent.messages),
            model=getattr(generator, "model", ""),
            tools=self.definitions,
            instructions=agent.instructions,
            options=self.options,
        )
        edits: list[str] = []
        if self._pauser is not None:
            request, generator, edits = await self._pause_before(step, request, generator)
        started = time.monotonic()
        retries = 0
        try:
            answer, retries = await self._stream_answer(step, request, generator)
        except BaseException as exc:
            failed = self._answer or Answer(self._taken)
            self._record(step, request, generator, failed, retries, started, edits, exc)
            raise
        self._record(step, request, generator, answer, retries, started, edits, answer.error)
        return answer

    def _record(
        self,
        step: int,
        request: Request,
        generator: Any,
        answer: Answer,
        retries: int,
        started: float,
        edits: list[str],
        error: BaseException | None,
    ) -> None:
        finish = answer.finish.reason if answer.finish is not None else None
        message = answer.message(with_calls=answer.ok)
        self.exchanges.append(
            Exchange(
                step,
                request,
                message,
                finish,
                answer.usage,
                answer.status if answer.status != "streaming" else "failed",
                str(getattr(generator, "model", "") or type(generator).__name__),
                retries,
                time.monotonic() - started,
                error,
                tuple(edits),
            )
        )

    async def _pause(self, pause: StepPause) -> Resume:
        """Wait at ``pause`` for the approver's Resume (step mode); an edit that would break
        the history ends the run, saying why."""
        assert self._pauser is not None
        self.emit(StepPaused(pause))
        resume = self._pauser(pause)
        if inspect.isawaitable(resume):
            resume = await resume
        try:
            resume = pause.check(resume)
        except StepEditError as exc:
            raise AgentError(f"step mode, at step {pause.step}: {exc}") from None
        if resume.action == "run":
            self._pauser = None  # to the end without pausing
        if pause.kind == "calls":
            self.emit(StepResumed(pause.id, pause.step, resume.action, (), "calls"))
        return resume

    async def _pause_before(
        self, step: int, request: Request, generator: Generator
    ) -> tuple[Request, Generator, list[str]]:
        """Step mode: pause before the request; apply what the person changed."""
        last = request.messages[-1] if request.messages else None
        results = last.results if isinstance(last, ToolMessage) else ()
        pause = StepPause(
            self.id,
            step,
            "request",
            request=request,
            results=results,
            model=str(getattr(generator, "model", "")),
        )
        resume = await self._pause(pause)
        edits: list[str] = []
        if resume.action == "stop":
            raise asyncio.CancelledError
        edited = None
        if (resume.results or resume.remove) and isinstance(last, ToolMessage):
            edited, edits = edited_results(last, resume, self.limits)
            request = replace(request, messages=(*request.messages[:-1], edited))
        if resume.instructions is not None:
            request = replace(request, instructions=resume.instructions)
            edits.append("instructions changed for this request")
        if resume.model is not None:
            generator = _generator(resume.model)
            request = replace(request, model=getattr(generator, "model", ""))
            name = getattr(generator, "model", "") or type(generator).__name__
            problem = history_problem(generator, request)
            if problem:  # refused before anything changed: the history stays as it was
                raise AgentError(f"step mode, at step {step}: {name} cannot go on here: {problem}")
            edits.append(f"answered by {name}")
        if edited is not None:
            self.agent.messages[-1] = edited  # the history the model reads from now on
        self.emit(StepResumed(pause.id, step, resume.action, tuple(edits), "request"))
        return request, generator, edits

    async def _stream_answer(
        self, step: int, request: Request, generator: Generator
    ) -> tuple[Answer, int]:
        retries = 0
        answer = Answer(self._taken)
        self._answer = answer
        streams: dict[str, _CallStream] = {}
        keep = self._keep_events
        queue = self._queue
        pending = queue.items  # the queue's deque: its tail is checked once per fragment
        shown = self.limits.max_argument_bytes  # beyond it a call is refused: show no more
        stream = generator.stream(request)
        try:
            async for raw in stream:
                if raw.__class__ is StreamRetry and self._over_budget(step):
                    # announced before it is sent, and a retry is a request like any other:
                    # closing the stream here sends nothing more
                    raise _BudgetSpent(answer)
                event = answer.add(raw)
                if isinstance(event, ToolInputDelta):  # the most frequent event: kept lean
                    call_id = event.call_id
                    found = streams.get(call_id)
                    if found is None:
                        found = streams[call_id] = self._call_stream("")
                    buffer = found.buffer
                    if buffer is not None and buffer.length < shown:
                        buffer.append(event.delta)
                        end = buffer.length
                        merged = found.merged
                        if merged is not None and pending and pending[-1] is merged:
                            merged.end = end  # the reader is behind: grow the pending delta
                        elif keep:
                            self.emit(
                                ToolArgumentsDelta(
                                    call_id, found.name, event.delta, source=(buffer, end)
                                )
                            )
                            found.merged = queue.merged_tail()
                        if found.on_delta is not None:
                            info = ToolInput(
                                call_id, found.name, delta=event.delta, source=(buffer, end)
                            )
                            await _input_callback(
                                found.on_delta,
                                info,
                                "on_input_delta",
                                self._silenced,
                                self.agent.hook_timeout,
                            )
                elif isinstance(event, TextDelta):
                    if (
                        event.text
                        and keep
                        and not queue.extend_text(AssistantTextDelta, step, event.text)
                    ):
                        self.emit(AssistantTextDelta(step, event.text))
                elif isinstance(event, ToolInputStart):
                    streams[event.call_id] = self._call_stream(event.name)
                    tool = self.tools.get(event.name)
                    self.emit(
                        ToolCallStarted(
                            step,
                            event.call_id,
                            event.name,
                            tool.title if tool else None,
                            event.provider_executed,
                            dict(tool.code_arguments) if tool else {},
                        )
                    )
                    if tool is not None and tool.on_input_start is not None:
                        info = ToolInput(event.call_id, event.name)
                        await _input_callback(
                            tool.on_input_start,
                            info,
                            "on_input_start",
                            self._silenced,
                            self.agent.hook_timeout,
                        )
                elif isinstance(event, ToolCallReceived):
                    call = event.call
                    tool = self.tools.get(call.name)
                    if tool is not None and tool.on_input_available is not None:
                        info = ToolInput(call.id, call.name, call.arguments)
                        await _input_callback(
                            tool.on_input_available,
                            info,
                            "on_input_available",
                            self._silenced,
                            self.agent.hook_timeout,
                        )
                elif isinstance(event, ReasoningDelta) and event.text:
                    if not (keep and queue.extend_text(ReasoningTextDelta, step, event.text)):
                        self.emit(ReasoningTextDelta(step, event.text))
                elif isinstance(event, StreamRetry):
                    self._requests += 1
                    retries += 1
                    streams.clear()
                    self.emit(StepRetried(step, event.reason, event.attempt, event.delay))
        finally:
            await stream.aclose()  # type: ignore[attr-defined]
        answer.end()
        self._answer = None
        return answer, retries

    def _call_stream(self, name: str) -> _CallStream:
        """What the loop keeps of one call while its arguments stream: text only if someone
        will read it (events are kept, or the tool has ``on_input_delta``)."""
        tool = self.tools.get(name)
        on_delta = tool.on_input_delta if tool is not None else None
        keep = self._keep_events or on_delta is not None
        return _CallStream(name, TextBuffer() if keep else None, on_delta)

    # --- one batch of calls -----------------------------------------------------------------

    async def _run_batch(
        self, step: int, calls: list[CheckedCall]
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
            await asyncio.wait(tasks, timeout=CANCEL_GRACE * 2)
            raise
        return list(done)

    async def _handle_call(
        self,
        step: int,
        checked: CheckedCall,
        semaphore: asyncio.Semaphore | None,
        sequential: dict[str, asyncio.Lock],
    ) -> tuple[ToolResultPart, ToolResult]:
        call = checked.call
        try:
            return await self._handle_call_now(step, checked, semaphore, sequential)
        except (Exception, asyncio.CancelledError, GeneratorExit):
            raise
        except BaseException as exc:  # from a predicate, to_model_output …: never out as it is
            raise _aborted(call.name, exc) from exc

    async def _handle_call_now(
        self,
        step: int,
        checked: CheckedCall,
        semaphore: asyncio.Semaphore | None,
        sequential: dict[str, asyncio.Lock],
    ) -> tuple[ToolResultPart, ToolResult]:
        started = time.monotonic()
        call = checked.call
        found = self.tools.get(call.name)
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
                    self.agent._schemas[call.name].validate(input_value)
            except ArgumentsError as exc:
                outcome = Outcome(
                    error_result(
                        f"Invalid arguments for {call.name}, nothing was run; "
                        f"fix them and call again.\n{exc}"
                    ),
                    "invalid",
                )
        self.emit(ToolCallReady(step, call, copy_json(input_value)))
        outcome = await self._repeats.hold(self, step, checked) or outcome
        if outcome is None:
            outcome = await run_valid_call(self, found, call, input_value, semaphore, sequential)
        result, original = self._repeats.seen(step, checked, outcome)  # and the limits
        part = ToolResultPart(call.id, call.name, result.content, result.is_error)
        self._finished[call.id] = part
        elapsed = time.monotonic() - started
        self._repeats.fold(self.emit, checked)
        self.emit(
            ToolFinished(
                call, result, outcome.status, elapsed, outcome.trace, outcome.abandoned, original
            )
        )
        if outcome.raised is not None:
            raise _aborted(call.name, outcome.raised) from outcome.raised
        return part, result

    def _progress(self, call_id: str) -> Callable[[ToolResult, float], None]:
        def deliver(update: ToolResult, elapsed: float) -> None:
            self.emit(ToolProgress(call_id, update, elapsed))

        return deliver

    def _abandon(self, handle: AbandonedCall) -> None:
        self._abandoned[handle.call_id] = handle


async def _input_callback(
    callback: Callable[[ToolInput], Any],
    info: ToolInput,
    hook: str,
    silenced: set[tuple[str, str]],
    timeout: float | None,
) -> None:
    """Call one ``on_input_*`` display callback; it never breaks or holds the run.

    An awaitable it returns gets ``timeout`` seconds (``Agent.hook_timeout``). One that raises or
    overruns is logged once and not called again in this run: it would otherwise fail, or cost
    a whole timeout, on every fragment of every later call. (A sync callback runs on the loop,
    as fragments arrive, and must be quick: no thread can stop it.)
    """
    key = (info.name, hook)
    if key in silenced:
        return
    try:
        outcome = callback(info)
        if inspect.isawaitable(outcome):
            await asyncio.wait_for(outcome, timeout)
    except TimeoutError:
        silenced.add(key)
        log.warning(
            "%s callback of tool %r took longer than %s s; it was stopped and is not called "
            "again in this run",
            hook,
            info.name,
            timeout,
        )
    except Exception:  # a display callback must never break the run
        silenced.add(key)
        log.exception(
            "%s callback of tool %r failed; it is not called again in this run", hook, info.name
        )


def _aborted(tool: str | None, raised: BaseException) -> RunAbortedError:
    what = f"{type(raised).__name__}" + (f": {redact_secrets(str(raised))}" if str(raised) else "")
    who = f"tool {tool!r}" if tool is not None else "a callback"
    error = RunAbortedError(f"{who} raised {what}", tool=tool, raised=raised)
    error.__cause__ = raised
    return error


def history_problem(generator: Any, request: Request) -> str | None:
    """Why ``generator``'s provider would refuse ``request``'s history (its ``history_problem``,
    for providers with rules beyond each message: Anthropic's thinking), or None."""
    check = getattr(generator, "history_problem", None)
    return check(request) if callable(check) else None


def _generator(model: Any) -> Generator:
    """A model for one step-mode request: a Generator, or a model string resolved as the
    agent resolves its own (``nbagent.providers``)."""
    if isinstance(model, str):
        from .providers import resolve_generator

        return resolve_generator(model)
    if not hasattr(model, "stream"):
        raise AgentError(f"a model is a model string or a Generator, not {type(model).__name__}")
    generator: Generator = model
    return generator


def _call_ids(messages: Sequence[Message]) -> set[str]:
    return {
        part.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for part in message.content
        if isinstance(part, ToolCall)
    }


class _CallStream:
    """One call's arguments as they stream: its text (if anyone reads it), its ``on_input_delta``
    callback, and the merged delta it may grow at the tail of the event queue."""

    __slots__ = ("buffer", "merged", "name", "on_delta")

    def __init__(
        self, name: str, buffer: TextBuffer | None, on_delta: Callable[[ToolInput], Any] | None
    ) -> None:
        self.name = name
        self.buffer = buffer
        self.on_delta = on_delta
        self.merged: Any = None


class _BudgetSpent(Exception):
    """A retry the run's budget cannot pay for was announced: the stream is closed unsent."""

    def __init__(self, answer: Answer) -> None:
        super().__init__("the run's request budget is spent")
        self.answer = answer


def _reason(answer: Answer) -> Any:
    return answer.finish.reason if answer.finish else None


def _as_user_message(prompt: str | UserMessage | Sequence[str | Part]) -> UserMessage:
    if isinstance(prompt, UserMessage):
        return prompt
    if isinstance(prompt, str):
        return UserMessage((TextPart(prompt),))
    return UserMessage(tuple(TextPart(p) if isinstance(p, str) else p for p in prompt))
