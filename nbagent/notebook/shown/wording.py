"""How a run reads to a person, in words: durations, decisions, a call's status line, what
changed its arguments, and how a step-mode pause ended. The live views and the saved outputs
(:mod:`.static`) say it the same way, from the same :mod:`.records`.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...approvals.approval import Decision
    from ...events import StepResumed
    from ...inspection.stepping import StepPause
    from .records import CallRecord

__all__ = [
    "PAUSE_MARK",
    "call_line",
    "change_lines",
    "decision_words",
    "resumed_words",
    "seconds",
]


def seconds(value: float) -> str:
    """A duration for people: "0.3 s", "<0.1 s", "2 min 5 s"."""
    if value < 0.05:
        return "<0.1 s"
    if value < 60:
        return f"{value:.1f} s"
    minutes, rest = divmod(round(value), 60)
    return f"{minutes} min {rest} s"


def decision_words(decision: Decision) -> str:
    """How a decision reads to a person: "approved by you", "denied by policy: …"."""
    who = {
        "person": "by you",
        "always": "(always allowed this session)",
        "auto": "by policy (auto)",
        "deny": "by policy",
        "rule": "by rule",
        "script": "by script",
        "timeout": "(nobody answered)",
        "error": "",
    }.get(decision.by, f"by {decision.by}" if decision.by else "")
    verb = "approved" if decision.approved else "denied"
    if decision.by == "rule":
        verb = "allowed" if decision.approved else "denied"
    words = f"{verb} {who}".strip()
    if decision.always and decision.by == "person":
        words += " (always allow this tool)"
    if decision.approved and decision.arguments is not None and decision.by == "person":
        words += " with your edit"
    if (not decision.approved or decision.by == "rule") and decision.reason:
        words += f": {decision.reason}"
    return words


_STATUS_WORDS = {
    "streaming": "receiving arguments…",
    "ready": "",
    "waiting": "waiting for approval",
    "running": "running",
}


#: Marks a step-mode pause. Not U+23F8 (the pause symbol), which many fonts lack (Debian's
#: chromium with DejaVu shows it as an empty box).
PAUSE_MARK = "‖"


def resumed_words(event: StepResumed, pause: StepPause | None = None) -> str:
    """How a step-mode pause (or a repeat pause, ``pause`` when known) ended, in one line (the
    saved run keeps it)."""
    if event.kind == "repeat":
        return _repeat_words(event, pause)
    action = {
        "next": "went on to the next step",
        "run": "went on to the end without pausing",
        "stop": "stopped the run",
    }.get(event.action, event.action)
    edits = f"; before it: {'; '.join(event.edits)}" if event.edits else ""
    where = "before running its calls" if event.kind == "calls" else "before the model request"
    return f"{PAUSE_MARK} step {event.step}: paused {where}, then {action}{edits}"


def _repeat_words(event: StepResumed, pause: StepPause | None) -> str:
    what = "the same call again"
    if pause is not None and pause.calls:
        what = f"{pause.calls[0].name} again, after {pause.repeats} times that got nowhere"
    action = {
        "next": "went on",
        "run": "let it repeat for the rest of the run",
        "stop": "stopped the run",
    }.get(event.action, event.action)
    said = f" ({'; '.join(event.edits)})" if event.edits else ""
    return f"{PAUSE_MARK} step {event.step}: the model asked for {what}; {action}{said}"


def call_line(record: CallRecord, now: float | None = None) -> str:
    """How one call stands, in words: "approved by you after 2.1 s · done in 0.3 s"."""
    clock = now if now is not None else time.monotonic()
    words = []
    if record.decision is not None:
        decided = decision_words(record.decision)
        if record.waited >= 0.05 and record.decision.by in ("person", "timeout"):
            decided += f" after {seconds(record.waited)}"
        words.append(decided)
    elif record.approval_asked and record.open and record.asked_at is not None:
        waiting = f"waiting for approval · {seconds(clock - record.asked_at)}"
        if record.timeout is not None:
            waiting += f" (answered “approval timed out” after {seconds(record.timeout)})"
        words.append(waiting)
    status = _STATUS_WORDS.get(record.status, record.status)
    if record.status == "waiting" and record.decision is None and record.approval_asked:
        status = ""  # said above, with the time waited
    if record.status == "denied" and record.decision is not None:
        status = ""  # the decision says it
    if record.status == "running" and record.started is not None:
        status = f"running · {seconds(clock - record.started)}"
    elif record.started is not None and not record.open:
        status = f"{status} in {seconds(record.ran)}" if status else seconds(record.ran)
    if status:
        words.append(status)
    if record.times >= 2:
        each = "it failed each time" if record.is_error else "the same result each time"
        words.append(f"the same call, {record.times} times ({each})")
    if record.abandoned:
        if record.ended_late is None:
            words.append("its function is still running (a thread cannot be stopped)")
        else:
            words.append(f"its function ended {seconds(record.ended_late)} after the stop")
    return " · ".join(words)


def _shown(value: Any, limit: int = 80) -> str:
    from ...approvals._edits import MISSING

    if value is MISSING:
        return "(absent)"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def change_lines(record: CallRecord, limit: int = 20) -> list[str]:
    """What changed the call's arguments before it ran, one line per changed value:
    ``by you: /path "a.txt" → "data/a.txt"``."""
    from ...approvals._edits import json_diff

    lines: list[str] = []
    for change in record.changes:
        for pointer, old, new in json_diff(change.previous, change.arguments, limit):
            lines.append(f"by {change.who}: {pointer} {_shown(old)} → {_shown(new)}")
    if len(lines) > limit:
        lines = [*lines[:limit], f"… and {len(lines) - limit} more changes"]
    return lines
