"""The repeat guard: a run that makes the same call again and again, getting nowhere.

Weak and strong models alike fall into loops: ``list_variables {}`` twenty times, each answer the
same, until the step limit. The guard sees them and says so, in three ways:

* **to the model**: a repeated call's result ends with a note saying how many times it made
  this exact call and got this same result (or failed);
* **to front ends**: :class:`~nbagent.events.ToolCallRepeated`, so that they show one card with
  a count ("the same call, 4 times") instead of one card per repeat;
* **to the person**: before the call would be made once more than ``Limits.max_repeats``
  allows, the run pauses as an approval does (a :class:`~nbagent.inspection.stepping.StepPause` of
  kind ``"repeat"``: **Go on** / **Stop**); where nobody can answer (an approver without ``pause``,
  as ``auto``, ``deny`` and a plain script are), the call is answered without running and the
  run ends with ``stop_reason="repeated_call"``, every call answered.

What counts as a repeat (and why): a call is its tool and its arguments as canonical JSON
(sorted keys), so ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` are one call. A call is
*progress* when the run has not made it before, or its result (what the model reads: text and
images) differs from the one it gave last time: a job polled until it finishes is progress at
the poll whose answer changed. Every error counts as the same result: a call that failed and
fails again with the same arguments got nowhere, however its error is worded (a traceback
names the step it ran at). Progress anywhere starts every count afresh. A call that is not
progress is counted: the *times* of a call is how many times it returned that same result
since the run last made progress (1 the first time). From 2 on it is a repeat. So ``A A A``
counts 1, 2, 3; ``A B A B A`` (both answering the same each time) counts A 1, 1, 2 (B's
first call was progress); and ``A B1 A B2 A`` (B with new arguments each time) never counts
past 1: the run is doing something else between the looks.

A rule (``allow repeats TOOL``, see :mod:`nbagent.approvals.rules`) lets a tool repeat without
asking;
**Go on** allows ``max_repeats`` more before asking again, and a resume of action ``"run"``
stops asking about that tool for the rest of the run.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._history import CheckedCall, result_for_model
from ..content import ImagePart, TextPart, ToolResult, error_result
from ..events import AgentEvent, StepPaused, StepResumed, ToolCallRepeated
from ..inspection.stepping import Resume, StepEditError, StepPause
from ..limits import Limits
from ._execution import Outcome

if TYPE_CHECKING:
    from ._loopstate import RunState

__all__ = ["RepeatGuard", "call_key", "ordinal", "repeat_note"]


#: ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, with the
#: encoder built once rather than for every call.
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def call_key(name: str, arguments: Any, raw: str = "") -> str:
    """One call as the guard tells calls apart: the SHA-256 of its tool and its arguments as
    canonical JSON (sorted keys, no spaces); arguments that are not JSON count by their text."""
    try:
        text = _canonical(arguments)
    except (TypeError, ValueError, RecursionError):
        text = "\0raw\0" + raw
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass") + b"\0")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _result_digest(result: ToolResult) -> str:
    """What the model reads of a result, as a digest: two results are the same when it is.

    Every error is the same result: a call that failed with these arguments and fails again
    told the model nothing new, whatever the words (a traceback names the step it ran at, a
    server's error a request id), and that is the loop to catch.
    """
    if result.is_error:
        return "error"
    digest = hashlib.sha256(b"ok")
    for part in result.content:
        if isinstance(part, TextPart):
            digest.update(b"\0text\0" + part.text.encode("utf-8", "surrogatepass"))
        elif isinstance(part, ImagePart):
            digest.update(b"\0image\0" + part.mime_type.encode() + b"\0" + part.data)
    return digest.hexdigest()


def ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th … 11th, 12th, 13th, 21st."""
    if 10 <= number % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def repeat_note(name: str, times: int, limit: int, failed: bool = False) -> str:
    """The note a repeated call's result ends with (the same words for the same count, so a
    replayed run sends the same requests)."""
    if failed:
        text = (
            f"[nbagent: you have now made this exact call ({name} with the same arguments) "
            f"{times} times, and it failed each time. Repeating it will not make it work: "
            "change the arguments, or try something else."
        )
    else:
        text = (
            f"[nbagent: you have now made this exact call ({name} with the same arguments) "
            f"{times} times, and it returned this same result each time. Repeating it will "
            "not change the result: use it, or try something else."
        )
    if times >= limit:
        text += " Making it again stops the run unless the person lets it go on."
    return text + "]"


@dataclass
class _Streak:
    """One call's count: the digest of its last result, how many times in a row since the
    run's last progress it gave it, the call that began the count, and when the guard asks."""

    digest: str
    times: int
    first: str
    epoch: int
    threshold: int
    step: int  # the step it was last counted at
    before: int = 0  # its times when that step began


class RepeatGuard:
    """The run's repeat counts (see the module). ``Limits.max_repeats`` None turns the guard
    off: no notes, no fold events, no pause; so does a model whose ``repeat_guard`` is False
    (a replay of a recording made before the guard: it replays as it was recorded)."""

    def __init__(self, limits: Limits, generator: Any = None) -> None:
        self.limits = limits
        recorded_without = getattr(generator, "repeat_guard", True) is False
        self.limit = None if recorded_without else limits.max_repeats
        self._streaks: dict[str, _Streak] = {}
        self._held: set[str] = set()  # calls the guard answered itself: not counted
        self._keys: dict[str, str] = {}  # call id -> its key, from hold to seen
        self._folds: dict[str, ToolCallRepeated] = {}  # call id -> its fold, from seen to fold
        self._epoch = 0
        self._free_tools: set[str] = set()  # "go on without asking" for the rest of the run
        #: Set once a repeat stopped the run: the loop ends after this batch.
        self.stopped = False

    async def hold(self, run: RunState, step: int, checked: CheckedCall) -> Outcome | None:
        """Before a call: None to let it go on, or how it was answered unrun (the run was
        stopped here). Asks the run's approver once the call reached its threshold, as it
        stood when the call's step began (the calls of one answer are judged alike)."""
        call, limit = checked.call, self.limit
        if limit is None or self._ignored(checked):
            return None
        key = self._keys[call.id] = call_key(call.name, checked.input, call.arguments)
        if self.stopped or call.name in self._free_tools:
            return None
        streak = self._streaks.get(key)
        if streak is None or streak.epoch != self._epoch:
            return None
        times = streak.times if streak.step < step else streak.before
        ended = "failed" if streak.digest == "error" else "returned the same result"
        if times < streak.threshold:
            return None
        pause = StepPause(run.id, step, "repeat", calls=(call,), repeats=times)
        resume, why = await self._ask(run, pause)
        if resume.action == "stop":
            self.stopped = True
            self._held.add(call.id)
            self._keys.pop(call.id, None)
            text = (
                f"This call was not run, and the run was stopped: {call.name} with these "
                f"arguments {ended} {times} times in a row ({why})."
            )
            return Outcome(error_result(text), "denied")
        if resume.action == "run":
            self._free_tools.add(call.name)
        streak.threshold = times + limit
        return None

    async def _ask(self, run: RunState, pause: StepPause) -> tuple[Resume, str]:
        """The resume for a repeat pause, and words for a stop: a rule's, the person's through
        the approver's ``pause``, or a stop where nobody can answer (or the answer failed)."""
        approver = run.approver
        known = getattr(approver, "known_resume", None)
        if known is not None:
            try:
                found = known(pause)
            except Exception:  # a rule that cannot be read allows nothing: ask instead
                found = None
            if isinstance(found, Resume) and found.action != "stop":
                said = (f"allowed by the rule `{found.by}`",) if found.by else ()
                run.emit(StepResumed(pause.id, pause.step, found.action, said, "repeat"))
                return found, ""
        pauser = getattr(approver, "pause", None)
        if pauser is None:
            return Resume("stop"), "nobody could be asked whether to go on"
        run.emit(StepPaused(pause))
        timeout = run.agent.approval_timeout
        why = "the person stopped it"
        try:
            answer = pauser(pause)
            if inspect.isawaitable(answer):
                answer = await asyncio.wait_for(_awaited(answer), timeout)
            resume = pause.check(answer)
        except TimeoutError:
            assert timeout is not None
            resume, why = Resume("stop"), f"nobody answered within {timeout:g} s"
        except StepEditError as exc:
            resume, why = Resume("stop"), f"the answer was refused: {exc}"
        except Exception as exc:  # an approver of the user's: its failure stops, saying so
            resume, why = Resume("stop"), f"the approver failed: {type(exc).__name__}: {exc}"
        run.emit(StepResumed(pause.id, pause.step, resume.action, (), "repeat"))
        return resume, why

    def _ignored(self, checked: CheckedCall) -> bool:
        """Off, or a call the loop refused before reading its arguments (too many in one
        answer, too large …): what it would repeat is not known."""
        return self.limit is None or checked.problem is not None or checked.call.id in self._held

    def seen(
        self, step: int, checked: CheckedCall, outcome: Outcome
    ) -> tuple[ToolResult, ToolResult | None]:
        """After a call: the result the model reads (within the limits, with the note when
        it repeats) and what the person sees when that differs (``ToolFinished.original``)."""
        shown = result_for_model(outcome.result, self.limits)
        if self.limit is None or self._ignored(checked):
            return shown, outcome.original
        call = checked.call
        key = self._keys.pop(call.id, None) or call_key(call.name, checked.input, call.arguments)
        digest = _result_digest(shown)
        streak = self._streaks.get(key)
        if streak is None or streak.digest != digest:  # progress: every count starts afresh
            self._epoch += 1
            self._streaks[key] = _Streak(digest, 1, call.id, self._epoch, self.limit, step)
            return shown, outcome.original
        if streak.epoch != self._epoch:  # the same answer again, after progress elsewhere
            self._streaks[key] = _Streak(digest, 1, call.id, self._epoch, self.limit, step)
            return shown, outcome.original
        if streak.step != step:
            streak.step, streak.before = step, streak.times
        streak.times += 1
        note = TextPart(repeat_note(call.name, streak.times, streak.threshold, shown.is_error))
        if streak.first != call.id:
            self._folds[call.id] = ToolCallRepeated(call.id, call.name, streak.first, streak.times)
        noted = ToolResult((*shown.content, note), shown.is_error, shown.terminate, shown.value)
        return noted, outcome.original or shown

    def fold(self, emit: Callable[[AgentEvent], None], checked: CheckedCall) -> None:
        """Emit the fold event for a call :meth:`seen` just counted as a repeat."""
        folded = self._folds.pop(checked.call.id, None)
        if folded is not None:
            emit(folded)


async def _awaited(value: Any) -> Any:
    return await value
