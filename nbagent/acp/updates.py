"""One prompt turn of an external agent as nbagent's own events: what ``session/update``
notifications say becomes what a run of nbagent's loop would report, so every front end shows
it as a run (text and thoughts streaming, each tool call a card with its kind and status, the
plan as a card of its own that fills in, diffs as unified diffs in their call's result).

An ACP tool call maps onto a call of nbagent's: its id; its *kind* as the tool's name (``read``,
``edit``, ``execute`` … ``other``: what the session's rules match, ``%agent rules allow read``);
its title as the card's title; its ``rawInput`` as the arguments. A call that the agent never
says ended is closed when the turn ends, saying so; every call thus gets exactly one result.
The turn is bounded (updates, characters): :class:`TurnOverflow` says which bound it passed.
"""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..content import text_result
from ..events import (
    AgentEvent,
    AssistantTextDelta,
    ReasoningTextDelta,
    StepFinished,
    ToolArgumentsDelta,
    ToolCallReady,
    ToolCallStarted,
    ToolFinished,
    ToolProgress,
    ToolStarted,
)
from ..generation import Usage
from ..limits import ExternalAgentLimits
from ..tools import ToolCall

__all__ = ["PLAN_CALL", "Turn", "TurnOverflow"]

#: The id of the plan's card (one per turn).
PLAN_CALL = "acp-plan"
#: The finish reason a step reports for each ACP stop reason.
_FINISH: dict[str, Any] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "max_turn_requests": "other",
    "refusal": "content_filter",
    "cancelled": "other",
}
_PLAN_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class TurnOverflow(Exception):
    """The turn passed one of its bounds (``str()`` says which, in a sentence)."""


@dataclass
class _Call:
    call_id: str
    name: str
    title: str | None
    arguments: Any = None
    started_at: float = field(default_factory=time.monotonic)
    ready: bool = False
    running: bool = False
    ended: bool = False
    parts: list[str] = field(default_factory=list)
    raw_output: Any = None

    def tool_call(self) -> ToolCall:
        return ToolCall(self.call_id, self.name, _json(self.arguments))


def _json(value: Any) -> str:
    if value is None:
        return "{}"
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return json.dumps({"value": repr(value)[:1000]})


