"""How a run reads in a terminal: one handler per event, each writing whole lines.

:class:`TerminalView` only renders; asking the approval question (which needs input) is the
session's job, and it uses :meth:`TerminalView.call_text` and :meth:`TerminalView.question`.

When a run is cancelled (or fails) with calls still pending, the loop answers each of them as
cancelled; the view says so in the one line that ends the run rather than one line per call.
A function the loop gave up on (``ToolFinished.abandoned``) is reported truthfully: the end line
says it is still running, and a later line says when it really ended.

A helper agent's run (``agent.as_tool``: its events come as :class:`~nbagent.events.HelperEvent`)
is shown under the call that runs it by a view of its own, every line indented one level with a
rule at its left (``│``): its text, its calls and their results, its end; a helper of a helper
nests once more. Its approval questions are asked there too (:meth:`TerminalView.prefix_of`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._ground.formatting import error_text, traceback_text
from ..approvals.approval import ApprovalRequest
from ..events import (
    STOP_WORDS,
    AbandonedCall,
    AgentEvent,
    ApprovalResolved,
    AssistantTextDelta,
    HelperEvent,
    ReasoningTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunResult,
    RunStarted,
    StepFinished,
    StepResumed,
    StepRetried,
    StepStarted,
    ToolArgumentsChanged,
    ToolCallReady,
    ToolCallRepeated,
    ToolCallStarted,
    ToolFinished,
    ToolHookApplied,
    ToolPreviewed,
    ToolProgress,
)
from ..inspection.stepping import StepPause
from ..loop._repeats import ordinal
from ..redact import redact_secrets
from ..tools import ToolCall
from ._console import Console, clean, clean_strict, clip, one_line

__all__ = ["TerminalLimits", "TerminalView", "plural"]


@dataclass(frozen=True)
class TerminalLimits:
    """Bounds on what the terminal reads and shows; every one has a sane default.

    ``max_input_chars``: one typed line (a prompt or an answer). ``max_call_chars``: a call as
    shown on its line; longer arguments are shown in full (up to ``max_arguments_chars``) before
    the approval question. ``max_result_chars`` / ``max_result_lines``: a tool result.
    ``max_error_chars``: one error line. ``max_held_chars``: what tools may print while a
    question waits. ``progress_interval``: seconds between two progress lines of one call.
    ``max_preview_wait``: seconds the question waits for a call's preview at most (the agent's
    ``preview_timeout`` usually ends it sooner).
    """

    max_input_chars: int = 100_000
    max_call_chars: int = 300
    max_arguments_chars: int = 20_000
    max_result_chars: int = 2_000
    max_result_lines: int = 20
    max_error_chars: int = 500
    max_held_chars: int = 100_000
    progress_interval: float = 0.5
    max_preview_wait: float = 30.0


def plural(count: int, word: str) -> str:
    """``1 step``, ``2 steps``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _seconds(value: float) -> str:
    if value < 60:
        return f"{value:.1f} s"
    minutes, seconds = divmod(round(value), 60)
    return f"{minutes} min {seconds} s"


_STOPS = {
    **STOP_WORDS,
    "finished": "done",
    "terminated": "done: a tool ended the run",
    "max_steps": "stopped at the step limit (--max-steps)",
}

#: How a call came to be abandoned, by the status it was answered with.
_ABANDONED_WHEN = {"cancelled": "when its run was cancelled", "timeout": "after its timeout"}

_STEP_NOTES = {
    "length": "the model hit its output token limit; calls in this answer were not run",
    "content_filter": "the provider's content filter stopped the answer",
}


