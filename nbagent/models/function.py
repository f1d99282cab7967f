"""FunctionModel: a Python function plays the model, deciding each turn from the request."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

from ..generation import Request, StreamEvent
from .scripted import TurnLike, as_turn, play_turn

__all__ = ["FunctionModel"]

Decide = Callable[[Request], TurnLike | Awaitable[TurnLike] | AsyncIterator[StreamEvent]]


class FunctionModel:
    """Calls ``decide(request)`` for each turn.

    ``decide`` returns a turn (a :class:`~nbagent.models.Turn`, a string or a list of items),
    may be async, or may be an async generator yielding raw stream events for full control.
    """

    def __init__(self, decide: Decide, *, model: str = "function", chunk_delay: float = 0.0):
        self.decide = decide
        self.model = model
        self.chunk_delay = chunk_delay
        self.requests: list[Request] = []

    def __repr__(self) -> str:
        return f"FunctionModel({getattr(self.decide, '__name__', 'function')})"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        outcome: Any = self.decide(request)
        if inspect.isasyncgen(outcome):
            async for raw in outcome:
                yield cast(StreamEvent, raw)
            return
        if inspect.isawaitable(outcome):
            outcome = await outcome
        async for event in play_turn(as_turn(outcome), chunk_delay=self.chunk_delay):
            yield event
