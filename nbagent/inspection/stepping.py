"""Step mode: the run pauses before each model request and before each batch of tool calls.

``agent.start(prompt, step=True)`` (``%agent --step`` in a notebook) makes the run stop at two
kinds of :class:`StepPause` and wait for a :class:`Resume`:

* ``"request"``: the request about to be sent (instructions, every message, the tools); the
  results the model is about to read may be rewritten or removed, the next request's
  instructions changed, or the model switched for it;
* ``"calls"``: the calls the model just asked for, before they are checked, approved and run.

A third kind comes without step mode: ``"repeat"``, before a call the model made again and
again with the same result (``repeats`` times; see :mod:`nbagent.loop._repeats`). ``"next"`` (Go
on) lets it run, ``"run"`` lets that tool repeat for the rest of the run without asking, and
``"stop"`` ends the run with ``stop_reason="repeated_call"``.

A pause is a decision point like an approval, through the same door: the run's approver gives
the resume (``await approver.pause(pause)``), so a notebook waits for **Next**, **Run to end** or
**Stop** with the cell mechanics of Approve, and a script or a test scripts them
(:class:`~nbagent.approvals.approval.ScriptedApprover`). An approver that cannot pause (``auto``,
``deny``, a callback) cannot step: ``start`` says so.

Every edit keeps the history's invariants: a rewritten or removed result still answers its
call, exactly once (a removed one says it was removed), and is marked ``edited`` in the history
(and so in a recording); an edit naming a call the model is not about to read the result of, or
leaving one unanswered, is refused, saying why (:meth:`StepPause.check`).

A rewritten result is untrusted as a tool's is (a person types it, or pastes 50 MB into the
bar): it goes through the same pipeline, :func:`~nbagent.content.checked_result` (images
decode-checked) and then the run's result limits (lone surrogates replaced, text beyond
``Limits.max_result_chars`` cut with a marker, extra images left out); instructions typed at a
pause have their lone surrogates replaced too, and more than :data:`MAX_PAUSE_INSTRUCTIONS`
characters of them are refused, saying so (cutting a person's instructions would change what
they asked for without their knowing).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .._history import clean_text, result_for_model
from ..content import TextPart, ToolResult, checked_result
from ..generation import Request
from ..limits import Limits
from ..messages import ToolMessage, ToolResultPart
from ..tools import ToolCall

#: Characters of instructions a pause accepts (a person may paste anything into the bar).
MAX_PAUSE_INSTRUCTIONS = 200_000

__all__ = [
    "REMOVED",
    "StepPause",
    "PauseKind",
    "Resume",
    "StepEditError",
    "next_step",
    "run_to_end",
    "stop_run",
]

PauseKind = Literal["request", "calls", "repeat"]
ResumeAction = Literal["next", "run", "stop"]

#: What a removed result says instead (the call stays answered, as every provider requires).
REMOVED = "[this result was removed by the person before the model read it]"

_ids = itertools.count(1)


class StepEditError(ValueError):
    """An edit at a pause that would break the history (a result without its call, a call left
    unanswered, a result of the wrong kind): refused, saying why."""


@dataclass(frozen=True)
class Resume:
    """How to go on from a pause: ``"next"`` (go on, pause again at the next point), ``"run"``
    (go on to the end without pausing) or ``"stop"`` (end the run, as Stop does).

    At a ``"request"`` pause: ``instructions`` replace the agent's for this request only;
    ``results`` rewrite what the model is about to read (call id → new text, a
    :class:`~nbagent.content.ToolResult` or what a tool may return); ``remove`` names results to
    remove (each then says :data:`REMOVED`); ``model`` (a model string or a Generator) answers
    this request only.
    """

    action: ResumeAction = "next"
    instructions: str | None = None
    results: Mapping[str, Any] = field(default_factory=dict)
    remove: tuple[str, ...] = ()
    model: Any = None
    by: str = ""

    @property
    def edits(self) -> bool:
        return bool(
            self.instructions is not None or self.results or self.remove or self.model is not None
        )


def next_step(**edits: Any) -> Resume:
    """Go on to the next pause (with edits, at a ``"request"`` pause)."""
    return Resume("next", **edits)


def run_to_end(**edits: Any) -> Resume:
    """Go on to the end of the run without pausing again."""
    return Resume("run", **edits)


def stop_run() -> Resume:
    """End the run here, every call answered (as the Stop button does)."""
    return Resume("stop")


@dataclass(frozen=True)
class StepPause:
    """The run waits here (see the module). ``request`` is what is about to be sent (at a
    ``"request"`` pause), ``results`` the tool results in it the model is about to read,
    ``calls`` what the model asked for (at a ``"calls"`` pause). ``id`` names the pause for a
    front end that answers it."""

    run_id: str
    step: int
    kind: PauseKind
    request: Request | None = None
    results: tuple[ToolResultPart, ...] = ()
    calls: tuple[ToolCall, ...] = ()
    model: str = ""
    id: str = field(default_factory=lambda: f"pause-{next(_ids)}")
    repeats: int = 0

    def check(self, resume: Resume) -> Resume:
        """``resume`` if it can be applied here; raises :class:`StepEditError` saying why not."""
        if not isinstance(resume, Resume):
            raise StepEditError(f"a pause is answered with a Resume, not {type(resume).__name__}")
        if resume.action not in ("next", "run", "stop"):
            raise StepEditError(f"unknown action {resume.action!r}: next, run or stop")
        if not resume.edits or resume.action == "stop":
            return resume
        if self.kind != "request":
            raise StepEditError(
                "edits are made at a pause before a model request (the calls are changed with "
                "Edit when they ask for approval)"
            )
        known = {r.call_id for r in self.results}
        for call_id in (*resume.results, *resume.remove):
            if call_id not in known:
                waiting = ", ".join(sorted(known)) or "none"
                raise StepEditError(
                    f"no result of call {call_id!r} is about to be read by the model (results "
                    f"here: {waiting}): an edit cannot add a result without its call"
                )
        both = set(resume.results) & set(resume.remove)
        if both:
            raise StepEditError(
                f"{', '.join(sorted(both))}: rewrite a result or remove it, not both"
            )
        results: dict[str, ToolResult] = {}
        for call_id, value in resume.results.items():
            if value is None:
                raise StepEditError(
                    f"the result of {call_id!r} cannot be None: every call keeps its one result "
                    "(remove it instead, and it says it was removed)"
                )
            results[call_id] = _checked(call_id, value)
        instructions = resume.instructions
        if instructions is not None:
            if not isinstance(instructions, str):
                raise StepEditError("instructions must be text")
            if len(instructions) > MAX_PAUSE_INSTRUCTIONS:
                raise StepEditError(
                    f"the instructions are {len(instructions):,} characters long: at most "
                    f"{MAX_PAUSE_INSTRUCTIONS:,} are sent from a pause (put a long text in a "
                    "tool result or a file the agent can read)"
                )
            instructions = clean_text(instructions)
        return replace(resume, results=results, instructions=instructions)


def _checked(call_id: str, value: Any) -> ToolResult:
    """A rewritten result as a tool's would be: text, a ToolResult, or whatever a tool may
    return (an image, a table …), converted and checked as a tool's return value is."""
    try:
        return checked_result(value)
    except Exception as exc:  # ResultError, ImageError, a to_markdown that raised …
        raise StepEditError(
            f"the result of {call_id!r} cannot be a {type(value).__name__}: {exc}"
        ) from None


def edited_results(
    message: ToolMessage, resume: Resume, limits: Limits | None = None
) -> tuple[ToolMessage, list[str]]:
    """``message`` with the results ``resume`` rewrites or removes, each marked edited; and a
    line per edit (for the exchange and the person). A rewritten result is bounded by
    ``limits`` (the run's) exactly as a tool's result is."""
    bounds = limits if limits is not None else Limits()
    parts: list[ToolResultPart] = []
    said: list[str] = []
    for part in message.results:
        if part.call_id in resume.remove:
            parts.append(replace(part, content=(TextPart(REMOVED),), is_error=False, edited=True))
            said.append(f"removed the result of {part.name} ({part.call_id})")
        elif part.call_id in resume.results:
            result = result_for_model(_checked(part.call_id, resume.results[part.call_id]), bounds)
            parts.append(
                replace(part, content=result.content, is_error=result.is_error, edited=True)
            )
            said.append(f"rewrote the result of {part.name} ({part.call_id})")
        else:
            parts.append(part)
    return ToolMessage(tuple(parts)), said
