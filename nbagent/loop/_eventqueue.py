"""The queue between a run and whoever reads its events: unbounded in time, bounded in memory.

A run must never wait for its reader (a front end may read slowly, or stop reading), so putting
never blocks. Instead, once more than ``backlog`` events wait unread, consecutive deltas of one
stream (assistant text, reasoning, one call's arguments) are merged into one pending event as
they arrive, and a call's progress updates replace each other: a slow reader then costs memory
in proportion to the text streamed, not to the number of fragments, and still receives every
character in order. Merged events are built when read.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from .._ground.textbuf import TextBuffer
from ..events import (
    AgentEvent,
    AssistantTextDelta,
    ReasoningTextDelta,
    ToolArgumentsDelta,
    ToolProgress,
)

__all__ = ["EventQueue"]


class _MergedText:
    """Consecutive text deltas of one step (assistant or reasoning), waiting unread."""

    __slots__ = ("kind", "pieces", "step")

    def __init__(self, first: AssistantTextDelta | ReasoningTextDelta) -> None:
        self.kind = type(first)
        self.step = first.step
        self.pieces = TextBuffer()
        self.pieces.append(first.text)

    def build(self) -> AgentEvent:
        return self.kind(self.step, self.pieces.text())


class _MergedArguments:
    """Consecutive argument deltas of one call, waiting unread: a range of its text buffer."""

    __slots__ = ("buffer", "call_id", "end", "name", "start")

    def __init__(self, first: ToolArgumentsDelta, buffer: TextBuffer) -> None:
        self.call_id = first.call_id
        self.name = first.name
        self.buffer = buffer
        self.end = first._end
        self.start = first._end - len(first.delta)

    def build(self) -> AgentEvent:
        delta = self.buffer.slice(self.start, self.end)
        return ToolArgumentsDelta(self.call_id, self.name, delta, source=(self.buffer, self.end))


class EventQueue:
    """Events of one run in order; ``None`` marks the end (and is returned ever after)."""

    def __init__(self, backlog: int) -> None:
        self.items: deque[Any] = deque()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._backlog = backlog
        self._ended = False

    def __len__(self) -> int:
        return len(self.items)

    def put(self, event: AgentEvent | None) -> None:
        """Add an event (never blocks); ``None`` ends the stream."""
        if event is None or len(self.items) < self._backlog or not self._merge(event):
            self.items.append(event)
        self._wake()

    def merged_tail(self) -> _MergedArguments | None:
        """The merged argument delta at the tail, if any. While it stays the tail (``tail is
        queue.items[-1]``), the producer may grow it by setting its ``end``: the fast path for
        a flood of fragments."""
        tail = self.items[-1] if self.items else None
        return tail if type(tail) is _MergedArguments else None

    def extend_text(self, kind: type, step: int, text: str) -> bool:
        """Fast path: add ``text`` to a merged text delta of ``kind`` and ``step`` at the tail."""
        items = self.items
        if items:
            tail = items[-1]
            if type(tail) is _MergedText and tail.kind is kind and tail.step == step:
                tail.pieces.append(text)
                return True
        return False

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    def _merge(self, event: AgentEvent) -> bool:
        items = self.items
        tail = items[-1] if items else None
        if isinstance(event, ToolProgress):
            if isinstance(tail, ToolProgress) and tail.call_id == event.call_id:
                items[-1] = event  # progress is provisional: the newest says it all
                return True
            return False
        if isinstance(event, ToolArgumentsDelta):
            if type(tail) is _MergedArguments and tail.call_id == event.call_id:
                tail.end = event._end
                return True
            if event._source is None:
                return False
            merged = _MergedArguments(event, event._source)
            if isinstance(tail, ToolArgumentsDelta) and tail._source is event._source:
                merged.start = tail._end - len(tail.delta)  # same buffer: the same call
                items[-1] = merged
                return True
            items.append(merged)
            return True
        if isinstance(event, (AssistantTextDelta, ReasoningTextDelta)):
            if not self.extend_text(type(event), event.step, event.text):
                items.append(_MergedText(event))
            return True
        return False

    def clear(self) -> None:
        """Drop every event waiting (the end marker too)."""
        self.items.clear()

    def drain(self) -> list[AgentEvent]:
        """Every event waiting now, in order, without waiting (up to the end marker)."""
        out: list[AgentEvent] = []
        while self.items:
            item = self.items.popleft()
            if item is None:
                self._ended = True
                break
            merged = type(item) is _MergedText or type(item) is _MergedArguments
            out.append(item.build() if merged else item)
        return out

    async def get(self) -> AgentEvent | None:
        """The next event, waiting for one; ``None`` once the run has ended."""
        while not self.items:
            if self._ended:
                return None
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                raise
        item = self.items.popleft()
        if item is None:
            self._ended = True
            return None
        if type(item) is _MergedText or type(item) is _MergedArguments:
            built: AgentEvent = item.build()
            return built
        event: AgentEvent = item
        return event
