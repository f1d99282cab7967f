"""How a run runs in a kernel: awaited by its cell, as a background task, or on a worker thread.

* **In its cell** (the default where it works): the rewritten ``%agent`` line awaits
  :meth:`Job.run_in_cell` on the kernel's loop. The cell ends when the run ends, clicks still
  reach the run (ipykernel ≥ 7.4 dispatches comm messages while a cell awaits), and a kernel
  interrupt — which ipykernel turns into a cancel of the awaiting cell — cancels the run, waits
  until every pending call is answered, and re-raises as ``KeyboardInterrupt``.
* **Background** (a run that waits for clicks where the cell cannot await them: an older kernel,
  or ``%agent`` called from inside a function): a task on the kernel's loop; the magic returns at
  once and ``-o NAME`` holds a :class:`PendingRun` until the run ends. Exceptions of the task are
  shown in the view by a done-callback; only Stop (or ``%agent stop``) reaches it.
* **Foreground** (nobody needs to click, and the cell cannot await): the run happens on a worker
  thread with its own loop, started inside a copy of the cell's context (ipykernel 7 keeps the
  cell's parent message in a context variable), and the cell waits; an interrupt cancels it.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..._ground.formatting import traceback_text
from ..._ground.threads import run_on_worker_loop
from ...approvals.approval import Approver
from ...errors import AgentError, NbagentError, RecordingError, raised_to_caller
from ...events import RunResult, abandoned_calls_shown
from ...messages import AssistantMessage, ToolMessage
from ...redact import redact_secrets

if TYPE_CHECKING:
    from ...agent import Agent, Run
    from ...limits import Budget
    from ..live.outputs import View
    from .recordings import Choice

__all__ = [
    "CellInterrupted",
    "Job",
    "Mode",
    "PendingRun",
    "RunNotFinishedError",
    "View",
    "drive",
    "kernel_loop",
]

_numbers = itertools.count(1)
#: How often a running view is woken: flushes stalled text, ticks clocks, lets Stop land promptly.
TICK = 0.1
#: After a kernel interrupt, how long the cell waits for the cancelled run to wind down.
CANCEL_WAIT = 10.0

Mode = Literal["cell", "background", "foreground"]


#: What an interrupted run's own output says (its cell's error says it too, when it is sent).
INTERRUPTED = "the run was stopped by a kernel interrupt"


class CellInterrupted(KeyboardInterrupt):
    """A kernel interrupt stopped the run an awaiting ``%agent`` cell was waiting for.

    It fails the cell like any interrupted cell (so Run All stops there), but IPython shows it
    as one line, not a traceback: the frames it would show are nbagent's own (the awaiting
    call the cell was rewritten into, the runner), none of them the person's, and the run's
    view above already says what was cancelled. Its type name stays ``KeyboardInterrupt``, so
    whatever reads a cell's error name (nbclient, papermill, a kernel reply) sees an interrupt.
    """

    def _render_traceback_(self) -> list[str]:
        """IPython's hook for an exception that draws its own traceback."""
        return [f"\x1b[0;31mKeyboardInterrupt\x1b[0m: {self}"]


CellInterrupted.__name__ = CellInterrupted.__qualname__ = "KeyboardInterrupt"


class RunNotFinishedError(AgentError):
    """The result of a background run was used before the run ended."""


class PendingRun:
    """What ``-o NAME`` holds while a background run goes on: the run's result once it ended.

    Reading a result field (``.text``, ``.stop_reason`` …) before the end raises
    :class:`RunNotFinishedError` naming the run, instead of a confusing ``NameError`` or a stale
    value. When the run ends, ``NAME`` is rebound to the :class:`~nbagent.events.RunResult`.
    """

    def __init__(self, job: Job) -> None:
        self._job = job

    def done(self) -> bool:
        """True once the run ended (then every RunResult field is available here too)."""
        return self._job.done

    @property
    def result(self) -> RunResult:
        """The RunResult; raises :class:`RunNotFinishedError` while the run goes on."""
        job = self._job
        if job.result is None:
            if job.done:
                raise RunNotFinishedError(
                    f"{job.label} ended without a result ({job.state}); see its output"
                )
            raise RunNotFinishedError(
                f"{job.label} is still running in the background, so its result is not here "
                "yet: run this cell again when the run's view says it ended (or click Stop)"
            )
        return job.result

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.result, name)

    def __repr__(self) -> str:
        state = "running" if not self._job.done else self._job.state
        return f"<nbagent {self._job.label}: {state}>"


