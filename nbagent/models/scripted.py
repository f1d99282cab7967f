"""ScriptedModel: a Generator that plays given turns, for tests, teaching and benchmarks.

Each turn is a :class:`Turn` of items — :class:`Text`, :class:`Call`, :class:`Reasoning`,
:class:`Pause`, :class:`Fail` (an error mid-stream) — or a plain string. Calls stream their
arguments in fragments exactly like a provider; the finish reason defaults to "tool_calls" when
the turn calls tools, else "stop". Every request is recorded in :attr:`ScriptedModel.requests`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from ..errors import AgentError
from ..errors import StreamError as StreamBroken
from ..generation import (
    Finish,
    FinishReason,
    ReasoningDelta,
    Request,
    StreamError,
    StreamEvent,
    TextDelta,
    ToolCallReceived,
    ToolInputDelta,
    ToolInputEnd,
    ToolInputStart,
    Usage,
)
from ..tools import ToolCall

__all__ = ["Call", "Fail", "Pause", "Reasoning", "ScriptedModel", "Text", "Turn", "TurnLike"]

_ids = itertools.count(1)


@dataclass(frozen=True)
class Text:
    """Assistant text, streamed in ``chunks`` pieces."""

    text: str
    chunks: int = 1


@dataclass(frozen=True)
class Reasoning:
    """Model reasoning text."""

    text: str


@dataclass(frozen=True)
class Call:
    """A tool call; ``arguments`` is a dict (sent as JSON) or raw text (sent as-is, even broken)."""

    name: str
    arguments: Any = field(default_factory=dict)
    id: str | None = None
    chunks: int = 1


@dataclass(frozen=True)
class Pause:
    """Wait this many seconds mid-stream (to show streaming, or to test cancellation)."""

    seconds: float


@dataclass(frozen=True)
class Fail:
    """End the stream with an error event (a broken response)."""

    message: str = "the stream broke"


Item = Union[Text, Reasoning, Call, Pause, Fail]


@dataclass(frozen=True)
class Turn:
    """One scripted response. ``finish`` overrides the inferred finish reason."""

    items: tuple[Item, ...]
    finish: FinishReason | None = None
    usage: Usage | None = None

    def __init__(
        self, *items: Item | str, finish: FinishReason | None = None, usage: Usage | None = None
    ) -> None:
        object.__setattr__(
            self, "items", tuple(Text(i) if isinstance(i, str) else i for i in items)
        )
        object.__setattr__(self, "finish", finish)
        object.__setattr__(self, "usage", usage)


TurnLike = Union[Turn, str, Sequence[Item]]


def as_turn(turn: TurnLike) -> Turn:
    if isinstance(turn, Turn):
        return turn
    if isinstance(turn, str):
        return Turn(Text(turn))
    return Turn(*turn)


def _split(text: str, pieces: int) -> Iterator[str]:
    """``text`` in about ``pieces`` fragments, one at a time (never all held at once)."""
    if pieces <= 1 or len(text) <= 1:
        yield text
        return
    size = max(1, -(-len(text) // pieces))
    for i in range(0, len(text), size):
        yield text[i : i + size]


async def play_turn(turn: Turn, *, chunk_delay: float = 0.0) -> AsyncIterator[StreamEvent]:
    """Stream one turn as provider events."""
    calls: list[ToolCall] = []
    out_chars = 0
    for item in turn.items:
        if isinstance(item, Text):
            for piece in _split(item.text, item.chunks):
                out_chars += len(piece)
                yield TextDelta(piece)
                if chunk_delay:
                    await asyncio.sleep(chunk_delay)
        elif isinstance(item, Reasoning):
            yield ReasoningDelta(item.text)
        elif isinstance(item, Call):
            call_id = item.id or f"call_{next(_ids)}"
            raw = item.arguments if isinstance(item.arguments, str) else json.dumps(item.arguments)
            out_chars += len(raw)
            yield ToolInputStart(call_id, item.name)
            for piece in _split(raw, item.chunks):
                yield ToolInputDelta(call_id, piece)
                if chunk_delay:
                    await asyncio.sleep(chunk_delay)
            yield ToolInputEnd(call_id)
            calls.append(ToolCall(call_id, item.name, raw))
        elif isinstance(item, Pause):
            await asyncio.sleep(item.seconds)
        elif isinstance(item, Fail):
            yield StreamError(StreamBroken(item.message))
            return
    for call in calls:
        yield ToolCallReceived(call)
    reason: FinishReason = turn.finish or ("tool_calls" if calls else "stop")
    usage = turn.usage or Usage(0, max(1, out_chars // 4))
    yield Finish(reason, usage, reason)


class ScriptedModel:
    """Plays ``turns`` in order, one per request; records every request it received."""

    def __init__(
        self, turns: Iterable[TurnLike] = (), *, model: str = "scripted", chunk_delay: float = 0.0
    ) -> None:
        self.turns: list[Turn] = [as_turn(t) for t in turns]
        self.model = model
        self.chunk_delay = chunk_delay
        self.requests: list[Request] = []
        self._next = 0

    def add(self, *turns: TurnLike) -> None:
        """Append more turns to the script."""
        self.turns.extend(as_turn(t) for t in turns)

    @property
    def remaining(self) -> int:
        return len(self.turns) - self._next

    def __repr__(self) -> str:
        return f"ScriptedModel({self.remaining} of {len(self.turns)} turns left)"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if self._next >= len(self.turns):
            raise AgentError(
                f"ScriptedModel has no turn left (it was given {len(self.turns)}): add more turns"
            )
        turn = self.turns[self._next]
        self._next += 1
        async for event in play_turn(turn, chunk_delay=self.chunk_delay):
            yield event
