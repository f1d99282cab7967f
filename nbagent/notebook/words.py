"""How a run's decisions, pauses and durations read to a person, in the live view, the saved
run and its record alike: "approved by you after 2.1 s", "‖ step 3: … went on"."""

from __future__ import annotations

from ..approval import Decision
from ..events import StepResumed
from ..stepping import StepPause

__all__ = ["PAUSE_MARK", "decision_words", "resumed_words", "seconds"]


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