async def _ticker(view: View, interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        view.tick()


async def drive(run: Run, view: View, *, interval: float = TICK) -> RunResult:
    """Show every event of ``run`` in ``view`` and return its result."""
    ticker = asyncio.ensure_future(_ticker(view, interval))
    try:
        async for event in run.events():
            view.handle(event)
        return await run.result()
    except asyncio.CancelledError:
        run.cancel()
        raise
    finally:
        ticker.cancel()


def kernel_loop() -> asyncio.AbstractEventLoop:
    """The event loop the kernel runs cells on."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.get_event_loop_policy().get_event_loop()


class Job:
    """One ``%agent`` request: what to run, where it shows, what happens when it ends."""

    def __init__(
        self,
        agent: Callable[[], Agent],
        prompt: str,
        view: View,
        *,
        approver: Approver,
        mode: Mode,
        max_steps: int | None = None,
        budget: Budget | None = None,
        tools: Sequence[str] | None = None,
        reset: bool = False,
        on_end: Callable[[Job], None] | None = None,
        on_record: Callable[[Job], None] | None = None,
        model_for: Callable[[Agent, str, list[str] | None], Choice] | None = None,
        step: bool = False,
        continuing: bool = False,
        output: Any = None,
    ) -> None:
        self.number = next(_numbers)
        self.output = output  # --output: the type the run answers with (None: text)
        self._agent = agent
        self.prompt = prompt
        self.view = view
        self.approver = approver
        self.mode: Mode = mode
        self.max_steps = max_steps
        self.budget = budget
        self.tools = list(tools) if tools is not None else None
        self.reset = reset
        self.on_end = on_end
        #: Called at the end before the view writes its final output (which carries the run's
        #: record, so a headless view that writes it at once has it too); then ``on_end``.
        self.on_record = on_record
        self.model_for = model_for
        self.step = step  # step mode: a pause before each request and each batch of calls
        self.continuing = continuing  # no prompt: the run answers the conversation as it is
        self.saved: str | None = None  # the recording this run was saved to
        self.generator: Any = None  # the model the run used, once it started
        self.replayed_from: str | None = None  # the recording it replayed
        self.choice: Choice | None = None  # how it got its model (once it started)
        self.agent: Agent | None = None  # whose conversation it goes on (once it started)
        self.run: Run | None = None
        self.task: asyncio.Task[RunResult] | None = None
        self.result: RunResult | None = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.state = "queued"
        self._lock = threading.Lock()
        self._turn: asyncio.Future[None] | None = None
        self._go = False

    @property
    def label(self) -> str:
        """How a person can tell this run apart: its id once started, and its prompt (it goes
        into error messages, which a notebook saves: key-shaped text is hidden)."""
        prompt = " ".join(redact_secrets(self.prompt).split())
        if len(prompt) > 40:
            prompt = prompt[:39] + "…"
        name = self.run.id if self.run is not None else f"request {self.number}"
        return f"{name} ({prompt!r})"

    @property
    def done(self) -> bool:
        return self.state in ("finished", "failed", "cancelled")

    # --- running ------------------------------------------------------------------------------

    async def main(self) -> RunResult:
        """Start the run on the running loop and show it to the end."""
        with self._lock:
            if self.cancelled:
                raise asyncio.CancelledError
            self.state = "running"
        agent = self._agent()
        if self.reset:
            agent.reset()
        choice = self.model_for(agent, self.prompt, self.tools) if self.model_for else None
        self.choice, self.agent = choice, agent
        own = agent.generator
        if choice is not None and choice.generator is not None:
            agent.generator = choice.generator  # for this run only: runs never interleave
        self.generator = agent.generator  # what the run's record names (and prices)
        self.replayed_from = choice.source if choice is not None else None
        result: RunResult | None = None
        try:
            with abandoned_calls_shown():  # the card says so: no stderr beside it
                run = agent.start(
                    None if self.continuing else self.prompt,
                    approver=self.approver,
                    max_steps=self.max_steps,
                    tools=self.tools,
                    budget=self.budget,
                    step=self.step,
                    output=self.output,
                )
            with self._lock:
                self.run = run
                if self.cancelled:
                    run.cancel()
            result = await drive(run, self.view)
            return result
        finally:
            agent.generator = own
            if choice is not None:
                final = result if result is not None else self.run_final()
                not_saved = departed = None
                try:
                    self.saved = choice.finish(final)
                    departed = choice.departed(final)
                    if final is not None and final.stop_reason == "cancelled":
                        self._keep_waiting()
                except (OSError, NbagentError) as exc:  # the run itself went fine: say so, go on
                    from .recordings import why_not_saved

                    not_saved = why_not_saved(exc)
                transcript = getattr(self.view, "transcript", None)
                if transcript is not None:
                    transcript.saved_to, transcript.not_saved = self.saved, not_saved
                    if departed and transcript.error is None:  # ended early: say where
                        transcript.error = redact_secrets(departed)

    def _keep_waiting(self) -> None:
        """A recorded run that ends while every call of its last answer waits for approval (an
        interrupt, the kernel's shutdown) keeps its recording with the conversation ending with
        those calls, unanswered (the results the loop made up for them left out): its record
        names it, and a restarted kernel's ``%agent --continue`` offers the calls again."""
        transcript = getattr(self.view, "transcript", None)
        messages = list(self.agent.messages) if self.agent is not None else []
        if self.choice is None or transcript is None or not messages:
            return
        if isinstance(messages[-1], ToolMessage) and len(messages) > 1:
            messages.pop()  # made up by the loop when the run was cancelled
        last = messages[-1]
        calls = last.tool_calls if isinstance(last, AssistantMessage) else ()
        waiting = [transcript.calls.get(call.id) for call in calls]
        if not calls or not all(
            r is not None and r.approval_asked and r.decision is None for r in waiting
        ):
            return
        try:
            self.saved = self.choice.unfinished(messages) or self.saved
        except (OSError, NbagentError):  # the run still ends, and says so; only not kept
            pass

    def run_final(self) -> RunResult | None:
        return self.run.final if self.run is not None else None

    def cancel(self) -> None:
        """Stop the run (from any thread); a queued request never starts."""
        with self._lock:
            self.cancelled = True
            run = self.run
        if run is not None:
            run.cancel()
        elif self.state == "queued":
            self._finish(None, None, cancelled=True)
            self.your_turn()  # wake a cell waiting for its turn: it will not start

    # --- in its cell ----------------------------------------------------------------------------

    def your_turn(self) -> None:
        """The run before this one ended (called by the session, from any thread)."""
        with self._lock:
            self._go = True
            turn = self._turn
        if turn is not None:

            def go() -> None:
                if turn is not None and not turn.done():
                    turn.set_result(None)

            turn.get_loop().call_soon_threadsafe(go)

    async def run_in_cell(self, queued: bool) -> RunResult | None:
        """Await the run on this loop (after the run before it, if ``queued``).

        A cancel of the awaiting cell (ipykernel's answer to a kernel interrupt) cancels the
        run, waits for it to wind down, and re-raises as ``KeyboardInterrupt`` so that the cell
        fails like any interrupted cell (and Run All stops there).
        """
        loop = asyncio.get_running_loop()
        try:
            if queued:
                with self._lock:
                    self._turn = loop.create_future()
                    if self._go or self.done:
                        self._turn.set_result(None)
                await self._turn
            if self.cancelled:  # stopped while it waited for its turn
                return self.result
            self.task = loop.create_task(self.main(), name=f"nbagent-{self.number}")
            result = await asyncio.shield(self.task)
        except asyncio.CancelledError:
            task = self.task
            if task is not None and task.done():  # the run was stopped before it began
                return self._settle(task)
            # the run's own output says why it stopped: the cell's one-line error may never be
            # sent (jupyter_client interrupts a kernel right before shutting it down)
            transcript = getattr(self.view, "transcript", None)
            if transcript is not None and transcript.error is None:
                transcript.error = INTERRUPTED
            self.cancel()
            if task is not None:
                await asyncio.wait({task}, timeout=CANCEL_WAIT)
                self._settle(task)
            raise CellInterrupted(f"{self.label} was stopped by a kernel interrupt") from None
        except Exception as exc:  # shown in the view, never lost
            self._finish(None, exc)
            return None
        self._finish(result, None)
        self._end_cell_if_stopped()
        return self.result

    def _end_cell_if_stopped(self) -> None:
        """A tool (or callback) that raised ``KeyboardInterrupt`` / ``SystemExit`` stopped the
        run: the cell then ends as an interrupted cell does (Run All stops here), in one line,
        after the view said what happened; the kernel lives on."""
        error = self.result.error if self.result is not None else None
        if raised_to_caller(error) is not None:
            raise CellInterrupted(f"{self.label} was stopped: {error}")

    def _settle(self, task: asyncio.Task[RunResult]) -> RunResult | None:
        if not task.done():
            self._finish(None, None, cancelled=True)
        elif task.cancelled():
            self._finish(self.run.final if self.run else None, None, cancelled=True)
        elif task.exception() is not None:
            self._finish(None, task.exception())
        else:
            self._finish(task.result(), None)
        return self.result

    # --- background -----------------------------------------------------------------------------

    def start_background(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Run as a task on the kernel's loop; returns at once."""
        loop = loop or kernel_loop()
        self.task = loop.create_task(self.main(), name=f"nbagent-{self.number}")
        self.task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[RunResult]) -> None:
        if task.cancelled():
            self._finish(self.run.final if self.run else None, None, cancelled=True)
            return
        error = task.exception()
        self._finish(task.result() if error is None else None, error)

    # --- foreground -----------------------------------------------------------------------------

    def run_foreground(self) -> RunResult | None:
        """Run on a worker thread and wait; Ctrl-C / kernel interrupt cancels the run."""
        try:
            result = run_on_worker_loop(
                self.main, on_interrupt=self.cancel, cancel_wait=CANCEL_WAIT
            )
        except KeyboardInterrupt:
            self._finish(self.run.final if self.run else None, None, cancelled=True)
            raise
        except asyncio.CancelledError:
            self._finish(self.run.final if self.run else None, None, cancelled=True)
        except BaseException as exc:  # shown in the view, never lost
            self._finish(None, exc)
        else:
            self._finish(result, None)
            self._end_cell_if_stopped()
        return self.result

    def abandon(self) -> None:
        """End this job now, without its loop (the kernel is shutting down). A recorded run
        waiting for approval keeps its recording first (see ``Choice.unfinished``): its record
        names it, and a restarted kernel's ``%agent --continue`` offers the calls again."""
        if not self.done:
            self._keep_waiting()
            transcript = getattr(self.view, "transcript", None)
            if transcript is not None and transcript.ended is None:
                # ended before the record is made: it says cancelled, never "waiting"
                transcript.end("cancelled")
        self._finish(self.run.final if self.run else None, None, cancelled=True)

    # --- the end --------------------------------------------------------------------------------

    def _finish(
        self, result: RunResult | None, error: BaseException | None, *, cancelled: bool = False
    ) -> None:
        if result is None and isinstance(error, RecordingError):
            # Refused before it began (no recording fits): a failed result all the same, so
            # that -o NAME holds it and Run All's next cell reads why, not a NameError.
            from ...generation import Usage

            result = RunResult("", (), 0, Usage(), "failed", error)
        with self._lock:
            if self.done:
                return
            self.result = result
            self.error = error
            if result is not None:
                self.state = "cancelled" if result.stop_reason == "cancelled" else "finished"
                if result.stop_reason == "failed":
                    self.state = "failed"
            else:
                self.state = "cancelled" if cancelled else "failed"
        view = self.view
        try:
            if error is not None:
                # A refusal that explains itself (no recording fits, and why) is its message;
                # a traceback of nbagent's own frames would bury it.
                trace = None
                if not isinstance(error, RecordingError):
                    trace = traceback_text(error)  # its __str__ may be the person's: bounded
                view.show_error(error, trace)
            if self.on_record is not None:
                try:
                    self.on_record(self)
                except Exception:  # the record must never cost the run its outputs
                    import logging

                    logging.getLogger("nbagent").exception("the run's record failed")
            if not view.finished:
                stop = result.stop_reason if result is not None else self.state
                view.close(stop)
        finally:
            if self.on_end is not None:
                self.on_end(self)
