"""Transcript: what happened in one run, kept from its events, in forms a saved notebook can hold.

Every front end feeds every event here. The transcript is the one record of what a person saw:
the live view reads its call records (:mod:`.records`), and when the run ends :mod:`.static`
renders it as ordinary outputs (sanitized HTML, Markdown, plain text, real images) plus JSON
metadata (the approval decisions, machine-readable). It holds no settings and no key: only what
the run itself showed. How it reads in words is :mod:`.wording`'s.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..._ground.formatting import error_text
from ...events import (
    STOP_WORDS,
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    AssistantTextDelta,
    HelperEvent,
    ReasoningTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    StepPaused,
    StepResumed,
    StepRetried,
    StepStarted,
    ToolArgumentsChanged,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolCallRepeated,
    ToolCallStarted,
    ToolFinished,
    ToolHookApplied,
    ToolPreviewed,
    ToolProgress,
    ToolStarted,
)
from ...generation import Usage
from ...inspection.stepping import StepPause
from ...loop._timing import TimelineBuilder
from ...timeline import Timeline
from .records import Block, CallRecord, Change, NoteRecord, ReasoningRecord, TextRecord
from .render import pretty_arguments
from .wording import call_line, resumed_words, seconds

#: How many helper runs (``agent.as_tool``) one transcript keeps, each with its own events.
_MAX_HELPER_RUNS = 64

#: How much of the final answer the run's metadata record keeps.
_RECORD_TEXT = 1_000

__all__ = ["Transcript"]


#: Longest argument value the run's saved record keeps as JSON (larger ones as a note).
_RECORD_ARGUMENTS = 10_000


def _bounded(value: Any) -> Any:
    try:
        size = len(json.dumps(value, ensure_ascii=False))
    except (TypeError, ValueError):
        return None
    return value if size <= _RECORD_ARGUMENTS else f"({size:,} characters of JSON, not kept here)"


def _redacted(value: Any, depth: int = 0) -> Any:
    """``value`` with credential-shaped text in every string (keys too) shown as ``***``."""
    from ...redact import redact_secrets

    if isinstance(value, str):
        return redact_secrets(value)
    if depth > 64:
        return None
    if isinstance(value, dict):
        return {redact_secrets(str(k)): _redacted(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v, depth + 1) for v in value]
    return value


@dataclass
class Transcript:
    """The run so far; :meth:`handle` every event, then render."""

    prompt: str = ""
    run_id: str = ""
    model: str = ""
    blocks: list[Block] = field(default_factory=list)
    calls: dict[str, CallRecord] = field(default_factory=dict)
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    error: str | None = None
    saved_to: str | None = None
    not_saved: str | None = None  # why the run's recording could not be written
    #: what the run cost, in words (``$0.0012``, ``price unknown``), once it ended; "": not priced
    cost_text: str = ""
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None
    clock: Any = field(default=time.monotonic, repr=False)
    timing: TimelineBuilder | None = field(default=None, repr=False)
    #: What the model saw and said at each step (from the run's result, at its end).
    exchanges: tuple[Any, ...] = field(default=(), repr=False)
    #: Repeat pauses waiting, by id (their words say which call, when they end).
    pauses: dict[str, StepPause] = field(default_factory=dict, repr=False)
    #: A typed run's validated answer as JSON (``output=``); ``answered`` says whether there
    #: is one at all (a valid answer may be ``null``, which is not "no answer").
    answer: Any = None
    answered: bool = False
    #: Why the run stopped, in one sentence, where its stop reason alone does not say (a
    #: budget that was spent or could not be kept): ``RunResult.stop_detail``.
    stop_detail: str = ""
    #: How a typed run answers (RunStarted's ``answer_mode``); "" for a run that answers text.
    answer_mode: str = ""
    #: Helper agents' runs, each a transcript of its own, by the id of the call that ran it.
    helpers: dict[str, list[Transcript]] = field(default_factory=dict, repr=False)
    _helper_runs: dict[str, Transcript] = field(default_factory=dict, repr=False)
    #: ``%agent serve``: its header, footer and request view in place of a run's (a
    #: :class:`.servingview.ServingForms`); None for a run.
    serving: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.timing is None:
            self.timing = TimelineBuilder(clock=self.clock, started=self.clock())

    def timeline(self) -> Timeline | None:
        """The run over time, when it is worth a picture: two calls or more (concurrent ones
        side by side), a wait for a person, a retried answer, or four steps or more."""
        if self.timing is None:
            return None
        served = self.serving.calls_count() if self.serving is not None else None
        built = self.timing.build(self.stop_reason, calls=served)
        if self.cost_text:
            built = dataclasses.replace(built, cost=self.cost_text)
        calls = sum(1 for s in built.spans if s.kind == "tool")
        notable = any(s.kind in ("approval", "retry") for s in built.spans)
        return built if calls >= 2 or notable or built.steps >= 4 else None

    @property
    def elapsed(self) -> float:
        return (self.ended if self.ended is not None else self.clock()) - self.started

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    def handle(self, event: AgentEvent) -> None:
        if isinstance(event, HelperEvent):  # a helper's run: kept apart, under its call
            self._helper(event)
            return
        if self.timing is not None:
            self.timing.add(event)
        if isinstance(event, AssistantTextDelta):
            last = self.blocks[-1] if self.blocks else None
            if not isinstance(last, TextRecord) or last.step != event.step:
                last = TextRecord(event.step)
                self.blocks.append(last)
            last.add(event.text)
        elif isinstance(event, ToolArgumentsDelta):
            found = self.calls.get(event.call_id)
            if found is not None:
                found.parts.append(event.delta)
        elif isinstance(event, ReasoningTextDelta):
            last = self.blocks[-1] if self.blocks else None
            if not isinstance(last, ReasoningRecord) or last.step != event.step:
                last = ReasoningRecord(event.step)
                self.blocks.append(last)
            last.add(event.text)
        elif isinstance(event, ToolCallStarted):
            record = CallRecord(event.call_id, event.name, event.step, event.title)
            record.code_arguments = dict(event.code_arguments)
            self.calls[event.call_id] = record
            self.blocks.append(record)
        elif isinstance(event, ToolCallReady):
            record = self._call(event.call.id, event.call.name, event.step)
            record.arguments = event.call.arguments
            record.input = event.input
            record.status = "ready"
        elif isinstance(event, ApprovalRequested):
            record = self._call(event.request.call.id, event.request.call.name)
            record.approval_asked = True
            record.asked_at = self.clock()
            record.status = "waiting"
            record.timeout = event.request.timeout
            record.has_preview = event.request.preview
        elif isinstance(event, ToolArgumentsChanged):
            found = self.calls.get(event.call_id)
            if found is not None:
                found.changes.append(Change(event.by, event.previous, event.arguments, event.hook))
                found.executed = event.arguments
        elif isinstance(event, ToolHookApplied):
            found = self.calls.get(event.call_id)
            if found is not None:
                detail = (
                    f": {event.detail}"
                    if event.detail and event.action != "rewrote the result"
                    else ""
                )
                found.hook_notes.append(
                    f"{event.stage}-tool hook {event.hook} {event.action}{detail}"
                )
        elif isinstance(event, ToolPreviewed) and event.call_id in self.calls:
            found = self.calls[event.call_id]
            if event.revision == 0:
                found.preview = event.result
                found.preview_status = event.status
            elif found.edit_preview is None or event.revision > found.edit_preview.revision:
                found.edit_preview = event  # an older edit's preview never replaces a newer one
        elif isinstance(event, ApprovalResolved):
            found = self.calls.get(event.call_id)
            if found is not None:
                found.decision = event.decision
                if found.asked_at is not None:
                    found.waited = self.clock() - found.asked_at
                if found.open:
                    found.status = "ready" if event.decision.approved else "denied"
        elif isinstance(event, ToolStarted):
            record = self._call(event.call.id, event.call.name)
            record.status = "running"
            record.started = self.clock()
            if event.input is not None:
                record.executed = event.input
        elif isinstance(event, ToolProgress):
            found = self.calls.get(event.call_id)
            if found is not None and event.update.text:
                found.progress = event.update.text
        elif isinstance(event, ToolFinished):
            record = self._call(event.call.id, event.call.name)
            record.status = event.status
            original = getattr(event, "original", None)
            record.result = original if original is not None else event.result
            record.model_result = event.result if original is not None else None
            record.is_error = record.result.is_error
            if record.started is not None:
                record.ran = self.clock() - record.started
            record.traceback = event.traceback
            handle = getattr(event, "abandoned", None)
            if handle is not None:
                record.abandoned = True
        elif isinstance(event, StepRetried):
            self._drop_step(event.step)
            self.blocks.append(
                NoteRecord(
                    event.step,
                    f"The request was sent again ({event.reason}; retry {event.attempt}); "
                    "anything this step had shown was discarded.",
                )
            )
        elif isinstance(event, RunStarted):
            self.run_id, self.model = event.run_id, event.model
            self.answer_mode = event.answer_mode
            self.prompt = event.prompt or self.prompt  # a run with no prompt keeps its label
        elif isinstance(event, StepStarted):
            self.steps = event.step
        elif isinstance(event, StepFinished):
            self.usage = self.usage + event.usage
        elif isinstance(event, ToolCallRepeated):
            self._fold(event)
        elif isinstance(event, StepPaused) and event.pause.kind == "repeat":
            self.pauses[event.pause.id] = event.pause
        elif isinstance(event, StepResumed):
            pause = self.pauses.pop(event.pause_id, None)
            self.blocks.append(NoteRecord(event.step, resumed_words(event, pause)))
        elif isinstance(event, (RunFinished, RunFailed, RunCancelled)):
            self.exchanges = tuple(event.result.exchanges)
            self.end(event.result.stop_reason, event.result.usage)
            self.stop_detail = event.result.stop_detail
            if event.result.has_output:  # never ``output is None``: None may be the answer
                from .values import answer_json

                self.answered = True
                self.answer = _redacted(answer_json(event.result.output))
                if self.answer_mode == "native":  # its JSON text is the answer shown below
                    final = event.result.steps
                    self.blocks = [
                        b
                        for b in self.blocks
                        if not (isinstance(b, TextRecord) and b.step == final)
                    ]
            if isinstance(event, RunFailed):
                self.error = error_text(event.error)  # bounded: it may be the person's

    def _helper(self, event: HelperEvent) -> None:
        inner = self._helper_runs.get(event.run_id)
        if inner is None:
            if len(self._helper_runs) >= _MAX_HELPER_RUNS:
                return  # bounded: the call's own result still says what the helper answered
            inner = Transcript(prompt=f"(asked by the call to {event.tool_name})", clock=self.clock)
            self._helper_runs[event.run_id] = inner
            self.helpers.setdefault(event.call_id, []).append(inner)
        inner.handle(event.event)  # a helper's helper: wrapped once more, nested once more

    def _fold(self, event: ToolCallRepeated) -> None:
        """A repeat: its record leaves the blocks (it stays in ``calls``, for the record) and
        the call it repeats counts it."""
        first, again = self.calls.get(event.first_call_id), self.calls.get(event.call_id)
        if first is None or again is None or first is again:
            return
        first.times = max(first.times, event.times)
        first.repeats.append(event.call_id)
        again.repeat_of = first.call_id
        self.blocks = [b for b in self.blocks if b is not again]

    def _drop_step(self, step: int) -> None:
        """A retried step: what it streamed so far is void (nothing of it had run)."""
        kept: list[Block] = []
        for block in self.blocks:
            if block.step == step and not isinstance(block, NoteRecord):
                if isinstance(block, CallRecord):
                    self.calls.pop(block.call_id, None)
                continue
            kept.append(block)
        self.blocks = kept

    def end(self, stop_reason: str, usage: Usage | None = None, error: str | None = None) -> None:
        """Close the transcript (also used when the run never started or crashed)."""
        if self.ended is None:
            self.ended = self.clock()
        self.stop_reason = stop_reason
        if usage is not None:
            self.usage = usage
        if error is not None:
            self.error = error
        for record in self.calls.values():
            if record.open:
                if record.started is not None:
                    record.ran = self.ended - record.started
                if record.asked_at is not None and record.decision is None:
                    record.waited = self.ended - record.asked_at
                record.status = "cancelled"

    def _call(self, call_id: str, name: str, step: int = 0) -> CallRecord:
        found = self.calls.get(call_id)
        if found is None:
            found = CallRecord(call_id, name, step)
            self.calls[call_id] = found
            self.blocks.append(found)
        return found

    def text_blocks(self) -> list[TextRecord]:
        return [b for b in self.blocks if isinstance(b, TextRecord)]

    # --- renderings ---------------------------------------------------------------------------

    def footer(self) -> str:
        """One line: stop reason, steps, tokens, time (a serving: its calls, time)."""
        if self.serving is not None:
            return str(self.serving.footer(self))
        state = STOP_WORDS.get(self.stop_reason or "", self.stop_reason or "running")
        if self.stop_detail:  # which budget, and why it could not pay: the person's question
            said = self.stop_detail.rstrip(".")
            state = f"stopped: {said[:1].lower()}{said[1:]}"
        tokens = f"{self.usage.input_tokens:,} in / {self.usage.output_tokens:,} out tokens"
        plural = "" if self.steps == 1 else "s"
        cost = f" · {self.cost_text}" if self.cost_text else ""
        return f"{state} · {self.steps} step{plural} · {tokens}{cost} · {seconds(self.elapsed)}"

    def call_line(self, record: CallRecord, now: float | None = None) -> str:
        """Status words of one call: decision, status, time."""
        return call_line(record, now)

    def call_arguments(self, record: CallRecord) -> str:
        """The call's arguments for a person: indented JSON once known, else as streamed (for
        a tool that takes code, the arguments other than the code: see ``CallRecord.code``)."""
        if record.input == {}:
            return ""
        code = record.code()
        if code is not None:
            return pretty_arguments(code[3], "") if code[3] else ""
        if record.input is not None:
            return pretty_arguments(record.input, record.arguments)
        return record.arguments

    def to_metadata(self) -> dict[str, Any]:
        """JSON-ready record: prompt, model, each call with its approval decision, totals.

        Saved with the notebook, so credential-shaped text anywhere in it is shown as ``***``
        (a hook may put a token into the arguments that run).
        """
        return dict(_redacted(self._metadata()))

    def _metadata(self) -> dict[str, Any]:
        calls = []
        for record in self.calls.values():
            decision = record.decision
            binding = decision.binding if decision is not None else None
            calls.append(
                {
                    "id": record.call_id,
                    "name": record.name,
                    "arguments": record.arguments,
                    "proposed_arguments": _bounded(record.input),
                    "executed_arguments": _bounded(record.executed),
                    "changes": [
                        {"by": c.by, "hook": c.hook, "arguments": _bounded(c.arguments)}
                        for c in record.changes
                    ],
                    "hooks": list(record.hook_notes),
                    "binding": None
                    if binding is None
                    else {
                        "run_id": binding.run_id,
                        "call_id": binding.call_id,
                        "arguments_sha256": binding.arguments_hash,
                    },
                    "status": record.status,
                    "is_error": record.is_error,
                    "repeat_of": record.repeat_of,
                    "times": record.times,
                    "ran": round(record.ran, 3),
                    "waited": round(record.waited, 3),
                    "approval": None
                    if decision is None
                    else {
                        "approved": decision.approved,
                        "reason": decision.reason,
                        "by": decision.by,
                        "always": decision.always,
                    },
                }
            )
        texts = [b.text for b in self.blocks if isinstance(b, TextRecord)]
        last = texts[-1] if texts else ""
        return {
            "version": 1,
            "run_id": self.run_id,
            "prompt": self.prompt,
            "model": self.model,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "steps": self.steps,
            "recording": self.saved_to,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "elapsed": round(self.elapsed, 3),
            # the answer's start (the outputs hold all of it): a record, not a second copy
            "text": last[:_RECORD_TEXT],
            "text_length": len(last),
            "calls": calls,
        }
