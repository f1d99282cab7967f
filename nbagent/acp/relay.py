"""Events from the agent's thread to a reader on another event loop, in order.

The agent's process and connection live on a loop of their own (so that one conversation can
go on from cell to cell whichever loop each cell runs on); a run's reader is on the kernel's
loop, or a worker's. Text that the reader has not taken yet is merged into the delta before it
(nothing is lost), so a slow reader costs memory in proportion to the text, not to the number
of chunks; everything else is bounded by the turn's own bounds.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

from ..events import AgentEvent, AssistantTextDelta, ReasoningTextDelta

__all__ = ["EventRelay"]


class EventRelay:
    """A one-way channel of events: :meth:`put` from any thread, :meth:`get` on one loop."""

    def __init__(self) -> None:
        self._items: deque[AgentEvent] = deque()
        self._lock = threading.Lock()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False

    def put(self, event: AgentEvent) -> None:
        with self._lock:
            if self._closed:
                return
            last = self._items[-1] if self._items else None
            if (
                isinstance(event, (AssistantTextDelta, ReasoningTextDelta))
                and type(last) is type(event)
                and last.step == event.step
            ):
                self._items[-1] = type(event)(event.step, last.text + event.text)
            else:
                self._items.append(event)
            waiter = self._waiter
        self._wake(waiter)

    def close(self) -> None:
        """No more events: the reader gets what is queued, then the end."""
        with self._lock:
            self._closed = True
            waiter = self._waiter
        self._wake(waiter)

    @staticmethod
    def _wake(waiter: asyncio.Future[None] | None) -> None:
        if waiter is None:
            return

        def wake() -> None:
            if not waiter.done():
                waiter.set_result(None)

        try:
            waiter.get_loop().call_soon_threadsafe(wake)
        except RuntimeError:  # the reader's loop is closed: nobody is waiting any more
            pass

    async def get(self) -> Any:
        """The next event, or None once the relay is closed and empty."""
        while True:
            with self._lock:
                if self._items:
                    return self._items.popleft()
                if self._closed:
                    return None
                self._waiter = asyncio.get_running_loop().create_future()
                waiter = self._waiter
            try:
                await waiter
            finally:
                with self._lock:
                    if self._waiter is waiter:
                        self._waiter = None
