"""One terminal session: prompts in, runs out, approval questions answered, Ctrl-C obeyed.

Everything happens on the main thread's event loop: the run is a task, the events are rendered
in order as they arrive, an approval question is asked when its event comes up (after the call
it is about, which it names, on a line of its own, with nothing printed while it waits; the
questions of one batch come one after the other), and standard input is read without blocking
the loop. A question whose call is settled without the person (an approval timeout, a run that
failed meanwhile) is withdrawn at once instead of waiting for an answer that would do nothing.
Ctrl-C is a loop signal handler, so it acts at once wherever the person is:

- during a run (streaming, at a question, while a tool runs): cancel the run; the loop answers
  every pending call, and the view says so in one line. A second Ctrl-C before the run has
  wound down quits at once.
- at the ``you>`` prompt: quit with status 130 (Ctrl-D quits with the session's status).

When the output can no longer be written (the reader of a pipe left, as ``| head`` does; a full
disk), the run is cancelled and the session ends: nobody would see what comes next, and a
model would go on spending tokens for nobody. The status is 141 for a closed pipe (what a
shell reports for a program that SIGPIPE ended) and 1 otherwise.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any, Literal

from ..agent import Agent
from ..approvals.approval import ApprovalRequest, Decision, InteractiveApprover
from ..events import (
    ApprovalRequested,
    HelperEvent,
    RunCancelled,
    RunFailed,
    StepPaused,
    abandoned_calls_shown,
)
from ..inspection.stepping import Resume, StepPause
from ..loop.run import Run
from ._console import Console, clean
from ._input import InputInterrupted, LineReader, LineTooLong
from ._view import TerminalView

__all__ = ["Session", "parse_answer"]

Outcome = Literal["done", "failed", "cancelled", "quit"]
#: What waiting before the question may end with besides an answer: ask now, or nothing to ask.
_ASK = object()
_GONE = object()


def parse_answer(answer: str) -> Decision:
    """A typed answer as a decision: y/yes approve, a/always approve for the session, an empty
    line or n/no deny, anything else denies with that text as the reason the model reads."""
    word = answer.strip()
    key = word.lower()
    if key in ("y", "yes"):
        return Decision(True, by="terminal")
    if key in ("a", "always"):
        return Decision(True, "always allowed this session", always=True, by="terminal")
    if key in ("", "n", "no"):
        return Decision(False, None, by="terminal")
    return Decision(False, word, by="terminal")


class _Watched:
    """The person's approver as each run sees it: the same decisions, and a word to the session
    whenever a request stops waiting, however that happened."""

    def __init__(self, inner: InteractiveApprover, settled: Callable[[str], None]) -> None:
        self.inner = inner
        self._settled = settled

    def known_decision(self, request: ApprovalRequest) -> Decision | None:
        return self.inner.known_decision(request)

    async def decide(self, request: ApprovalRequest) -> Decision:
        try:
            return await self.inner.decide(request)
        finally:
            self._settled(request.call.id)

    async def pause(self, pause: StepPause) -> Resume:
        """A repeat pause (the terminal does not step): answered at the prompt."""
        try:
            return await self.inner.pause(pause)
        finally:
            self._settled(pause.id)


class Session:
    """Runs prompts on ``agent`` and renders them; :meth:`serve` returns the exit status.

    ``approver`` is the agent's InteractiveApprover when calls are to be asked about (None for
    ``--approve auto|deny``). ``echo_input`` writes each typed line back (stdin is not a
    terminal, so nothing else would show it).
    """

    def __init__(
        self,
        agent: Agent,
        view: TerminalView,
        reader: LineReader,
        *,
        approver: InteractiveApprover | None,
        echo_input: bool,
        show_prompts: bool = False,
    ) -> None:
        self.agent = agent
        self.view = view
        self.console: Console = view.console
        self.reader = reader
        self.approver = approver
        self.echo_input = echo_input
        self.show_prompts = show_prompts
        self.status = 0
        self.forced = False  # a second Ctrl-C: quit without waiting for the run to wind down
        self._run: Run | None = None
        self._watched = _Watched(approver, self._settled) if approver is not None else None
        self._asking: str | None = None  # the call a question waits about
        self._withdrawn = False  # that call was settled without the person
        self._cancelling = False
        self._late_interrupt = False
        self._consumer: asyncio.Task[Outcome] | None = None
        self._chat = False  # reading prompts after you>

    # --- Ctrl-C -------------------------------------------------------------------------------

    def on_interrupt(self) -> None:
        """Ctrl-C: cancel the run, or leave the prompt; a second one during a cancel quits."""
        run = self._run
        if self.echo_input is False and not self.reader.waiting:
            self.console.at_line_start = False  # the terminal echoed "^C" where the cursor was
        if run is not None and not run.done():
            if self._cancelling:
                self.forced = True
                self.reader.interrupt()
                if self._consumer is not None:
                    self._consumer.cancel()
                return
            self._cancelling = True
            run.cancel()
            self.reader.interrupt()  # leaves an approval question at once
            return
        if not self.reader.interrupt():
            self._late_interrupt = True  # between runs: stop before the next prompt

    def _settled(self, call_id: str) -> None:
        """A request stopped waiting: if its question is still up, nobody needs the answer."""
        if call_id == self._asking and not self._withdrawn and self.reader.waiting:
            self._withdrawn = True
            self.reader.interrupt()

    def _install(self, loop: asyncio.AbstractEventLoop) -> bool:
        try:
            loop.add_signal_handler(signal.SIGINT, self.on_interrupt)
        except (NotImplementedError, RuntimeError, ValueError):
            return False  # not the main thread, or no signals here: Ctrl-C stays the default
        return True

    # --- the session --------------------------------------------------------------------------

    async def serve(self, prompts: list[str] | None) -> int:
        """Run ``prompts`` in order, or (None) read prompts after ``you>`` until Ctrl-D."""
        loop = asyncio.get_running_loop()
        installed = self._install(loop)
        self.console.attach(loop)
        try:
            if prompts is None:
                self._chat = True
                return await self._interactive()
            for prompt in prompts:
                if self._late_interrupt:
                    return 130
                outcome = await self._one(prompt)
                if self.console.lost is not None:
                    return self.output_lost_status()
                if outcome in ("cancelled", "quit"):
                    return 130
            return self.status
        finally:
            self.console.attach(None)
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    async def _interactive(self) -> int:
        c = self.console
        while True:
            self._late_interrupt = False
            c.ask(c.style("you> ", "bold", "blue"), interruptible=True)
            if c.lost is not None:
                return self.output_lost_status()
            try:
                line = await self.reader.read_line()
            except InputInterrupted:
                c.answered("")
                c.line("bye (interrupted)")
                return 130
            except LineTooLong as exc:
                c.answered("")
                c.line(str(exc), "yellow")
                continue
            if line is None:
                c.answered("")
                c.line("bye")
                return self.status
            c.answered(self._echo(line))
            prompt = line.strip()
            if not prompt:
                continue
            outcome = await self._one(prompt)
            if c.lost is not None:
                return self.output_lost_status()
            if outcome == "quit":
                c.line("bye (interrupted)")
                return 130

    def _echo(self, line: str) -> str | None:
        """What to write after a line was read: the line itself when nothing showed it, the end
        of the line when the terminal showed it without one (input ended after it)."""
        if self.echo_input:
            return clean(line)
        return "" if self.reader.unterminated else None

    def output_lost_status(self) -> int:
        """The exit status once the output could not be written (see the module's notes)."""
        return 141 if isinstance(self.console.lost, BrokenPipeError) else 1

    async def _one(self, prompt: str) -> Outcome:
        """One run, rendered; its outcome."""
        if self.show_prompts:
            self.console.line(f"you> {clean(prompt)}", "bold", "blue")
        self._cancelling = False
        with abandoned_calls_shown():  # the view reports them: no log line beside it
            run = self.agent.start(prompt, approver=self._watched)
        self._run = run
        consumer = asyncio.ensure_future(self._render(run))
        self._consumer = consumer
        try:
            return await consumer
        except asyncio.CancelledError:
            if self.forced:
                return "quit"
            raise
        except Exception as exc:  # a bug in rendering: end the run cleanly and say so
            run.cancel()
            await run.result()
            self.status = 1
            self.console.line(
                f"error: the terminal could not show the run, so it was cancelled: "
                f"{type(exc).__name__}: {clean(str(exc))}",
                "red",
                error=True,
            )
            return "failed"
        finally:
            self._run = None
            self._consumer = None
            self.console.release(unfinished=True)  # what tools printed without ending a line

    async def _render(self, run: Run) -> Outcome:
        outcome: Outcome = "done"
        view = self.view
        view.cancel_hint = "; back to the prompt (Ctrl-C again or Ctrl-D quits)" * self._chat
        async for event in run.events():
            view.show(event)
            if self.console.lost is not None and not self._cancelling:
                self._cancelling = True  # nobody sees the run any more: stop it
                run.cancel()
            inner: Any = event
            while isinstance(inner, HelperEvent):  # a helper agent's call asks here too
                inner = inner.event
            if isinstance(inner, ApprovalRequested):
                with self.console.indented(view.prefix_of(event)):  # under the helper's call
                    await self._ask(run, inner.request)
            elif isinstance(event, StepPaused) and event.pause.kind == "repeat":
                await self._ask_repeat(run, event.pause)
            elif isinstance(event, RunFailed):
                self.status = 1
                outcome = "failed"
            elif isinstance(event, RunCancelled):
                outcome = "cancelled"
        return outcome

    # --- approval questions -------------------------------------------------------------------

    async def _ask(self, run: Run, request: ApprovalRequest) -> None:
        approver = self.approver
        if approver is None or self._cancelling or run.done():
            return  # the run is ending: the loop answers this call as cancelled
        if request.call.id not in {r.call.id for r in approver.pending()}:
            return  # already settled (or no longer waiting)
        c = self.console
        for line in self.view.arguments_block(request):
            c.line(line)
        self._asking, self._withdrawn = request.call.id, False
        try:
            answer = await self._preview(request)
            if answer is _ASK:
                if self._cancelling or run.done():
                    return  # the run is ending: the view reports it next
                if request.call.id not in {r.call.id for r in approver.pending()}:
                    c.line("  (no answer needed any more: this call was settled without it)")
                    return  # settled while the preview was computed: the events say how
                answer = await self._question(request)
            if answer is _GONE:
                return
        finally:
            self._asking = None
        if answer is None:
            c.answered("")
            c.line("  (no answer: the input ended)", "yellow")
            decision = Decision(False, "no answer: the input ended", by="terminal")
        else:
            assert isinstance(answer, str)
            c.answered(self._echo(answer))
            decision = parse_answer(answer)
        if not approver.resolve(request.call.id, decision, fingerprint=request.fingerprint):
            c.line("  (too late: this call was settled without this answer)", "yellow")

    async def _ask_repeat(self, run: Run, pause: StepPause) -> None:
        """Go on, allow repeats of the tool, or stop (the default, and at the end of input)."""
        approver = self.approver
        if approver is None or self._cancelling or run.done():
            return
        if pause.id not in {p.id for p in approver.paused()}:
            return  # already answered (or no longer waiting)
        c = self.console
        self._asking, self._withdrawn = pause.id, False
        try:
            while True:
                c.ask(self.view.repeat_question(pause))
                try:
                    answer = await self.reader.read_line()
                    break
                except InputInterrupted:
                    c.answered("")
                    return  # Ctrl-C (the run is cancelled) or answered without the person
                except LineTooLong as exc:
                    c.answered("")
                    c.line(str(exc), "yellow")
        finally:
            self._asking = None
        c.answered(self._echo(answer) if answer is not None else "")
        key = (answer or "").strip().lower()
        action = {"y": "next", "yes": "next", "a": "run", "always": "run"}.get(key, "stop")
        if not approver.resume(pause.id, Resume(action, by="terminal")):  # type: ignore[arg-type]
            c.line("  (too late: the run went on without this answer)", "yellow")

    async def _question(self, request: ApprovalRequest) -> object:
        """Ask, and read the answer: a line, None at the end of input, or _GONE when the call
        was settled without it (or Ctrl-C)."""
        c = self.console
        while True:
            c.ask(self.view.question(request))
            try:
                return await self.reader.read_line()
            except InputInterrupted:
                c.answered("")
                if self._withdrawn:  # the events that follow say how it was settled
                    c.line("  (no answer needed any more: this call was settled without it)")
                return _GONE  # or Ctrl-C: the run is being cancelled, the view reports it next
            except LineTooLong as exc:
                c.answered("")
                c.line(str(exc), "yellow")

    async def _preview(self, request: ApprovalRequest) -> object:
        """Wait for the call's preview (bounded) and show it before the question: _ASK then.

        At a terminal the person need not wait: Enter asks at once, and any other line typed
        meanwhile is the answer (returned as it is; None at the end of input, _GONE after
        Ctrl-C or when the call was settled). From a pipe the answers wait for the preview,
        which the agent's ``preview_timeout`` (and ``TerminalLimits.max_preview_wait``) bound.
        """
        previews = request.previews
        if not request.preview or previews is None:
            return _ASK
        c = self.console
        wait = self.view.limits.max_preview_wait
        if previews.timeout is not None:
            wait = min(wait, previews.timeout + 1.0)
        hint = "" if self.echo_input else "; press Enter to be asked without it"
        bound = f"up to {previews.timeout:g} s" if previews.timeout is not None else "a while"
        c.line(f"  … computing the preview of this call ({bound}{hint})", "dim")
        waiting = asyncio.ensure_future(previews.wait())
        pending: set[asyncio.Future[Any]] = {waiting}
        reading = None
        if not self.echo_input:  # a person at a terminal may answer at once
            reading = asyncio.ensure_future(self.reader.read_line())
            pending.add(reading)
        try:
            done, _ = await asyncio.wait(pending, timeout=wait, return_when="FIRST_COMPLETED")
        finally:
            for future in pending:
                future.cancel()
            if reading is not None:
                await asyncio.gather(reading, return_exceptions=True)
        if reading is not None and reading in done and not reading.cancelled():
            try:
                line = reading.result()
            except InputInterrupted:  # Ctrl-C, or the call was settled without an answer
                if self._withdrawn:
                    c.line("  (no answer needed any more: this call was settled without it)")
                return _GONE
            except LineTooLong as exc:
                c.line(str(exc), "yellow")
                return _ASK
            if line is not None and not line.strip():
                c.line("  (not waiting for the preview)", "dim")
                return _ASK
            return line
        event = waiting.result() if waiting in done and not waiting.cancelled() else None
        if event is not None:
            self.view.show_preview(event)
        elif not previews.closed:
            c.line(f"  ! the preview did not come within {wait:g} s: asking without it", "yellow")
        return _ASK
