"""Transcript: what happened in one run, kept from its events, in forms a saved notebook can hold.

Both front ends feed every event here. The transcript renders as Markdown and plain text (for
GitHub, nbconvert and frontends without widgets) and as JSON metadata (the approval decisions,
machine-readable). It holds no settings and no key: only what the run itself showed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Union

from ..approval import Decision
from ..events import (
    AgentEvent,
    ApprovalRequested,
    ApprovalResolved,
    AssistantTextDelta,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StepFinished,
    StepStarted,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolCallStarted,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from ..generation import Usage
from .render import code_span, fenced, pretty_arguments, safe_markdown, shorten

__all__ = ["CallRecord", "TextRecord", "Transcript", "call_line", "decision_words"]

_PREVIEW = 2_000


@dataclass
class TextRecord:
    """Assistant text of one step."""

    step: int
    text: str = ""


@dataclass
class CallRecord:
    """One tool call as the person saw it."""

    call_id: str
    name: str
    step: int = 0
    title: str | None = None
    arguments: str = ""
    input: Any = None
    status: str = "streaming"
    approval_asked: bool = False
    decision: Decision | None = None
    result_text: str = ""
    is_error: bool = False
    elapsed: float = 0.0
    started: float | None = None
    traceback: str | None = None

    @property
    def open(self) -> bool:
        return self.status in ("streaming", "ready", "waiting", "running")


Block = Union[TextRecord, CallRecord]


def decision_words(decision: Decision) -> str:
    """How a decision reads to a person: "approved by you", "denied by policy: …"."""
    who = {
        "person": "by you",
        "always": "(always allowed this session)",
        "auto": "by policy (auto)",
        "deny": "by policy",
        "rule": "by rule",
        "script": "by script",
        "error": "",
    }.get(decision.by, f"by {decision.by}" if decision.by else "")
    verb = "approved" if decision.approved else "denied"
    words = f"{verb} {who}".strip()
    if decision.always and decision.by == "person":
        words += " (always allow this tool)"
    if not decision.approved and decision.reason:
        words += f": {decision.reason}"
    return words


_STATUS_WORDS = {
    "streaming": "receiving arguments…",
    "ready": "",
    "waiting": "",
    "running": "running",
}


def call_line(record: CallRecord, now: float | None = None) -> str:
    """How one call stands, in words: "approved by you · done · 0.3 s"."""
    words = []
    if record.decision is not None:
        words.append(decision_words(record.decision))
    elif record.approval_asked and record.open:
        words.append("waiting for approval")
    status = _STATUS_WORDS.get(record.status, record.status)
    if status and not (record.status == "denied" and record.decision is not None):
        words.append(status)
    elapsed = record.elapsed
    if record.started is not None and record.open:
        elapsed = (now if now is not None else time.monotonic()) - record.started
    if elapsed >= 0.05:
        words.append(f"{elapsed:.1f} s")
    return " · ".join(words)


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
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    @property
    def elapsed(self) -> float:
        return (self.ended if self.ended is not None else time.monotonic()) - self.started

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    def handle(self, event: AgentEvent) -> None:
        if isinstance(event, AssistantTextDelta):
            last = self.blocks[-1] if self.blocks else None
            if not isinstance(last, TextRecord) or last.step != event.step:
                last = TextRecord(event.step)
                self.blocks.append(last)
            last.text += event.text
        elif isinstance(event, ToolArgumentsDelta):
            found = self.calls.get(event.call_id)
            if found is not None:
                found.arguments = event.text
        elif isinstance(event, ToolCallStarted):
            record = CallRecord(event.call_id, event.name, event.step, event.title)
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
            record.status = "waiting"
        elif isinstance(event, ApprovalResolved):
            found = self.calls.get(event.call_id)
            if found is not None:
                found.decision = event.decision
                if found.open:
                    found.status = "ready" if event.decision.approved else "denied"
        elif isinstance(event, ToolStarted):
            record = self._call(event.call.id, event.call.name)
            record.status = "running"
            record.started = time.monotonic()
        elif isinstance(event, ToolProgress):
            pass
        elif isinstance(event, ToolFinished):
            record = self._call(event.call.id, event.call.name)
            record.status = event.status
            record.result_text = event.result.text
            record.is_error = event.result.is_error
            record.elapsed = event.elapsed
            record.traceback = event.traceback
        elif isinstance(event, RunStarted):
            self.run_id, self.prompt, self.model = event.run_id, event.prompt, event.model
        elif isinstance(event, StepStarted):
            self.steps = event.step
        elif isinstance(event, StepFinished):
            self.usage = self.usage + event.usage
        elif isinstance(event, (RunFinished, RunFailed, RunCancelled)):
            self.end(event.result.stop_reason, event.result.usage)
            if isinstance(event, RunFailed):
                self.error = f"{type(event.error).__name__}: {event.error}"

    def end(self, stop_reason: str, usage: Usage | None = None, error: str | None = None) -> None:
        """Close the transcript (also used when the run never started or crashed)."""
        if self.ended is None:
            self.ended = time.monotonic()
        self.stop_reason = stop_reason
        if usage is not None:
            self.usage = usage
        if error is not None:
            self.error = error
        for record in self.calls.values():
            if record.open:
                record.status = "cancelled"

    def _call(self, call_id: str, name: str, step: int = 0) -> CallRecord:
        found = self.calls.get(call_id)
        if found is None:
            found = CallRecord(call_id, name, step)
            self.calls[call_id] = found
            self.blocks.append(found)
        return found

    # --- renderings ---------------------------------------------------------------------------

    def footer(self) -> str:
        """One line: stop reason, steps, tokens, time."""
        state = self.stop_reason or "running"
        tokens = f"{self.usage.input_tokens:,} in / {self.usage.output_tokens:,} out tokens"
        plural = "" if self.steps == 1 else "s"
        return f"{state} · {self.steps} step{plural} · {tokens} · {self.elapsed:.1f} s"

    def call_line(self, record: CallRecord, now: float | None = None) -> str:
        """Status words of one call: decision, status, time."""
        return call_line(record, now)

    def to_markdown(self) -> str:
        """The whole run as Markdown that renders safely anywhere."""
        head = f"**nbagent** · {self.run_id or 'run'} · model {code_span(self.model or '?')}"
        lines = [head, "", "> **You:** " + safe_markdown(self.prompt).replace("\n", "\n> "), ""]
        for block in self.blocks:
            if isinstance(block, TextRecord):
                if block.text.strip():
                    lines += [safe_markdown(block.text), ""]
                continue
            args = (
                pretty_arguments(block.input, block.arguments)
                if block.input is not None
                else (block.arguments)
            )
            title = f" ({safe_markdown(block.title)})" if block.title else ""
            status = safe_markdown(self.call_line(block))
            lines.append(f"**🔧 {safe_markdown(block.name)}**{title} — {status}")
            lines += ["", fenced(shorten(args, _PREVIEW), "json"), ""]
            if block.result_text:
                label = "Error" if block.is_error else "Result"
                lines += [f"{label}:", "", fenced(shorten(block.result_text, _PREVIEW)), ""]
        if self.error:
            lines += [f"**Error:** {safe_markdown(self.error)}", ""]
        lines.append(f"*{safe_markdown(self.footer())}*")
        return "\n".join(lines)

    def to_plain(self) -> str:
        """The whole run as plain text."""
        lines = [
            f"nbagent {self.run_id or 'run'} · model {self.model or '?'}",
            f"You: {self.prompt}",
        ]
        for block in self.blocks:
            if isinstance(block, TextRecord):
                if block.text.strip():
                    lines += ["", block.text.strip()]
                continue
            lines += ["", f"[tool] {block.name} {shorten(block.arguments, _PREVIEW)}"]
            lines.append(f"  {self.call_line(block)}")
            if block.result_text:
                prefix = "  error: " if block.is_error else "  → "
                lines.append(prefix + shorten(block.result_text, _PREVIEW).replace("\n", "\n    "))
        if self.error:
            lines += ["", f"Error: {self.error}"]
        lines += ["", self.footer()]
        return "\n".join(lines)

    def to_metadata(self) -> dict[str, Any]:
        """JSON-ready record: prompt, model, each call with its approval decision, totals."""
        calls = []
        for record in self.calls.values():
            decision = record.decision
            calls.append(
                {
                    "id": record.call_id,
                    "name": record.name,
                    "arguments": record.arguments,
                    "status": record.status,
                    "is_error": record.is_error,
                    "elapsed": round(record.elapsed, 3),
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
        return {
            "version": 1,
            "run_id": self.run_id,
            "prompt": self.prompt,
            "model": self.model,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "steps": self.steps,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
            "elapsed": round(self.elapsed, 3),
            "text": texts[-1] if texts else "",
            "calls": calls,
        }

    def bundle(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(data, metadata)`` of a display output holding the whole run."""
        data = {"text/markdown": self.to_markdown(), "text/plain": self.to_plain()}
        return data, {"nbagent": self.to_metadata()}