class TerminalView:
    """Writes the events of runs to a :class:`Console` as a readable transcript.

    ``debug`` adds tracebacks of failed tools and runs. ``cancel_hint`` is appended to the line
    that reports a cancelled run (the interactive session says how to quit there).
    ``abandoned`` lists the functions the loop gave up on in any run shown so far (each an
    :class:`~nbagent.events.AbandonedCall`); ``still_running()`` those not ended yet.
    """

    def __init__(
        self,
        console: Console,
        limits: TerminalLimits | None = None,
        *,
        debug: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console
        self.limits = limits or TerminalLimits()
        self.debug = debug
        self.clock = clock
        self.cancel_hint = ""
        self._started = clock()
        self._names: dict[str, str] = {}
        self._labels: dict[str, str] = {}  # call id -> short call text, to say which call
        self._last_call = ""  # the call the previous line was about
        self._streaming: dict[str, str] = {}
        self._step_output = False
        self._shown_denials: set[str] = set()
        self._progress_at: dict[str, float] = {}
        self._cancelled: list[ToolFinished] = []  # answered as cancelled, not reported yet
        self._previewed: set[tuple[str, int]] = set()  # (call id, revision) shown
        self._resolved: set[str] = set()  # calls whose approval was answered
        self._repeats: dict[str, int] = {}  # call id -> times: a repeat, said in one line
        self.abandoned: list[AbandonedCall] = []
        #: What this view's lines start with (a helper's run: one level per caller).
        self.prefix = ""
        self._helper_name = ""  # the tool that runs this view's run, for a helper's view
        self._helpers: dict[str, TerminalView] = {}  # helper runs' views, by run id

    def show(self, event: AgentEvent) -> None:
        """Render one event (ApprovalRequested is the session's: it asks the question)."""
        if self._cancelled and not _reports_cancelled(event):
            self._show_cancelled_calls()  # the run goes on: they were not the run's end
        handler = getattr(self, f"_on_{type(event).__name__}", None)
        if handler is not None:
            handler(event)

    def prefix_of(self, event: AgentEvent) -> str:
        """What the lines about ``event`` start with: a helper's event (one wrapper per level)
        is shown indented under its call, and so is the question it asks."""
        view = self
        while isinstance(event, HelperEvent):
            inner = view._helpers.get(event.run_id)
            if inner is None:
                break
            view, event = inner, event.event
        return view.prefix

    def _on_HelperEvent(self, event: HelperEvent) -> None:
        view = self._helpers.get(event.run_id)
        if view is None:
            view = TerminalView(self.console, self.limits, debug=self.debug, clock=self.clock)
            view.prefix = self.prefix + f"  {self.console.symbol('nest')} "
            view._helper_name = clean_strict(event.tool_name)
            view.abandoned = self.abandoned  # a helper's abandoned calls are the session's too
            self._helpers[event.run_id] = view
        self._last_call = ""  # the next line about this run's calls says which call
        with self.console.indented(view.prefix):
            view.show(event.event)

    def still_running(self) -> list[AbandonedCall]:
        """Abandoned functions (of any run shown) that have not ended yet."""
        self.abandoned[:] = [h for h in self.abandoned if not h.done()]  # shared with helpers'
        return list(self.abandoned)

    # --- text ---------------------------------------------------------------------------------

    def _on_RunStarted(self, event: RunStarted) -> None:
        self._started = self.clock()
        self._helpers.clear()
        if self._helper_name:
            asked = one_line(clean_strict(event.prompt), self.limits.max_call_chars)
            self.console.line(f"{self._helper_name}, its own run: {asked}", "dim")
        self._names.clear()
        self._labels.clear()
        self._last_call = ""
        self._shown_denials.clear()
        self._progress_at.clear()
        self._cancelled.clear()
        self.still_running()  # forget the ones that ended

    def _on_StepStarted(self, event: StepStarted) -> None:
        self._streaming.clear()
        self._step_output = False

    def _on_AssistantTextDelta(self, event: AssistantTextDelta) -> None:
        self.console.stream("text", event.text)
        self._step_output = True

    def _on_ReasoningTextDelta(self, event: ReasoningTextDelta) -> None:
        self.console.stream("reasoning", event.text)
        self._step_output = True

    def _on_StepRetried(self, event: StepRetried) -> None:
        c = self.console
        lost = []
        if self._step_output:
            lost.append("the partial answer above")
        if self._streaming:
            names = ", ".join(clean_strict(n) for n in self._streaming.values())
            lost.append(f"unfinished calls ({names}), which did not run")
        dropped = f"discarded {' and '.join(lost)}" if lost else "nothing was shown yet"
        when = f" in {_seconds(event.delay)}" if event.delay >= 0.05 else ""
        reason = one_line(clean(event.reason), self.limits.max_error_chars)
        c.line(
            f"{c.symbol('retry')} the model's answer broke ({reason}); {dropped}; asking again"
            f"{when} (retry {event.attempt})",
            "yellow",
        )
        self._streaming.clear()
        self._step_output = False

    # --- calls --------------------------------------------------------------------------------

    def _on_ToolCallStarted(self, event: ToolCallStarted) -> None:
        self._streaming[event.call_id] = event.name

    def call_text(self, call: ToolCall, input: Any, max_chars: int | None = None) -> str:
        """``name(key=value, …)`` for a call, cleaned, cut to ``max_chars``."""
        if isinstance(input, dict):
            args = ", ".join(
                f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in input.items()
            )
        elif input is None:
            args = call.arguments
        else:
            args = json.dumps(input, ensure_ascii=False, default=str)
        text = clean_strict(f"{call.name}({args})").replace("\n", "\\n")
        return clip(text, max_chars or self.limits.max_call_chars)

    def _on_ToolCallReady(self, event: ToolCallReady) -> None:
        self._streaming.pop(event.call.id, None)
        self._names[event.call.id] = event.call.name
        self._labels[event.call.id] = self.call_text(event.call, event.input, 60)
        self._last_call = event.call.id
        c = self.console
        c.line(f"{c.symbol('call')} {self.call_text(event.call, event.input)}", "cyan")

    def _about(self, call_id: str) -> str:
        """Which call a line is about, when the line before was about another one."""
        if call_id == self._last_call:
            return ""
        self._last_call = call_id
        return f"{self._labels.get(call_id, 'a call')}: "

    def arguments_block(self, request: ApprovalRequest) -> list[str]:
        """The full arguments, when the call's line had to cut them (shown before asking)."""
        full = self.call_text(request.call, request.input, max_chars=10**12)
        if len(full) <= self.limits.max_call_chars:
            return []
        try:
            pretty = json.dumps(request.input, ensure_ascii=False, indent=2, default=str)
        except (TypeError, ValueError):
            pretty = request.call.arguments
        if request.input is None:
            pretty = request.call.arguments
        text = clip(clean_strict(pretty), self.limits.max_arguments_chars)
        return ["  arguments in full:", *("    " + line for line in text.split("\n"))]

    def question(self, request: ApprovalRequest) -> str:
        """The approval question for one call (the session writes it and reads the answer)."""
        c = self.console
        self._last_call = request.call.id
        name = clean_strict(request.tool_name)
        call = self.call_text(request.call, request.input, max_chars=10**12)
        if len(call) > self.limits.max_call_chars:
            call = f"{name} with the arguments above"
        choices = f"[y]es, [n]o (default), [a]lways allow {name}, or type why not"
        return c.style(f"  ? Run {call}? ", "yellow", "bold") + c.style(f"{choices}: ", "yellow")

    def _on_ApprovalResolved(self, event: ApprovalResolved) -> None:
        self._resolved.add(event.call_id)
        c = self.console
        decision = event.decision
        reason = one_line(clean(decision.reason or ""), self.limits.max_error_chars)
        if decision.approved:
            note = f" ({reason})" if reason and decision.by != "terminal" else ""
            if decision.always and decision.by == "terminal":
                note = " (and from now on, without asking)"
            verb = "allowed by rule:" if decision.by == "rule" else "approved"
            if decision.by == "rule":
                note = f" {reason}"
            c.line(f"  {c.symbol('ok')} {self._about(event.call_id)}{verb}{note}", "green")
        else:
            self._shown_denials.add(event.call_id)
            about = self._about(event.call_id)
            c.line(f"  {c.symbol('fail')} {about}denied: {reason or 'no reason given'}", "red")

    def _on_ToolArgumentsChanged(self, event: ToolArgumentsChanged) -> None:
        """Say who changed a call's arguments and what they became (the call runs with them)."""
        c = self.console
        who = f"the hook {clean_strict(event.hook or '')}" if event.by == "hook" else "you"
        text = self.call_text(
            ToolCall(event.call_id, self._names.get(event.call_id, "")), event.arguments
        )
        c.line(
            f"  {c.symbol('more')} {self._about(event.call_id)}changed by {who}: now {text}",
            "yellow",
        )

    def _on_ToolHookApplied(self, event: ToolHookApplied) -> None:
        c = self.console
        detail = one_line(clean(event.detail), self.limits.max_error_chars)
        if event.action == "rewrote the result":
            detail = "the model reads its version; the result below is the tool's own"
        what = f"{event.stage}-tool hook {clean_strict(event.hook)} {event.action}"
        color = "yellow" if event.action == "rewrote the result" else "red"
        c.line(f"  ! {self._about(event.call_id)}{what}" + (f": {detail}" if detail else ""), color)

    def _on_ToolPreviewed(self, event: ToolPreviewed) -> None:
        """A preview the session did not show before its question (an approver other than the
        session's asked); none once the call was answered: it would only be noise then."""
        if (event.call_id, event.revision) in self._previewed or event.call_id in self._resolved:
            return
        self.show_preview(event)

    def show_preview(self, event: ToolPreviewed) -> None:
        """What the call would do, as text: its text (a table's text, clipped) and a line per
        image; or why there is none (the preview failed or did not finish in time)."""
        self._previewed.add((event.call_id, event.revision))
        c = self.console
        limits = self.limits
        about = self._about(event.call_id)
        if event.status != "done":
            text = one_line(clean(event.result.text), limits.max_error_chars)
            c.line(f"  ! {about}{text}", "yellow")  # it says the preview failed, and why
            return
        pieces = [clip(clean(event.result.text), limits.max_result_chars, limits.max_result_lines)]
        for image in event.result.images:
            size = f"{image.width}x{image.height}, " if image.width else ""
            pieces.append(f"[image: {image.mime_type}, {size}{len(image.data) // 1024} KB]")
        body = "\n".join(p for p in pieces if p) or "(an empty preview)"
        c.line(f"  {c.symbol('more')} {about}preview (what it would do; nothing has run yet):")
        c.line("    " + body.replace("\n", "\n    "))

    def _on_ToolProgress(self, event: ToolProgress) -> None:
        now = self.clock()
        last = self._progress_at.get(event.call_id)
        if last is not None and now - last < self.limits.progress_interval:
            return  # provisional and superseded soon: keep the terminal readable
        self._progress_at[event.call_id] = now
        name = clean_strict(self._names.get(event.call_id, ""))
        about = self._about(event.call_id) or f"{name}: "
        text = one_line(clean(event.update.text), self.limits.max_call_chars)
        if not text and event.update.images:
            text = f"{plural(len(event.update.images), 'image')}"
        c = self.console
        c.line(f"  {c.symbol('more')} {about}{text} ({_seconds(event.elapsed)})", "dim")

    def _on_ToolFinished(self, event: ToolFinished) -> None:
        if event.abandoned is not None:
            self._watch(event, event.abandoned)
        if event.status == "cancelled":
            self._cancelled.append(event)  # said with the run's end, or next if the run goes on
            return
        self._show_finished(event)

    def _show_cancelled_calls(self) -> None:
        events, self._cancelled = self._cancelled, []
        for event in events:
            self._show_finished(event)

    def _on_ToolCallRepeated(self, event: ToolCallRepeated) -> None:
        self._repeats[event.call_id] = event.times

    def _show_finished(self, event: ToolFinished) -> None:
        c = self.console
        limits = self.limits
        times = self._repeats.pop(event.call.id, 0)
        if times:  # its result is on screen already: the fold of a transcript is one line
            about = self._about(event.call.id)
            each = "it failed each time" if event.result.is_error else "the same result each time"
            said = f"the same call, {times} times: {each}"
            c.line(f"  {c.symbol('result')} {about}{said}", "dim")
            return
        original = getattr(event, "original", None)
        result = original if original is not None else event.result  # the tool's own
        if event.status == "done":
            text = clip(clean(result.text), limits.max_result_chars, limits.max_result_lines)
            pieces = [text] if text else []
            for image in result.images:
                size = f"{image.width}x{image.height}, " if image.width else ""
                pieces.append(f"[image: {image.mime_type}, {size}{len(image.data) // 1024} KB]")
            body = "\n".join(pieces) or "(an empty result)"
            if event.elapsed >= 1:
                body += c.style(f" ({_seconds(event.elapsed)})", "dim")
            about = self._about(event.call.id)
            c.line(f"  {c.symbol('result')} {about}" + body.replace("\n", "\n    "))
            return
        if event.status == "denied" and event.call.id in self._shown_denials:
            return  # the denial and its reason are already on screen
        text = clip(clean(result.text), limits.max_error_chars, 3).replace("\n", "\n    ")
        c.line(f"  {c.symbol('fail')} {self._about(event.call.id)}{text}", "red")
        if self.debug and event.traceback:
            c.line("    " + clean(event.traceback).rstrip().replace("\n", "\n    "), "dim")

    def _watch(self, event: ToolFinished, handle: AbandonedCall) -> None:
        """Say when an abandoned function really ends (from whichever thread it ends on)."""
        self.abandoned.append(handle)
        label = self._labels.get(event.call.id) or clean_strict(event.call.name)
        when = _ABANDONED_WHEN.get(event.status, "when its run stopped")
        console = self.console

        def ended(_: AbandonedCall) -> None:
            console.note(f"  ({label}, abandoned {when}, has now ended; its result was ignored)")

        handle.add_done_callback(ended)

    def _pending_note(self) -> str:
        """What happened to the calls the loop answered as cancelled when the run ended (and
        forget them): ``every pending call was answered as cancelled: …``; "" if none."""
        events, self._cancelled = self._cancelled, []
        if not events:
            return ""
        text = "every pending call was answered as cancelled: " + _names(events)
        running = [e for e in events if e.abandoned is not None and not e.abandoned.done()]
        if running:
            many = len(running) > 1
            text += (
                f"; {_names(running)} {'are' if many else 'is'} still running, and "
                f"{'their results' if many else 'its result'} will be ignored"
            )
        return one_line(text, self.limits.max_error_chars)

    # --- the end ------------------------------------------------------------------------------

    def repeat_question(self, pause: StepPause) -> str:
        """The question a repeat pause asks (the session writes it and reads the answer)."""
        c = self.console
        call = pause.calls[0]
        self._last_call = call.id
        name = clean_strict(call.name)
        text = (
            f"  ? The model asks for {self._labels.get(call.id, name)} a "
            f"{ordinal(pause.repeats + 1)} time (the last {pause.repeats} got nowhere). "
            "Go on? "
        )
        choices = f"[y]es, [a]llow repeats of {name} in this run, [n]o: stop the run (default): "
        return c.style(text, "yellow", "bold") + c.style(choices, "yellow")

    def _on_StepResumed(self, event: StepResumed) -> None:
        if event.kind != "repeat":
            return
        c = self.console
        if event.edits:  # a rule let it go on
            c.line(f"  {c.symbol('ok')} {'; '.join(clean(e) for e in event.edits)}", "green")
        elif event.action == "stop":
            c.line(f"  {c.symbol('fail')} stopped: the model was repeating itself", "red")

    def _on_StepFinished(self, event: StepFinished) -> None:
        note = _STEP_NOTES.get(str(event.finish_reason))
        if note:
            self.console.line(f"  ! {note}", "yellow")

    def summary(self, result: RunResult) -> str:
        """``done · 2 steps · 64 tokens (40 in, 24 out) · 0.4 s``."""
        usage = result.usage
        state = _STOPS.get(result.stop_reason, str(result.stop_reason))
        if result.stop_detail:  # which budget, and why it could not pay
            said = result.stop_detail.rstrip(".")
            state = f"stopped: {said[:1].lower()}{said[1:]}"
        parts = [
            state,
            plural(result.steps, "step"),
            f"{plural(usage.total_tokens, 'token')} "
            f"({usage.input_tokens} in, {usage.output_tokens} out)",
            _seconds(max(0.0, self.clock() - self._started)),
        ]
        return " · ".join(parts)

    def _on_RunFinished(self, event: RunFinished) -> None:
        self.console.line(f"[{self.summary(event.result)}]", "dim")

    def _on_RunCancelled(self, event: RunCancelled) -> None:
        c = self.console
        note = self._pending_note()
        answered = f" ({note})" if note else ""
        c.line(
            f"{c.symbol('fail')} {self.summary(event.result)}{answered}{self.cancel_hint}",
            "yellow",
        )

    def _on_RunFailed(self, event: RunFailed) -> None:
        c = self.console
        note = self._pending_note()
        if note:
            c.line(f"  {c.symbol('fail')} {note}", "red")
        error = event.error
        # its __str__ may be the person's (an exception a hook raised): read bounded
        said = error_text(error, limit=self.limits.max_error_chars * 4)
        if ": " not in said:
            said += ": (no message)"
        message = one_line(clean(redact_secrets(said)), self.limits.max_error_chars)
        c.line(
            f"error: the run failed: {message} [{self.summary(event.result)}]",
            "red",
            error=True,
        )
        if self.debug and error.__traceback__ is not None:
            trace = traceback_text(error)
            c.line(clean(redact_secrets(trace)).rstrip(), "dim", error=True)


def _reports_cancelled(event: AgentEvent) -> bool:
    """Events that may follow calls answered as cancelled without the run going on."""
    if isinstance(event, ToolFinished):
        return event.status == "cancelled"
    return isinstance(event, (RunCancelled, RunFailed))


def _names(events: list[ToolFinished]) -> str:
    """``remove, search (2 calls)``: the tools of some calls, each once, in order."""
    counts: dict[str, int] = {}
    for event in events:
        name = clean_strict(event.call.name)
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(name if n == 1 else f"{name} ({n} calls)" for name, n in counts.items())