def _block_text(block: Any) -> str:
    """A content block as text (an image or audio as a note: the card shows text)."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(getattr(block, "text", ""))
    if kind == "resource_link":
        return f"[{getattr(block, 'name', '') or 'resource'}: {getattr(block, 'uri', '')}]"
    if kind == "resource":
        resource = getattr(block, "resource", None)
        text = getattr(resource, "text", None)
        uri = getattr(resource, "uri", "")
        return f"[{uri}]\n{text}" if isinstance(text, str) else f"[{uri}]"
    return f"[{kind or 'content'} not shown]"


def _diff(content: Any) -> str:
    path = str(getattr(content, "path", "file"))
    old = getattr(content, "old_text", None) or ""
    new = getattr(content, "new_text", "") or ""
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=f"a/{path}" if old else "/dev/null",
        tofile=f"b/{path}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


class Turn:
    """The events of one prompt turn, built from the agent's updates as they arrive.

    ``emit`` gets each event; ``step`` is the step the turn's events carry.
    """

    def __init__(
        self,
        emit: Callable[[AgentEvent], None],
        limits: ExternalAgentLimits,
        *,
        step: int = 1,
    ) -> None:
        self._emit = emit
        self._limits = limits
        self.step = step
        self.calls: dict[str, _Call] = {}
        self.text: list[str] = []
        self.updates = 0
        self.chars = 0
        self.usage = Usage()
        self.cost = ""

    # --- bounds ---------------------------------------------------------------------------------

    def _count(self, text: str = "") -> None:
        self.chars += len(text)
        if self.chars > self._limits.max_turn_chars:
            raise TurnOverflow(
                f"the agent streamed more than {self._limits.max_turn_chars} characters in one turn"
            )

    # --- updates --------------------------------------------------------------------------------

    def update(self, update: Any) -> None:
        """Show one ``session/update``'s ``update``; raises :class:`TurnOverflow` past a bound."""
        self.updates += 1
        if self.updates > self._limits.max_updates_per_turn:
            raise TurnOverflow(
                f"the agent sent more than {self._limits.max_updates_per_turn} updates in one turn"
            )
        kind = getattr(update, "session_update", "")
        if kind == "agent_message_chunk":
            text = _block_text(update.content)
            self._count(text)
            self.text.append(text)
            self._emit(AssistantTextDelta(self.step, text))
        elif kind == "agent_thought_chunk":
            text = _block_text(update.content)
            self._count(text)
            self._emit(ReasoningTextDelta(self.step, text))
        elif kind in ("tool_call", "tool_call_update"):
            self.tool_call(update)
        elif kind == "plan":
            self._plan(update.entries)
        elif kind == "usage_update":
            cost = getattr(update, "cost", None)
            if cost is not None:
                self.cost = f"{getattr(cost, 'amount', '')} {getattr(cost, 'currency', '')}"
        # user message echoes, commands, modes, config options, session info: not a run's

    def call(self, update: Any) -> _Call:
        """The call an update (or a permission request) is about, its card made on first
        sight (an agent may ask permission for a call it never reported)."""
        call_id = str(update.tool_call_id)
        found = self.calls.get(call_id)
        if found is None:
            if len(self.calls) >= self._limits.max_updates_per_turn:
                raise TurnOverflow("the agent reported more tool calls than a turn may hold")
            name = str(getattr(update, "kind", None) or "other")
            found = _Call(call_id, name, getattr(update, "title", None))
            self.calls[call_id] = found
            self._emit(ToolCallStarted(self.step, call_id, name, found.title))
        raw = getattr(update, "raw_input", None)
        if raw is not None and not found.ready:
            self._count(_json(raw))
            found.arguments = raw
        return found

    def ready(self, call: _Call) -> ToolCall:
        """The call's arguments are known from now on: its card shows them."""
        tool_call = call.tool_call()
        if not call.ready:
            call.ready = True
            if call.arguments is not None:
                self._emit(ToolArgumentsDelta(call.call_id, call.name, tool_call.arguments))
            # no raw input: no arguments (a card shows nothing for {}, not "null")
            shown = call.arguments if call.arguments is not None else {}
            self._emit(ToolCallReady(self.step, tool_call, shown))
        return tool_call

    def tool_call(self, update: Any) -> None:
        call = self.call(update)
        if call.ended:
            return  # the agent spoke of it after it ended: its result stands
        for content in getattr(update, "content", None) or ():
            kind = getattr(content, "type", "")
            if kind == "diff":
                text = _diff(content)
            elif kind == "terminal":
                text = f"[terminal {getattr(content, 'terminal_id', '')}]"
            else:
                text = _block_text(getattr(content, "content", None))
            self._count(text)
            call.parts.append(text)
        if getattr(update, "raw_output", None) is not None:
            call.raw_output = update.raw_output
        status = getattr(update, "status", None)
        if status in ("in_progress", "completed", "failed"):
            tool_call = self.ready(call)
            if not call.running:
                call.running = True
                self._emit(ToolStarted(tool_call, call.arguments))
        if status in ("completed", "failed"):
            self._end(call, "done" if status == "completed" else "error")
        elif call.running and getattr(update, "content", None):
            self._emit(
                ToolProgress(
                    call.call_id,
                    text_result(self._result_text(call)),
                    time.monotonic() - call.started_at,
                )
            )

    def _result_text(self, call: _Call) -> str:
        if call.parts:
            return "\n".join(call.parts)
        if call.raw_output is not None:
            return _json(call.raw_output)
        return ""

    def _end(self, call: _Call, status: Any, note: str = "") -> None:
        call.ended = True
        text = self._result_text(call) or note or ("done" if status == "done" else "failed")
        result = text_result(text)
        if status != "done":
            result = type(result)(result.content, is_error=True)
        self._emit(
            ToolFinished(call.tool_call(), result, status, time.monotonic() - call.started_at)
        )

    def _plan(self, entries: Any) -> None:
        lines = [
            f"{_PLAN_MARK.get(getattr(e, 'status', ''), '[ ]')} {getattr(e, 'content', '')}"
            for e in entries or ()
        ]
        text = "\n".join(lines) or "(empty plan)"
        self._count(text)
        plan = self.calls.get(PLAN_CALL)
        if plan is None:
            plan = _Call(PLAN_CALL, "plan", "Plan")
            self.calls[PLAN_CALL] = plan
            self._emit(ToolCallStarted(self.step, PLAN_CALL, "plan", "Plan"))
            self._emit(ToolStarted(self.ready(plan), None))
            plan.running = True
        plan.parts = [text]
        self._emit(ToolProgress(PLAN_CALL, text_result(text), time.monotonic() - plan.started_at))

    # --- the end --------------------------------------------------------------------------------

    def finish(self, stop_reason: str, usage: Usage | None = None) -> None:
        """Close every call still open (one result each) and end the step."""
        cancelled = stop_reason == "cancelled"
        for call in list(self.calls.values()):
            if call.ended:
                continue
            if call.call_id == PLAN_CALL:
                self._end(call, "done")
                continue
            self.ready(call)
            if cancelled:
                self._end(call, "cancelled", "cancelled: the turn was stopped")
            else:
                self._end(
                    call,
                    "error",
                    "the agent never said how this call ended (it may not have run)",
                )
        if usage is not None:
            self.usage = usage
        tool_calls = sum(1 for c in self.calls if c != PLAN_CALL)
        self._emit(
            StepFinished(self.step, self.usage, _FINISH.get(stop_reason, "other"), tool_calls)
        )
