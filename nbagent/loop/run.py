"""One run of the agent loop: stream a turn, validate calls, approve, execute, repeat.

A :class:`Run` is a task on the running loop that emits :mod:`nbagent.events` into a queue.
It owns two rules. Whatever point a cancel lands at, every call in the history ends up with
exactly one result. And nothing user code raises escapes the run: exceptions become error
results or a failed run, ``KeyboardInterrupt``/``SystemExit`` from a tool stop the run as
"failed" (see :mod:`nbagent.loop._execution`), and the agent is left idle.

Here are the run's handle (start, events, result, cancel) and its step driver; each part of a
step has its own room, which reads the run through :class:`nbagent.loop._loopstate.RunState`:

* :mod:`nbagent.loop._turn`: one model turn, the request sent and its answer streamed into events;
* :mod:`nbagent.loop._callbatch`: the calls of one answer, each checked, run and answered;
* :mod:`nbagent.loop._stepmode`: step mode's pauses, and the person's edits applied;
* :mod:`nbagent.loop._ending`: the end of a run, its result and the repair of its history.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._ground.spending import Account, spend_from, spending_account
from .._history import check_calls, history_message
from ..approvals.approval import Approver
from ..content import Part, TextPart, ToolResult
from ..delegation import enter_run
from ..errors import AgentError, RunAbortedError
from ..events import (
    AbandonedCall,
    AgentEvent,
    RunResult,
    RunStarted,
    StepFinished,
    StepStarted,
    StopReason,
    ToolProgress,
)
from ..generation import Answer, Options, Usage
from ..inspection.exchange import Exchange
from ..inspection.stepping import StepPause
from ..messages import AssistantMessage, Message, ToolMessage, ToolResultPart, UserMessage
from ..tools import Tool, ToolCall
from ._callbatch import run_batch
from ._ending import (
    aborted,
    end_cancelled,
    end_failed,
    end_finished,
    keep_answer_text,
    repair,
)
from ._eventqueue import EventQueue
from ._execution import CANCEL_GRACE
from ._ids import new_id
from ._repeats import RepeatGuard
from ._snapshots import HistoryLog
from ._spend import BudgetSpent, release, reserve
from ._stepmode import pause
from ._timing import TimelineBuilder
from ._turn import stream_turn

if TYPE_CHECKING:
    from ..limits import Budget
    from ..output import TypedAnswer
    from ._loopstate import AgentState as Agent  # what a run reads from its agent

__all__ = ["Run"]

log = logging.getLogger("nbagent")


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
        answer: TypedAnswer | None = None,
    ) -> None:
        self.agent = agent
        #: A typed run's answer (see :mod:`nbagent.output`); None for a run that answers text.
        self.answer = answer
        #: The compiled input schema of each tool the run offers (the answer tool's too).
        self.schemas = dict(agent._schemas)
        if answer is not None and answer.tool is not None:
            tools = {**tools, answer.tool.name: answer.tool}
            self.schemas[answer.tool.name] = answer.compiled
        self.id = new_id("run")
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
        self._requests = 0  # model requests sent, retries included, helpers' too
        self._loop: asyncio.AbstractEventLoop | None = None
        self.final: RunResult | None = None
        self._keep_events = True
        #: Whether anyone but the timeline hears the run's events (a reader, an observer):
        #: events only they would read are not built otherwise.
        self._heard = True
        self._timeline = TimelineBuilder()
        self._observers = tuple(agent.observers)
        self._budget = budget
        #: What the run spends from: its own budget's account, under the one of whoever
        #: started it (a caller, a map, a served session), or that one alone
        #: (nbagent._ground.spending).
        ambient = spending_account()
        self._account: Account | None = (
            Account(budget, ambient, label=_label(ambient)) if budget is not None else ambient
        )
        self._reservation: Any = None  # the next request's, until it is settled
        #: Why the run stopped, in one sentence, when its stop reason alone does not say.
        self._stop_detail = ""
        #: Each model request of the run and its answer, as they happen
        #: (see nbagent.inspection.exchange).
        self.exchanges: list[Exchange] = []
        #: Step mode: the approver's ``pause`` gives a Resume at each pause
        #: (nbagent.inspection.stepping).
        self._pauser: Callable[[StepPause], Any] | None = (
            getattr(approver, "pause", None) if step else None
        )
        self._continuing = continuing  # no new prompt: the run answers the history as it is
        self._repeats = RepeatGuard(self.limits, agent.generator)
        self._history = HistoryLog()  # what each request sends, without a copy per step

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._main(), name=self.id)
        self._task.add_done_callback(self._after)

    def _after(self, task: asyncio.Task[RunResult]) -> None:
        """A task cancelled before its first step never ran ``_main``: end the run here."""
        if self.final is None:
            end_cancelled(self)

    def emit(self, event: AgentEvent) -> None:
        self._timeline.add(event)
        self._tell(event)
        if self._keep_events:
            self._queue.put(event)

    def _tell(self, event: AgentEvent) -> None:
        """Give ``event`` to the observers alone: a fragment the reader's queue merged into
        the delta it already holds is still an event of its own for each observer."""
        for observer in self._observers:
            try:
                observer(self.id, event)
            except Exception:  # an observer (telemetry, a log) must never break the run
                log.exception("an observer of %s failed on %s", self.id, type(event).__name__)

    def discard_events(self) -> None:
        """Nobody will read :meth:`events`: keep none (``Agent.run`` only wants the result)."""
        self._keep_events = False
        self._heard = bool(self._observers)
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
        enter_run(self)  # for the agents among its tools (nbagent.delegation)
        spend_from(self._account)  # and whatever runs they start spend from its account
        agent = self.agent
        messages = agent.messages
        if not self._continuing:
            messages.append(self.prompt)
        self._taken = _call_ids(messages)
        model_name = getattr(agent.generator, "model", "")
        typed = self.answer
        self.emit(
            RunStarted(
                self.id,
                self.prompt.text,
                str(model_name),
                agent.conversation_id,
                typed.mode if typed is not None else "",
                typed is not None and typed.spec.wrapped,
            )
        )
        stop: StopReason = "max_steps"
        try:
            for step in range(1, self.max_steps + 1):
                if await reserve(self, agent.generator) is not None:
                    stop = "budget"  # before anything of the step: nothing was sent
                    break
                self._steps = step
                self.emit(StepStarted(step))
                try:
                    answer = await stream_turn(self, step)
                except BudgetSpent as spent:  # a retry the budget cannot pay for: not sent
                    self._answer = None
                    self._usage = self._usage + spent.answer.usage
                    keep_answer_text(self, spent.answer)
                    self.emit(StepFinished(step, spent.answer.usage, None, 0))
                    stop = "budget"
                    break
                self._usage = self._usage + answer.usage
                if not answer.ok:
                    keep_answer_text(self, answer)
                    self.emit(StepFinished(step, answer.usage, _reason(answer), 0))
                    if answer.status == "length":
                        stop = "length"
                        break
                    error = answer.error or AgentError(
                        f"the model stopped abnormally ({_reason(answer)})"
                    )
                    return end_failed(self, error)
                checked = check_calls(answer.tool_calls(), self.limits, self.tools)
                message = history_message(answer.message(), checked, self.limits)
                messages.append(message)
                self._taken |= _call_ids([message])
                self.emit(StepFinished(step, answer.usage, _reason(answer), len(checked)))
                if not checked:
                    if answer.finish is not None and answer.finish.reason == "pause":
                        continue  # send the paused turn back so the provider continues it
                    if self.answer is not None and not self.answer.accept_text(
                        messages, self.limits
                    ):
                        continue  # the model was told why that is not the answer
                    stop = "finished"
                    break
                self._open_calls = tuple(c.call for c in checked)
                self._finished = {}
                if self._pauser is not None:
                    calls = tuple(c.call for c in checked)
                    resume = await pause(self, StepPause(self.id, step, "calls", calls=calls))
                    if resume.action == "stop":
                        raise asyncio.CancelledError  # every open call is answered: repair
                results = await run_batch(self, self._repeats, step, checked)
                messages.append(ToolMessage(tuple(part for part, _ in results)))
                self._open_calls = ()
                if self.answer is not None and self.answer.accept_calls(checked, results):
                    stop = "terminated"
                    break
                if self._repeats.stopped or all(r.terminate and not r.is_error for _, r in results):
                    stop = "repeated_call" if self._repeats.stopped else "terminated"
                    break
        except asyncio.CancelledError:
            release(self)
            repair(self, "the run was cancelled")
            end_cancelled(self)
            raise
        except RunAbortedError as exc:
            repair(self, f"the run was stopped: {exc}")
            return end_failed(self, exc)
        except Exception as exc:  # a provider error, a bug in a callback: end cleanly, say why
            release(self)
            repair(self, f"the run failed: {type(exc).__name__}")
            return end_failed(self, exc)
        except GeneratorExit:
            raise
        except BaseException as exc:  # KeyboardInterrupt, SystemExit … from a callback
            release(self)
            stopped = aborted(None, exc)
            repair(self, f"the run was stopped: {stopped}")
            return end_failed(self, stopped)
        release(self)  # a stop that came before its reserved request was sent
        return end_finished(self, stop)

    def _progress(self, call_id: str) -> Callable[[ToolResult, float], None]:
        def deliver(update: ToolResult, elapsed: float) -> None:
            self.emit(ToolProgress(call_id, update, elapsed))

        return deliver

    def _abandon(self, handle: AbandonedCall) -> None:
        self._abandoned[handle.call_id] = handle


def _label(parent: Account | None) -> str:
    return "the run's budget" if parent is None else "this run's own budget"


def _call_ids(messages: Sequence[Message]) -> set[str]:
    return {
        part.id
        for message in messages
        if isinstance(message, AssistantMessage)
        for part in message.content
        if isinstance(part, ToolCall)
    }


def _reason(answer: Answer) -> Any:
    return answer.finish.reason if answer.finish else None


def _as_user_message(prompt: str | UserMessage | Sequence[str | Part]) -> UserMessage:
    if isinstance(prompt, UserMessage):
        return prompt
    if isinstance(prompt, str):
        return UserMessage((TextPart(prompt),))
    return UserMessage(tuple(TextPart(p) if isinstance(p, str) else p for p in prompt))
